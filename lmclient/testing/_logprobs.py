"""The logprobs the fake sends when asked: in the shape of the server it plays.

Made so that ``create(..., probabilities=True)`` and ``Response.logprobs`` work against it.

Asked for as the servers read it: ``logprobs: true`` (and ``top_logprobs``: how many
alternatives) on chat, ``logprobs: k`` (an int: ``k`` alternatives) on completions. Sent as
each server sends them: the chat shape (``{"content": [{"token", "logprob", "bytes",
"top_logprobs"}]}``, llama.cpp's with token ``id``s, on both of its endpoints), else on
completions the legacy one (``tokens``, ``token_logprobs``, ``top_logprobs`` as dicts,
``text_offset``).

An answer to a choice among fixed texts (the constraint's options: a choice list, a GBNF or
regex alternation of literals, a schema ``enum`` or boolean, OpenAI's ``{"value": ...}`` of
one) is one token, its alternatives the other
options (a real tokenizer splits it, which the client follows): the answer the most likely,
at 0.6 to 0.95 (seeded), each other option half the one before it of what is left, some of it
left to texts not shown, as a model's distribution leaves some to tokens outside the list.
Other text comes in tokens of four characters (the fake's token estimate), each likely and
its own only alternative. A test sets the options' probabilities with
``reply(..., probabilities={...})``.

Where it plays vLLM 0.32 or later (``server="vllm"``), a request may list token ids instead
(``logprob_token_ids``, refused with vLLM's 400s: without ``logprobs``, more than 128, outside
the vocabulary). The answer then comes in the fake tokenizer's tokens (``POST /tokenize``: four
characters each), and each token's alternatives are the generated token followed by every
listed id, each once, as vLLM shows them: the chance of each text among the options spelt in
the same tokens, a token of none -9999 (vLLM's floor for a token the constraint masks).
"""

from __future__ import annotations

import math
import random
import re
import zlib
from collections.abc import Mapping
from typing import Any

import msgspec

from ._constraints import Constraint
from ._embeddings import VOCABULARY, fake_tokens
from ._grammar import grammar_literals

__all__ = [
    "generated_chances",
    "listed_problem",
    "logprobs_for",
    "options_of",
    "scripted_chances",
]

_VOCABULARY = 262_144  # token ids are drawn below it (Gemma 3's vocabulary)
_PIECE = 4  # characters per token of text that is not a choice


def logprobs_for(
    kind: str, body: dict[str, Any], server: str | None, text: str, chances: Mapping[str, float]
) -> Any:
    """The choice's ``logprobs`` for ``text``, or ``None`` when the request did not ask.
    ``chances`` maps whole texts (``text`` among them) to their probabilities, for an answer
    that is one of several options; empty for other text."""
    top = _asked(kind, body)
    if top is None:
        return None
    listed = body.get("logprob_token_ids")
    if server == "vllm" and listed:
        return _listed(kind, listed, text, chances)
    if text in chances:
        tokens = [(text, chances)]
    else:
        pieces = [text[at : at + _PIECE] for at in range(0, len(text), _PIECE)]
        tokens = [(piece, {piece: _SURE}) for piece in pieces]
    if kind == "completions" and server != "llamacpp":
        return _legacy(tokens, top)
    return {"content": [_entry(token, likely, top, server) for token, likely in tokens]}


_SURE = 0.9  # the probability of each token of text that is not a choice


def generated_chances(text: str, options: list[str] | None, seed: int) -> dict[str, float]:
    """The options' probabilities for a generated answer ``text``: its own the highest."""
    if not options or text not in options:
        return {}
    rng = random.Random(seed)
    own = 0.6 + 0.35 * rng.random()
    chances = {text: own}
    left = 1.0 - own
    for option in options:
        if option not in chances:
            left /= 2
            chances[option] = left
    return chances


