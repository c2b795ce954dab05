"""Confidence for choices: `create(..., probabilities=True)` asks the server for logprobs, and
each option of a `Literal`, `Enum`, `bool` or `Choice` answer gets its probability from them.

Pure: the checks before the request (`check`, `fields`), and the arithmetic on the answer's
tokens (`probabilities`). The server sends the tokens it generated, each with its most likely
alternatives (``top_logprobs``), and nothing about the paths it did not take; so an option's
probability is read along the answer's own tokens as far as they spell it, then from the
alternatives at the token where its text leaves the answer's.

An option counts as chosen once its text so far belongs to no other option (``"y"`` of
``yes``/``no``): the constraint then allows only the rest of it, so the tokens after that point
are not the model's choice and are not counted, for the answer as for the others. The
probability of an option is thus the sum, over the places along the answer where a token that
settles it was possible (the answer's own token, or an alternative), of the chance of the
answer's tokens before that place times that token's. A server's logprobs may be the model's
before the constraint masks its tokens (llama.cpp: a forbidden token leads the list) or after
(vLLM 0.32: the forced end of sequence has logprob 0), so the options' values are normalised
to sum to 1: the distribution of the model's choice among the options.

What the logprobs cannot tell is said, not guessed: an option whose settling tokens are not
among the alternatives has probability 0 (the model gave it less than the least of the
alternatives shown); one reachable only through an alternative that other options share
(``"ap"`` of ``apple``/``apricot`` when the answer was ``banana``) is a `ConfidenceError`, since
the tokens after it were never generated. Alternatives that begin an option without settling
it, beside one that does, are left out of its sum (a rarer tokenization of the same text).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import msgspec

from ._dialects import Dialect, Endpoint, Plan
from ._output.types import OutputSpec
from ._wire.protocol import TokenLogprob
from .errors import ConfidenceError

__all__ = ["check", "check_type", "fields", "options_of", "probabilities"]

_BOOL = (("true", True), ("false", False))


def options_of(spec: OutputSpec[Any]) -> tuple[tuple[str, Any], ...] | None:
    """The options of a choice output as (text, value) pairs in the type's order; ``None`` for
    an output type that is not a choice among fixed texts."""
    if spec.kind == "choice":
        return tuple((option, spec.decode(option)) for option in spec.options)
    if spec.output_type is bool:
        return _BOOL
    return None


def _quoted(spec: OutputSpec[Any], plan: Plan) -> bool:
    """Whether the model writes the options as JSON strings (a choice sent as a JSON schema),
    rather than as their bare texts (a native choice, a regex or grammar alternation)."""
    return spec.kind == "choice" and plan.decode is not spec.decode


def check_type(where: str, spec: OutputSpec[Any]) -> None:
    """Refuse ``probabilities=True`` for an output type that is not a choice (before the
    client's set-up requests too)."""
    if options_of(spec) is None:
        raise TypeError(
            f"{where}(): probabilities=True needs a choice output type (a Literal of str, a "
            f"str Enum, bool or lmclient.Choice), not {spec.name}"
        )


def check(where: str, spec: OutputSpec[Any], plan: Plan, dialect: Dialect) -> None:
    """Refuse ``probabilities=True`` before any request where the server cannot answer it."""
    check_type(where, spec)
    if dialect.top_logprobs is None:
        raise ConfidenceError(
            f"{where}(): probabilities=True needs logprobs, which {dialect.name} servers do not "
            "give; nothing was sent"
        )
    if not _quoted(spec, plan):
        texts = [text for text, _ in options_of(spec) or ()]
        for text in texts:
            longer = next((t for t in texts if t != text and t.startswith(text)), None)
            if longer is not None:
                raise ValueError(
                    f"{where}(): probabilities=True cannot tell {text!r} from {longer!r}, which "
                    f"begins with it: the {dialect.name} server answers bare texts, and the "
                    "chance that the answer ends after a prefix is not in its logprobs"
                )


def fields(endpoint: Endpoint, top: int | None, dialect: Dialect) -> dict[str, Any]:
    """The body fields asking for ``top`` alternatives per token (the call's ``top_logprobs``,
    else `Dialect.top_logprobs`), as each endpoint spells them."""
    if top is None:
        top = dialect.top_logprobs
    if endpoint == "completions":
        return {"logprobs": top}  # legacy completions: the number of alternatives
    return {"logprobs": True, "top_logprobs": top}


def probabilities(
    spec: OutputSpec[Any],
    plan: Plan,
    text: str,
    value: Any,
    tokens: Sequence[TokenLogprob] | None,
) -> dict[Any, float]:
    """Each option's value → its probability, from the first choice's ``text`` (validated into
    ``value``) and its ``tokens``; a `ConfidenceError` where the logprobs cannot tell."""
    options = options_of(spec)
    assert options is not None  # `check` refused the others before sending
    if not tokens:
        raise ConfidenceError(
            "the server sent no logprobs with the answer: its probabilities are unknown"
        )
    quoted = _quoted(spec, plan)
    written = [_json(option) if quoted else option for option, _ in options]
    chosen = written[next(i for i, (_, v) in enumerate(options) if v is value or v == value)]
    at = text.rfind(chosen)
    if at < 0:
        raise ConfidenceError(f"the answer {text!r} does not hold its option as {chosen!r}")
    before, after = text[:at], text[at + len(chosen) :]
    surfaces = [before + option + after for option in written]
    path = _path(tokens, text)
    chances = [_chance(surface, _settled(surface, surfaces), path) for surface in surfaces]
    total = math.fsum(chances)
    if total <= 0.0:
        raise ConfidenceError("the answer's logprobs give every option a probability of 0")
    return {v: chance / total for (_, v), chance in zip(options, chances, strict=True)}


def _json(option: str) -> str:
    return msgspec.json.encode(option).decode()


def _settled(surface: str, surfaces: list[str]) -> int:
    """How many characters of ``surface`` settle it: one more than it shares with any other
    (none is a prefix of another: `check`)."""
    shared = 0
    for other in surfaces:
        if other != surface:
            pairs = enumerate(zip(surface, other, strict=False))
            shared = max(shared, next(i for i, (a, b) in pairs if a != b))
    return shared + 1


def _path(tokens: Sequence[TokenLogprob], text: str) -> Sequence[TokenLogprob]:
    """The tokens from the one that begins ``text``: the last token boundary from which the
    tokens' texts spell it (reasoning tokens may come first; the end-of-sequence token the
    constraint forces may follow)."""
    joined = "".join(token.token for token in tokens)
    starts = []
    at = 0
    for token in tokens:
        starts.append(at)
        at += len(token.token)
    for index in range(len(tokens) - 1, -1, -1):
        if joined.startswith(text, starts[index]):
            return tokens[index:]
    raise ConfidenceError(f"the logprobs' tokens do not spell the answer {text!r}")


def _chance(surface: str, settled: int, path: Sequence[TokenLogprob]) -> float:
    """The probability of the option written ``surface``, settled by its first ``settled``
    characters, along the answer's tokens ``path`` (which spell the answer, so that the
    answer's own option is settled along them)."""
    total = 0.0
    before = 0.0  # the logprob of the answer's tokens so far
    pos = index = 0
    unresolved = False
    while True:  # the answer's option is settled within its tokens, the others leave them
        token = path[index]
        rest = surface[pos:]
        for alternative in token.top_logprobs:
            tail = alternative.token
            if tail and tail != token.token and rest.startswith(tail):
                if pos + len(tail) >= settled:
                    total += math.exp(before + alternative.logprob)
                else:
                    unresolved = True  # begins the option without settling it
        if not rest.startswith(token.token):
            break  # the option leaves the answer's tokens here
        before += token.logprob
        pos += len(token.token)
        if pos >= settled:
            return total + math.exp(before)
        index += 1
    if unresolved and total == 0.0:
        raise ConfidenceError(
            f"the logprobs cannot tell the probability of {surface!r}: its text leaves the "
            "answer's tokens at an alternative that begins other options too"
        )
    return total
