"""What `FakeLLM` answers with: each choice's text (the scripted reply, or text generated to
satisfy the request's constraint, shaped as the server would), the usage it reports, and the
400s a real server gives for a malformed body. Pure functions of the request: `FakeLLM` keeps
the script, the routes and the faults."""

from __future__ import annotations

import dataclasses
import json
import random
import re
from collections.abc import Callable
from typing import Any

import msgspec

from ._constraints import Constraint
from ._errors import UnsatisfiableError
from ._grammar import grammar_literals, grammar_sentence
from ._logprobs import generated_chances, logprobs_for, options_of, scripted_chances
from ._reasoning import shaped
from ._recording import message_text
from ._regex_gen import regex_instance
from ._schema_instance import schema_instance
from ._script import Reply
from ._structural import structural_text
from ._tools import scripted_calls, tool_calls_for
from ._wire import Answer, FakeResponse, error_response, estimate_tokens

__all__ = [
    "answer_for",
    "answer_text",
    "bad_request",
    "check_body",
    "encode",
    "first_set",
    "grammar_text",
    "usage_for",
]


def answer_for(
    reply: Reply | None,
    constraint: Constraint,
    index: int,
    limit: Any,
    body: dict[str, Any],
    *,
    server: str | None,
    seed: int,
    default_text: str,
) -> Answer:
    """One choice: the scripted reply or generated text, with thinking as the server would
    add it (`shaped`), the whole cut to the token limit; with logprobs where the request asks
    for them, for generated text and for a reply scripted with ``probabilities``."""
    # A grammar beside tools holds the whole answer, as the servers hold it (a typed turn: its
    # calls are the grammar's text); else a generated answer may call a tool.
    generated_calls = reply is None and constraint.kind != "grammar"
    calls = tool_calls_for(body, server, seed + index, index) if generated_calls else None
    chances: dict[str, float] | None = None  # None: no logprobs made up
    if calls is not None:
        answer = Answer(None, "tool_calls", tool_calls=calls)
    elif reply is None:
        content: str | None = answer_text(constraint, seed + index, default_text)
        answer = Answer(content, "stop")
        chances = generated_chances(content or "", options_of(constraint), seed + index)
    else:
        content = reply.content
        answer = Answer(
            content,
            reply.finish_reason,
            reply.refusal,
            reply.reasoning,
            reply.logprobs,
            tool_calls=scripted_calls(reply.tool_calls, body, index),
        )
        if reply.probabilities is not None and content is not None:
            chances = scripted_chances(content, reply.probabilities)
    answer = shaped(answer, body, server, limit)
    if chances is None or answer.logprobs is not None or answer.content is None:
        return answer
    kind = "chat" if "messages" in body else "completions"
    logprobs = logprobs_for(kind, body, server, answer.content, chances)
    return dataclasses.replace(answer, logprobs=logprobs)


def answer_text(constraint: Constraint, seed: int, default_text: str) -> str:
    """Text satisfying ``constraint`` (raises ``UnsatisfiableError`` when it cannot)."""
    kind, value = constraint.kind, constraint.value
    if kind == "json_schema":
        return encode(schema_instance(value, seed=seed))
    if kind == "json_object":
        return "{}"
    if kind == "regex":
        try:
            return _plausible(lambda each: regex_instance(value, seed=each), seed)
        except re.error as exc:
            raise UnsatisfiableError(f"bad regex {value!r}: {exc}") from None
    if kind == "choice":
        return str(random.Random(seed).choice(value))
    if kind == "grammar":
        return grammar_text(value, seed)
    if kind == "structural_tag":
        return structural_text(value, seed)
    return default_text


_REDRAWS = 20  # texts drawn for one answer before an implausible one is kept
_MAGNITUDE = 10**15  # a number past this is drawn again: no model writes one unasked


def grammar_text(grammar: str, seed: int) -> str:
    """A sentence of a GBNF grammar, or one literal of a Lark choice (`_plausible`)."""
    try:
        return _plausible(lambda each: grammar_sentence(grammar, each), seed)
    except ValueError as exc:
        problem = str(exc)
    options = grammar_literals(grammar)
    if options is not None:
        return random.Random(seed).choice(options)
    shown = grammar if len(grammar) <= 200 else grammar[:200] + "..."
    raise UnsatisfiableError(
        f"FakeLLM cannot generate text for the grammar {shown!r} ({problem}): it generates for "
        "GBNF grammars and for Lark choices between literals; script the answer with "
        "FakeLLM.reply(...)"
    )


def _plausible(draw: Callable[[int], str], seed: int) -> str:
    """The first of the texts ``draw`` gives for seeds derived from ``seed`` that is not JSON
    `_implausible` says an app would choke on, else the last drawn (a pattern or grammar may
    allow nothing else)."""
    text = draw(seed)
    for attempt in range(1, _REDRAWS):
        if not _implausible(text):
            break
        text = draw(seed + attempt * 1_000_003)
    return text


def _implausible(text: str) -> bool:
    """Whether ``text`` is JSON with an object that has a key twice (a grammar cannot forbid
    the repeat, and the decoded dict would hold fewer keys than the sentence wrote: below a
    ``min_length``, say), a number past `_MAGNITUDE` (an ``int``'s grammar admits uint64,
    which few stores take; a float's, exponents to 308) or a negative zero."""
    found = False

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal found
        found = found or len({key for key, _ in items}) < len(items)
        return {}

    def number(digits: str) -> float:
        nonlocal found
        value = abs(float(digits) if any(c in digits for c in ".eE") else int(digits))
        found = found or not value < _MAGNITUDE or (value == 0 and digits.startswith("-"))
        return 0.0

    try:
        json.loads(text, object_pairs_hook=pairs, parse_int=number, parse_float=number)
    except ValueError:
        return False
    return found


def encode(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def first_set(body: dict[str, Any], *keys: str) -> Any:
    """The first of ``keys`` present and not null: clients often send optional fields as null."""
    return next((body[key] for key in keys if body.get(key) is not None), None)


def bad_request(message: str) -> FakeResponse:
    return error_response(400, message, "BadRequestError", param=None, code=400)


def check_body(kind: str, body: dict[str, Any]) -> str | None:
    """The first reason a real server would reject the body with 400, if any."""
    if kind == "chat" and not isinstance(body.get("messages"), list):
        return "messages: a list of messages is required"
    if kind == "completions" and not isinstance(body.get("prompt"), (str, list)):
        return "prompt: a string or a list of strings is required"
    n = 1 if body.get("n") is None else body["n"]
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        return "n must be a positive integer"
    if body.get("stream_options") is not None and body.get("stream") is not True:
        return "Stream options can only be defined when `stream=True`."
    return None


def usage_for(
    kind: str, body: dict[str, Any], answers: list[Answer], first: Reply | None
) -> dict[str, Any]:
    """Estimated usage, or the first scripted reply's ``usage`` when it sets one."""
    if first is not None and first.usage is not None:
        return dict(first.usage)
    if kind == "chat":
        prompt = "".join(message_text(m) for m in body["messages"] if isinstance(m, dict))
    else:
        given = body["prompt"]
        prompt = (
            given if isinstance(given, str) else "".join(p for p in given if isinstance(p, str))
        )
    prompt_tokens = max(1, estimate_tokens(prompt))
    completion_tokens = sum(
        estimate_tokens((a.reasoning or "") + (a.content or "") + (a.refusal or ""))
        for a in answers
    )
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
