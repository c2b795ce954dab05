"""Whether an answer shows that its constraint was never applied: a text no decoder held to the
constraint could have begun with.

A server that accepts a constraint field and ignores it (or a gateway in front of it that drops
it) answers 200 with free text, and a model left free writes prose; cut at ``max_tokens``, that
looked like truncation ("raise max_tokens"), which points the wrong way. Only the start of the
text is read, and only what the constraint rules out for certain counts: the first character of
a JSON value of the schema's types (``{`` for an object), or a prefix of one of a choice's
options. A text that could still be a valid value's beginning is never called unapplied.
"""

from __future__ import annotations

import functools
from typing import Any

import msgspec

from ._dialects import Plan
from ._output.types import OutputSpec

__all__ = ["unapplied"]

_JSON_SPACE = " \t\n\r"
_NUMBER = "-0123456789"
_STARTS = {
    "object": "{",
    "array": "[",
    "string": '"',
    "integer": _NUMBER,
    "number": _NUMBER,
    "boolean": "tf",
    "null": "n",
}
_ANY = frozenset("".join(_STARTS.values()))


def unapplied(spec: OutputSpec[Any], plan: Plan, text: str) -> str | None:
    """Why ``text`` cannot have come out of ``plan``'s constraint (for the error's message,
    without the text: that is the error's own), or ``None`` when it may have (or the
    constraint is not one whose starts are known here)."""
    if not plan.fields or not text:
        return None
    if spec.kind == "choice" and not plan.wrapped and plan.decode is spec.decode:
        if any(option.startswith(text[: len(option)]) for option in spec.options):
            return None  # the raw text of a native choice: an option, or a cut one
        return f"the answer begins as none of the options {list(spec.options)!r} does"
    scalar = spec.output_type in (bool, int, float)
    if spec.kind in ("grammar", "text") or (
        spec.kind == "regex" and not scalar and plan.decode is spec.decode
    ):
        return None  # a grammar's or a Regex's starts are not worked out here
    stripped = text.lstrip(_JSON_SPACE)
    if not stripped:
        return None
    if plan.wrapped:
        allowed: frozenset[str] | None = frozenset("{")
        encodings: tuple[str, ...] | None = None
    else:
        allowed, encodings = _starts(spec)
    if encodings is not None and any(e.startswith(stripped[: len(e)]) for e in encodings):
        return None
    if encodings is not None:
        return f"the answer begins as none of the values {list(encodings)!r} does"
    if stripped[0] in (_ANY if allowed is None else allowed):
        return None
    if allowed is None:
        return "the answer does not begin as a JSON value must"
    return f"the answer does not begin with one of {''.join(sorted(allowed))!r}, as the type must"


@functools.lru_cache(maxsize=256)
def _starts(spec: OutputSpec[Any]) -> tuple[frozenset[str] | None, tuple[str, ...] | None]:
    """The first characters a value of ``spec``'s schema can begin with (``None``: any JSON),
    and, for an ``enum`` or ``const`` root, the values' encodings."""
    schema = spec.schema if spec.schema is not None else {}
    defs = schema.get("$defs", {}) if isinstance(schema, dict) else {}
    root = _resolve(schema, defs)
    if isinstance(root, dict) and ("enum" in root or "const" in root):
        values = root["enum"] if "enum" in root else [root["const"]]
        encodings = tuple(msgspec.json.encode(v).decode() for v in values)
        return frozenset(e[0] for e in encodings), encodings
    return _first(root, defs, 0), None


def _resolve(schema: Any, defs: dict[str, Any]) -> Any:
    ref = schema.get("$ref") if isinstance(schema, dict) else None
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return defs.get(ref.removeprefix("#/$defs/"), {})
    return schema


def _first(schema: Any, defs: dict[str, Any], depth: int) -> frozenset[str] | None:
    schema = _resolve(schema, defs)
    if not isinstance(schema, dict) or depth > 8:
        return None
    if "enum" in schema or "const" in schema:
        values = schema["enum"] if "enum" in schema else [schema["const"]]
        return frozenset(msgspec.json.encode(v).decode()[0] for v in values)
    branches = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(branches, list):
        found: set[str] = set()
        for branch in branches:
            starts = _first(branch, defs, depth + 1)
            if starts is None:
                return None
            found |= starts
        return frozenset(found)
    kind = schema.get("type")
    kinds = [kind] if isinstance(kind, str) else kind
    if not isinstance(kinds, list) or not all(k in _STARTS for k in kinds):
        return None
    return frozenset("".join(_STARTS[k] for k in kinds))
