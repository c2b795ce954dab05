"""A text that a structural tag accepts: what the fake answers a ``structural_tag`` with.

vLLM and SGLang read xgrammar's structural tags (``{"type": "structural_tag", "format": ...}``,
and the older ``structures`` + ``triggers``); lmclient sends one for a `lmclient.Tagged`
output. The fake writes a sentence of the format: prose where free text is allowed (never one
of the strings it must exclude, nor the end it runs up to), each element's own language
(a grammar's sentence, a pattern's match, a schema's instance), the fewest repeats allowed.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from ._errors import UnsatisfiableError
from ._grammar import grammar_sentence
from ._regex_gen import regex_instance
from ._schema_instance import schema_instance

__all__ = ["structural_text"]

# What the fake writes where free text is allowed: short, and free of the characters tags
# are made of, so that it excludes any tag or end string.
_PROSE = ("Let me think. ", "Here it is. ", "One moment. ", "Some text first. ")


def structural_text(tag: Mapping[str, Any], seed: int) -> str:
    """A text the structural tag ``tag`` accepts (raises `UnsatisfiableError` for a format
    type the fake does not write)."""
    rng = random.Random(seed)
    if "format" in tag:
        return _text(tag["format"], rng)
    structures = tag.get("structures") or []
    if not structures:  # the legacy form with no structure: free text
        return rng.choice(_PROSE)
    first = structures[0]
    schema = first.get("schema", {})
    value = msgspec.json.encode(schema_instance(schema, seed=rng.randrange(1 << 30))).decode()
    prefix = "" if tag.get("at_least_one") else rng.choice(_PROSE)
    return f"{prefix}{first['begin']}{value}{first['end']}"


def _text(fmt: Mapping[str, Any], rng: random.Random) -> str:
    kind = fmt.get("type")
    if kind == "const_string":
        return str(fmt["value"])
    if kind == "any_text":
        limit = fmt.get("max_chars")
        return rng.choice(_PROSE)[: limit if limit is not None else None]
    if kind == "grammar":
        return grammar_sentence(fmt["grammar"], rng.randrange(1 << 30))
    if kind == "regex":
        return regex_instance(fmt["pattern"], seed=rng.randrange(1 << 30))
    if kind == "json_schema":
        instance = schema_instance(fmt["json_schema"], seed=rng.randrange(1 << 30))
        return msgspec.json.encode(instance).decode()
    if kind == "sequence":
        return "".join(_text(element, rng) for element in fmt["elements"])
    if kind == "or":
        return _text(rng.choice(fmt["elements"]), rng)
    if kind == "tag":
        return _tag(fmt, rng)
    if kind in ("triggered_tags", "tags_with_separator"):
        tags: Sequence[Mapping[str, Any]] = fmt["tags"]
        free = kind == "triggered_tags" and not fmt.get("at_least_one")
        return (rng.choice(_PROSE) if free else "") + _tag(rng.choice(tags), rng)
    if kind in ("optional", "star"):
        return ""
    if kind == "plus":
        return _text(fmt["content"], rng)
    if kind == "repeat":
        return "".join(_text(fmt["content"], rng) for _ in range(fmt["min"]))
    raise UnsatisfiableError(
        f"FakeLLM cannot write a text for a structural tag's {kind!r} format; script the "
        "answer with FakeLLM.reply(...)"
    )


def _tag(fmt: Mapping[str, Any], rng: random.Random) -> str:
    end = fmt["end"]
    if not isinstance(end, str):
        end = end[0] if isinstance(end, list) else ""
    begin = fmt["begin"] if isinstance(fmt["begin"], str) else ""
    return f"{begin}{_text(fmt['content'], rng)}{end}"
