"""``extra_body``, merged into the request body lmclient builds.

Servers nest some fields in objects (vLLM's ``structured_outputs``, ``response_format``,
``stream_options``...), so a key of extra_body that lmclient also sends is merged into
lmclient's object key by key, at every depth, instead of replacing it whole:
``{"structured_outputs": {"disable_fallback": True}}`` keeps the output type's schema beside the
new key. Where lmclient's object is the output type's constraint, extra_body may add options
beside it but never change it: a value lmclient set there, or a second constraint next to it, is
refused (``ValueError``) before anything is sent. The server would otherwise constrain the output
to something else than the type lmclient validates against, or refuse the request (vLLM: "You
must use one kind of structured outputs constraint").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._servers import CONSTRAINT_FIELDS

__all__ = ["merge_extra"]

# Top-level fields that constrain the output on some server; the guided_* options beside
# guided_json (and the others) constrain nothing by themselves.
_KINDS = CONSTRAINT_FIELDS - {"guided_decoding_backend", "guided_whitespace_pattern"}
# The objects of the constraint fields that take options beside the constraint, with the keys
# that are constraints there (a server obeys one kind): every other object is the constraint
# itself (a schema, a grammar), to be left as the output type made it.
_OPEN: dict[tuple[str, ...], frozenset[str]] = {
    ("structured_outputs",): frozenset(
        {"json", "regex", "choice", "grammar", "json_object", "structural_tag"}
    ),
    ("response_format",): frozenset({"type", "json_schema", "schema", "value"}),
    ("response_format", "json_schema"): frozenset({"schema"}),
}
_INSTEAD = (
    "to send another constraint, make it the output type (lmclient.JsonSchema, Regex, Grammar "
    "or Choice)"
)


def merge_extra(body: dict[str, Any], extra: Mapping[str, Any], fields: Mapping[str, Any]) -> None:
    """Merge ``extra`` into ``body``, whose constraint fields are ``fields`` (the dialect's plan
    for the output type; empty for free text). ``body``'s own objects are replaced by merged
    copies, never changed: they may be shared with other requests."""
    for name, value in extra.items():
        if name in fields:
            body[name] = _constraint(fields[name], value, (name,))
        elif fields and name in _KINDS:
            raise ValueError(
                f"extra_body field {name!r} would add a second constraint beside the output "
                f"type's {', '.join(map(repr, fields))}, and a server obeys only one; {_INSTEAD}"
            )
        else:
            body[name] = _merged(body.get(name), value)


def _merged(mine: Any, theirs: Any) -> Any:
    """``theirs`` merged into ``mine`` where both are objects; else ``theirs``."""
    if not (isinstance(mine, dict) and isinstance(theirs, dict)):
        return theirs
    out = dict(mine)
    for key, value in theirs.items():
        out[key] = _merged(out.get(key), value)
    return out


def _constraint(mine: Any, theirs: Any, path: tuple[str, ...]) -> Any:
    """``theirs`` merged into the part ``mine`` of the output type's constraint, at ``path``."""
    kinds = _OPEN.get(path)
    if kinds is not None and isinstance(mine, dict) and isinstance(theirs, dict):
        out = dict(mine)
        for key, value in theirs.items():
            if key in mine:
                out[key] = _constraint(mine[key], value, (*path, key))
            elif key in kinds:
                there = [".".join((*path, k)) for k in mine if k in kinds]
                raise ValueError(
                    f"extra_body field {'.'.join((*path, key))!r} would add a second constraint "
                    f"beside the output type's {', '.join(map(repr, there))}, and a server obeys "
                    f"only one; {_INSTEAD}"
                )
            else:
                out[key] = value
        return out
    if type(mine) is type(theirs) and mine == theirs:
        return mine
    raise ValueError(
        f"extra_body field {'.'.join(path)!r} would change the output type's constraint, which "
        f"lmclient sends there itself; {_INSTEAD}"
    )
