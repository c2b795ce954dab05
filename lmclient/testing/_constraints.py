"""Read the constrained-decoding request a body carries, in any server's dialect.

Servers spell the same constraint many ways (``structured_outputs.json``, ``guided_json``,
``response_format``, SGLang's string ``json_schema``, llama.cpp's ``grammar``, ...). Tests
assert on one neutral :class:`Constraint` to check what their request asked for, whatever
dialect the client chose (:func:`read_constraint` reads every placement). The fake answers
from :func:`served_constraint`: only the fields the server kind it impersonates obeys, by the
table the client relies on too (``lmclient._servers``), so a field that server silently ignores
(``guided_json`` on vLLM >= 0.12, ``response_format`` on TGI's completions) leaves the answer
unconstrained there too, as it would in production.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from lmclient._servers import SERVERS

from ._errors import ConstraintError

__all__ = ["Constraint", "ConstraintKind", "read_constraint", "served_constraint"]

ConstraintKind = Literal[
    "json_schema", "json_object", "regex", "choice", "grammar", "structural_tag", "none"
]


@dataclass(frozen=True)
class Constraint:
    """A constraint in neutral form.

    ``value`` depends on ``kind``: the schema (``dict`` or ``bool``) for ``json_schema``, the
    pattern for ``regex``, the list of options for ``choice``, the grammar text for
    ``grammar``, the structural tag (an object: ``{"type": "structural_tag", "format": ...}``,
    or the older ``structures`` + ``triggers``) for ``structural_tag``, and ``None`` for
    ``json_object`` and ``none``. ``field`` names where it was
    found, e.g. ``"structured_outputs.json"`` or ``"response_format"``.
    """

    kind: ConstraintKind
    value: Any = None
    field: str = ""


NO_CONSTRAINT = Constraint("none")


def read_constraint(body: object) -> Constraint:
    """The first constraint found in a request body; ``kind == "none"`` when there is none.

    Raises :class:`ConstraintError` when a constraint field is malformed (a schema string that
    is not JSON, a regex that is not a string, an unknown ``response_format`` type, ...).
    """
    if not isinstance(body, Mapping):
        return NO_CONSTRAINT
    for reader in _READERS:
        found = reader(body)
        if found is not None:
            return found
    return NO_CONSTRAINT


def served_constraint(body: object, server: str | None, endpoint: str) -> Constraint:
    """The constraint a server of kind ``server`` (a key of lmclient's table of servers)
    enforces for this body on ``endpoint`` (``"chat"`` or ``"completions"``): fields it does
    not obey are ignored, as it ignores them. ``None`` and ``"generic"`` (an unknown server)
    read every placement, like :func:`read_constraint`. Raises :class:`ConstraintError` as
    that does."""
    known = SERVERS.get(server or "generic")
    if known is None or not isinstance(body, Mapping):
        return read_constraint(body)
    obeyed = known.obeys[endpoint]
    return read_constraint({k: v for k, v in body.items() if k in obeyed})


def _structured_outputs(body: Mapping[str, Any]) -> Constraint | None:
    """vLLM >= 0.10.2: ``structured_outputs: {json | regex | choice | grammar | json_object |
    structural_tag}`` (the last a JSON string)."""
    so = body.get("structured_outputs")
    if so is None:
        return None
    if not isinstance(so, Mapping):
        raise ConstraintError("structured_outputs must be an object")
    if so.get("json_object"):
        return Constraint("json_object", None, "structured_outputs.json_object")
    return _first_of(
        so,
        "structured_outputs.",
        json="json",
        regex="regex",
        choice="choice",
        grammar="grammar",
        structural_tag="structural_tag",
    )


def _guided(body: Mapping[str, Any]) -> Constraint | None:
    """vLLM < 0.12: top-level ``guided_json``, ``guided_regex``, ``guided_choice``, ..."""
    return _first_of(
        body,
        "",
        guided_json="json",
        guided_regex="regex",
        guided_choice="choice",
        guided_grammar="grammar",
    )


def _response_format(body: Mapping[str, Any]) -> Constraint | None:
    """OpenAI-style, llama.cpp (``json_object`` + ``schema``) and TGI (``type`` + ``value``)."""
    rf = body.get("response_format")
    if rf is None:
        return None
    if not isinstance(rf, Mapping):
        raise ConstraintError("response_format must be an object")
    kind = rf.get("type")
    field = "response_format"
    if kind == "text":
        return None
    if kind == "json_schema":
        if isinstance(rf.get("json_schema"), Mapping):  # OpenAI, vLLM, SGLang, llama.cpp, ...
            return _schema(rf["json_schema"].get("schema"), field)
        if "value" in rf:  # TGI: {"type": "json_schema", "value": {"name": ..., "schema": ...}}
            value = rf["value"]
            return _schema(value.get("schema") if isinstance(value, Mapping) else None, field)
        return _schema(rf.get("schema"), field)  # SGLang's flat form
    if kind in ("json", "json_object"):
        if "value" in rf:  # TGI: the schema itself, as an object or a JSON string
            return _schema(rf["value"], field)
        if "schema" in rf:  # llama.cpp: {"type": "json_object", "schema": {...}}
            return _schema(rf["schema"], field)
        return Constraint("json_object", None, field)
    if kind == "regex":  # TGI
        return _regex(rf.get("value"), field)
    if kind == "structural_tag":  # vLLM, SGLang: the object itself
        return _structural_tag(dict(rf), field)
    raise ConstraintError(f"unsupported response_format type {kind!r}")


def _top_level(body: Mapping[str, Any]) -> Constraint | None:
    """SGLang (``json_schema`` string, ``regex``, ``ebnf``) and llama.cpp (object, ``grammar``)."""
    return _first_of(body, "", json_schema="json", regex="regex", ebnf="grammar", grammar="grammar")


def _first_of(source: Mapping[str, Any], prefix: str, **keys: str) -> Constraint | None:
    """The first of ``keys`` (field name -> neutral kind) present and not null in ``source``."""
    for key, kind in keys.items():
        value = source.get(key)
        if value is not None:
            return _PARSERS[kind](value, prefix + key)
    return None


def _schema(value: Any, field: str) -> Constraint:
    if isinstance(value, str):
        try:
            value = msgspec.json.decode(value)
        except msgspec.DecodeError as exc:
            raise ConstraintError(f"{field}: the schema string is not JSON ({exc})") from None
    if not isinstance(value, (dict, bool)):
        raise ConstraintError(f"{field}: expected a JSON schema, got {type(value).__name__}")
    return Constraint("json_schema", value, field)


def _regex(value: Any, field: str) -> Constraint:
    if not isinstance(value, str):
        raise ConstraintError(f"{field}: a regex must be a string")
    return Constraint("regex", value, field)


def _choice(value: Any, field: str) -> Constraint:
    if not (isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
        raise ConstraintError(f"{field}: a choice must be a non-empty list of strings")
    return Constraint("choice", list(value), field)


def _grammar(value: Any, field: str) -> Constraint:
    if not (isinstance(value, str) and value.strip()):
        raise ConstraintError(f"{field}: a grammar must be a non-empty string")
    return Constraint("grammar", value, field)


def _structural_tag(value: Any, field: str) -> Constraint:
    if isinstance(value, str):  # vLLM's structured_outputs.structural_tag: a JSON string
        try:
            value = msgspec.json.decode(value)
        except msgspec.DecodeError as exc:
            raise ConstraintError(f"{field}: the structural tag is not JSON ({exc})") from None
    if not isinstance(value, dict) or not (
        isinstance(value.get("format"), dict) or isinstance(value.get("structures"), list)
    ):
        raise ConstraintError(
            f"{field}: a structural tag is an object with a 'format' (or 'structures' and "
            "'triggers')"
        )
    return Constraint("structural_tag", value, field)


_PARSERS: dict[str, Callable[[Any, str], Constraint]] = {
    "json": _schema,
    "regex": _regex,
    "choice": _choice,
    "grammar": _grammar,
    "structural_tag": _structural_tag,
}
_Reader = Callable[[Mapping[str, Any]], "Constraint | None"]
_READERS: tuple[_Reader, ...] = (_structured_outputs, _guided, _response_format, _top_level)
