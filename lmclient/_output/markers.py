"""The output-type markers a user writes where a Python type cannot say it: a regex, a grammar, a
set of strings, a JSON schema. Each checks its arguments when made, so a bad marker is an error
at the line that wrote it, before any request; `compile_output` turns them into specs.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from .patterns import gbnf_alternation

if TYPE_CHECKING:
    from typing_extensions import TypeForm

__all__ = ["MAX_OPTIONAL_REGIONS", "Choice", "Grammar", "JsonSchema", "Regex", "Tagged"]

T = TypeVar("T")


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


# A tag's name: what a model writes between angle brackets, and what a grammar quotes as is.
_TAG_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]{0,63}")
# A finite ``at_most`` above ``at_least`` is written as that many nested optional regions, in
# the grammar and in the structural tag: bounded, as every repeat lmclient sends is.
MAX_OPTIONAL_REGIONS = 64


class Tagged(Generic[T]):
    """Free text with typed regions: the model writes as it likes, and each ``<tag>…</tag>``
    region holds a value of ``type`` (a JSON type in its compact form, a ``Literal``/``Enum``/
    ``Choice`` option, ``int``/``float``/``bool``, or ``str`` for any text), between
    ``at_least`` and ``at_most`` regions (``None``: no bound). Returns a
    `lmclient.TaggedText`. ``Tagged(Answer)`` is prose, then ``<answer>{…}</answer>``, and
    the end: the model may reason in words, and its answer is constrained and typed."""

    __slots__ = ("at_least", "at_most", "tag", "type")

    def __init__(
        self,
        type: TypeForm[T],
        tag: str = "answer",
        *,
        at_least: int = 1,
        at_most: int | None = 1,
    ) -> None:
        if not isinstance(tag, str) or not _TAG_NAME.fullmatch(tag):
            raise ValueError(
                "a Tagged tag is a name of 1 to 64 letters, digits, '_', '.', ':' or '-', "
                f"starting with a letter, not {tag!r}"
            )
        if isinstance(at_least, bool) or not isinstance(at_least, int) or at_least < 0:
            raise ValueError(f"Tagged at_least is an int >= 0, not {at_least!r}")
        if at_most is not None and (
            isinstance(at_most, bool) or not isinstance(at_most, int) or at_most < max(at_least, 1)
        ):
            raise ValueError(
                f"Tagged at_most is None or an int >= max(at_least, 1), not {at_most!r}"
            )
        if at_most is not None and at_most - at_least > MAX_OPTIONAL_REGIONS:
            raise ValueError(
                f"Tagged allows at most {MAX_OPTIONAL_REGIONS} optional regions "
                f"(at_most - at_least); use at_most=None for no bound"
            )
        self.type: Any = type
        self.tag = tag
        self.at_least = at_least
        self.at_most = at_most

    def _key(self) -> tuple[Any, ...]:
        return (self.type, self.tag, self.at_least, self.at_most)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tagged) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        shown = self.type.__name__ if isinstance(self.type, type) else repr(self.type)
        return f"Tagged({shown}, {self.tag!r}, at_least={self.at_least}, at_most={self.at_most})"