def scripted_chances(text: str, probabilities: Mapping[str, float]) -> dict[str, float]:
    """A scripted reply's ``probabilities`` (option → probability) as whole texts: each option
    written where the answer has its own (a JSON string's quotes kept)."""
    own = max((option for option in probabilities if option in text), key=len)
    at = text.rfind(own)
    before, after = text[:at], text[at + len(own) :]
    return {before + option + after: chance for option, chance in probabilities.items()}


def options_of(constraint: Constraint) -> list[str] | None:
    """The texts a choice constraint allows, as an answer writes them; ``None`` for any other
    constraint."""
    kind, value = constraint.kind, constraint.value
    if kind == "choice" and isinstance(value, list):
        return [str(option) for option in value]
    if kind == "grammar" and isinstance(value, str):
        return grammar_literals(value)
    if kind == "regex" and isinstance(value, str):
        return _alternation(value)
    if kind == "json_schema":
        values = _schema_values(value)
        return None if values is None else [msgspec.json.encode(v).decode() for v in values]
    return None


def _schema_values(schema: Any) -> list[Any] | None:
    """The values a schema allows when they are few: an ``enum``, a ``const``, a boolean, or
    an object of one ``value`` of those (OpenAI's wrapper of a choice); else ``None``."""
    if not isinstance(schema, dict):
        return None
    if isinstance(schema.get("enum"), list):
        return list(schema["enum"])
    if "const" in schema:
        return [schema["const"]]
    if schema.get("type") == "boolean":
        return [True, False]
    properties = schema.get("properties")
    if schema.get("type") == "object" and isinstance(properties, dict) and len(properties) == 1:
        inner = _schema_values(properties.get("value"))
        return None if inner is None else [{"value": v} for v in inner]
    return None


def _alternation(pattern: str) -> list[str] | None:
    """The literals of ``(?:a|b)`` or ``(a|b)`` (each escaped by ``re.escape``), else ``None``."""
    for opening in ("(?:", "("):
        if pattern.startswith(opening) and pattern.endswith(")"):
            inner = pattern[len(opening) : -1]
            break
    else:
        return None
    options: list[str] = []
    current: list[str] = []
    escaped = False
    for ch in inner:
        if escaped:
            current.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "|":
            options.append("".join(current))
            current = []
        else:
            current.append(ch)
    options.append("".join(current))
    rebuilt = opening + "|".join(re.escape(option) for option in options) + ")"
    return options if rebuilt == pattern else None


def _asked(kind: str, body: dict[str, Any]) -> int | None:
    """How many alternatives per token the request asked for; ``None``: no logprobs."""
    given = body.get("logprobs")
    if kind == "chat":
        if given is not True:
            return None
        top = body.get("top_logprobs")
        return top if isinstance(top, int) and not isinstance(top, bool) else 0
    if isinstance(given, int) and not isinstance(given, bool) and given >= 0:
        return given
    return None


def _ranked(likely: Mapping[str, float], top: int) -> list[tuple[str, float]]:
    """The ``top`` most likely texts with their logprobs, the most likely first."""
    ranked = sorted(likely.items(), key=lambda pair: -pair[1])[:top]
    return [(token, math.log(chance)) for token, chance in ranked]


def _entry(token: str, likely: Mapping[str, float], top: int, server: str | None) -> Any:
    alternatives = [_token(t, lp, server) for t, lp in _ranked(likely, top)]
    return {**_token(token, math.log(likely[token]), server), "top_logprobs": alternatives}


def _token(token: str, logprob: float, server: str | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"token": token, "logprob": logprob, "bytes": list(token.encode())}
    if server == "llamacpp":
        return {"id": zlib.crc32(token.encode()) % _VOCABULARY, **entry}
    return entry


def _legacy(tokens: list[tuple[str, Mapping[str, float]]], top: int) -> dict[str, Any]:
    offsets = []
    at = 0
    for token, _ in tokens:
        offsets.append(at)
        at += len(token)
    return {
        "tokens": [token for token, _ in tokens],
        "token_logprobs": [math.log(likely[token]) for token, likely in tokens],
        "top_logprobs": [dict(_ranked(likely, top)) for _, likely in tokens],
        "text_offset": offsets,
    }


