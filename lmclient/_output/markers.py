"""The output-type markers a user writes where a Python type cannot say it: a regex, a grammar, a
set of strings, a JSON schema. Each checks its arguments when made, so a bad marker is an error
at the line that wrote it, before any request; `compile_output` turns them into specs.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .patterns import gbnf_alternation

__all__ = ["Choice", "Grammar", "JsonSchema", "Regex"]


@dataclasses.dataclass(frozen=True)
class Regex:
    """Output must fully match ``pattern`` (Python `re` syntax, which the servers' engines share
    for the common subset); the text is returned after a client-side ``re.fullmatch``."""

    pattern: str

    def __post_init__(self) -> None:
        if not isinstance(self.pattern, str) or not self.pattern:
            raise TypeError("Regex(pattern) needs a non-empty str")
        try:
            re.compile(self.pattern)
        except re.error as exc:
            raise ValueError(f"invalid regex {self.pattern!r}: {exc}") from None


@dataclasses.dataclass(frozen=True)
class Grammar:
    """Output must follow a context-free grammar. ``syntax="gbnf"`` is the ``root ::= …`` EBNF
    read by llama.cpp, xgrammar, SGLang and vLLM; ``"lark"`` is read by vLLM only."""

    text: str
    syntax: Literal["gbnf", "lark"] = "gbnf"

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise TypeError("Grammar(text) needs a non-empty str")
        if self.syntax not in ("gbnf", "lark"):
            raise ValueError(f"Grammar syntax must be 'gbnf' or 'lark', not {self.syntax!r}")

    @classmethod
    def from_choices(cls, options: Sequence[str]) -> Grammar:
        """A GBNF grammar accepting exactly one of ``options`` (exact: every option is quoted)."""
        return cls(gbnf_alternation(_check_options(options)))


@dataclasses.dataclass(frozen=True)
class Choice:
    """Output must be exactly one of ``options``; returns the chosen string."""

    options: tuple[str, ...]

    def __init__(self, options: Sequence[str]) -> None:
        object.__setattr__(self, "options", _check_options(options))


class JsonSchema:
    """Output must be JSON valid against ``schema``; decoded into ``type`` when given, else into
    plain JSON values checked against the schema on the client (see
    `lmclient._output.jsonschema`)."""

    __slots__ = ("schema", "type")

    def __init__(self, schema: Mapping[str, Any], type: Any = None) -> None:
        if not isinstance(schema, Mapping):
            raise TypeError("JsonSchema(schema) needs a mapping")
        self.schema: dict[str, Any] = dict(schema)
        self.type = type

    def __repr__(self) -> str:
        return f"JsonSchema({self.schema!r}{'' if self.type is None else f', type={self.type!r}'})"


def _check_options(options: Sequence[str]) -> tuple[str, ...]:
    if isinstance(options, str) or not isinstance(options, Sequence):
        raise TypeError("choices must be a sequence of str")
    opts = tuple(options)
    if not opts or not all(isinstance(o, str) for o in opts):
        raise TypeError("choices must be a non-empty sequence of str")
    if len(set(opts)) != len(opts):
        raise ValueError(f"choices must be distinct, got {opts!r}")
    return opts