_MAX_LISTED = 128  # vLLM's MAX_LOGPROB_TOKEN_IDS
_MASKED = -9999.0  # vLLM's floor for a logprob


def listed_problem(kind: str, body: dict[str, Any]) -> str | None:
    """vLLM 0.32's 400 for a ``logprob_token_ids`` it refuses, if any."""
    listed = body.get("logprob_token_ids")
    if not listed:
        return None
    if kind == "chat" and not body.get("logprobs"):
        return "when using `logprob_token_ids`, `logprobs` must be set to true."
    if kind == "completions" and body.get("logprobs") is None:
        return "when using `logprob_token_ids`, `logprobs` must be set."
    if not isinstance(listed, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in listed
    ):
        return "logprob_token_ids: a list of integers is required"
    if len(listed) > _MAX_LISTED:
        return (
            f"Requested logprob_token_ids of length {len(listed)}, which is greater than max "
            f"allowed: {_MAX_LISTED}"
        )
    outside = [i for i in listed if not 0 <= i < VOCABULARY]
    if outside:
        return (
            f"token_id(s) {outside} in logprob_token_ids contain out-of-vocab token ids. "
            f"Vocabulary size: {VOCABULARY}"
        )
    return None


def _chunks(text: str) -> list[str]:
    return [text[at : at + _PIECE] for at in range(0, len(text), _PIECE)]


def _listed(kind: str, listed: list[int], text: str, chances: Mapping[str, float]) -> Any:
    """vLLM 0.32's logprobs for ``logprob_token_ids``: ``text`` in the fake tokenizer's tokens,
    each with itself and every listed id as alternatives; the chances of the texts spelt with
    the same tokens so far (those of ``chances``, else ``text`` alone) give each token's."""
    path = _chunks(text)
    spelt = {t: _chunks(t) for t in chances} if text in chances else {text: path}
    weights = dict(chances) if text in chances else {text: 1.0}
    names: dict[int, str] = {}  # the fake vocabulary, as far as these texts need it
    for whole in spelt:
        for start in range(len(whole)):
            for end in range(start + 1, min(start + _PIECE, len(whole)) + 1):
                names.setdefault(fake_tokens(whole[start:end], False)[0], whole[start:end])
    entries: list[tuple[str, float, list[tuple[str, float]]]] = []
    for index, token in enumerate(path):
        alive = {t: weights[t] for t, pieces in spelt.items() if pieces[:index] == path[:index]}
        mass = 1.0 if index == 0 else math.fsum(alive.values())
        nexts: dict[str, float] = {}  # each next token → the chance of the texts it goes on
        for whole, weight in alive.items():
            if index < len(spelt[whole]):
                piece = spelt[whole][index]
                nexts[piece] = nexts.get(piece, 0.0) + weight
        alternatives = []
        for i in dict.fromkeys([fake_tokens(token, False)[0], *listed]):
            name = names.get(i, f"<{i}>")
            chance = nexts.get(name, 0.0) / mass
            alternatives.append((name, math.log(chance) if chance > 0.0 else _MASKED))
        if text not in chances:  # text that is not a choice: each token likely, as above
            alternatives = [(t, math.log(_SURE) if t == token else lp) for t, lp in alternatives]
        entries.append((token, alternatives[0][1], alternatives))
    if kind == "completions":
        offsets = [sum(len(t) for t in path[:i]) for i in range(len(path))]
        return {
            "tokens": path,
            "token_logprobs": [lp for _, lp, _ in entries],
            "top_logprobs": [dict(alts) for _, _, alts in entries],
            "text_offset": offsets,
        }
    return {
        "content": [
            {
                **_token(token, lp, "vllm"),
                "top_logprobs": [_token(t, alp, "vllm") for t, alp in alts],
            }
            for token, lp, alts in entries
        ]
    }
