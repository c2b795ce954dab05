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
alternatives shown). One reachable only through an alternative that other options share
(``"ap"`` of ``apple``/``apricot`` when the answer was ``banana``) needs the tokens after it,
which were never generated: `read` says which such prefixes wait (`Reading.waiting`, no
more than the options), `continuation` is the second request that asks the server to continue the
answer from one (one token, unconstrained, with its alternatives), and `split` shares the
prefix's chance among the options that begin with it, in the ratio of the continuation's tokens
that settle each. A server that cannot continue a message keeps the `ConfidenceError`.
Alternatives that begin an option without settling it, beside one that does, are left out of
its sum (a rarer tokenization of the same text).

Which alternatives the server shows is asked in one of two ways (`fields`). Most servers show
the ``top_logprobs`` most likely tokens at each position, whatever they are: an option whose
settling tokens are less likely than the 20th is 0. vLLM from 0.32 takes instead a list of
token ids (``logprob_token_ids``, at most `MAX_LISTED`) and shows the logprob of each at every
position, beside the generated token, however unlikely (its raw logprobs, after the
constraint's mask: a token the grammar forbids there shows -9999). lmclient lists the tokens
an option can begin with wherever the answer may leave it: those of every piece of its
written text that starts before the character that settles it (`pieces`; ``y``, ``ye`` and
``yes`` of ``yes``/``no``; ``a``, ``ap``, ``app``, ``apple``, ``p``, ``pp``, ... of
``apple``/``apricot``), each tokenized alone, once per client and output type (a set-up
request to ``/tokenize`` per piece, without special tokens). A piece tokenized alone is the
token a model writes for it there when the vocabulary has it whole: the constrained answer is
the option's text alone, after the chat template's generation prompt, so that no token of the
text before it can merge with the option's first characters, and the grammar allows every
tokenization of what is left of the option at each position, which the pieces list. Where a
piece is not one token, its tokens are listed and the piece itself is not; a token that runs
past the end of the option into what follows it (the closing ``"`` of a JSON string with its
last letters) is no piece: its chance is missed, as a token below the 20th is missed the other
way. More than `MAX_LISTED` pieces or ids: the ``top_logprobs``
way, as before.

The same arithmetic reads both: the listed tokens are the alternatives at each position. With
them, an option is 0 only where the model gives its listed tokens nothing along the answer's
path (masked, or of no chance), and the second request is needed only where some option can
leave the answer's tokens only through a token that begins other options too and settles none
of them: no token of the
vocabulary spans its text from where it leaves the answer's to its settling character
(``straw`` of ``strawberry``/``strawman`` when the answer is ``banana``, if ``strawb`` is no
token). What the model writes after such a shared token was never generated, whatever is
listed; when every option has a listed token along the answer's path that settles it, the
answer's one request tells every probability.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import msgspec

from ._dialects import Dialect, Endpoint, Plan, ServerInfo
from ._output.types import OutputSpec
from ._servers import release
from ._wire.protocol import TokenLogprob, TopLogprob
from .errors import ConfidenceError

__all__ = [
    "MAX_LISTED",
    "Reading",
    "check",
    "check_type",
    "continuation",
    "fields",
    "listed_ids",
    "lists",
    "options_of",
    "pieces",
    "probabilities",
    "read",
    "split",
]

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


def fields(
    endpoint: Endpoint, top: int | None, dialect: Dialect, ids: tuple[int, ...] | None = None
) -> dict[str, Any]:
    """The body fields asking for the alternatives of each token, as each endpoint spells
    them: the logprobs of the options' token ``ids`` (vLLM's ``logprob_token_ids``, which
    needs ``logprobs`` set and then ignores how many it says), else of the ``top`` most likely
    (the call's ``top_logprobs``, else `Dialect.top_logprobs`)."""
    if top is None:
        top = dialect.top_logprobs
    if endpoint == "completions":  # legacy completions: the number of alternatives
        if ids:
            return {"logprobs": top, "logprob_token_ids": list(ids)}
        return {"logprobs": top}
    if ids:
        return {"logprobs": True, "logprob_token_ids": list(ids)}
    return {"logprobs": True, "top_logprobs": top}


# vLLM's bound on logprob_token_ids (sampling_params.py, MAX_LOGPROB_TOKEN_IDS: a longer list is
# a 400), and on the pieces tokenized to fill it, each a request.
MAX_LISTED = 128


def lists(dialect: Dialect, info: ServerInfo | None) -> bool:
    """Whether the server reads ``logprob_token_ids``: a release of it known to (the servers'
    table), not one merely assumed (a forced dialect that never asked the version keeps
    ``top_logprobs``, which every release reads)."""
    server = dialect.server
    since = None if server is None else server.added.get("logprob_token_ids")
    if since is None or info is None or info.version is None:
        return False
    return release(info.version) >= since


def pieces(spec: OutputSpec[Any], plan: Plan) -> tuple[str, ...] | None:
    """The texts whose tokens are listed (see the module's docstring): each piece of each
    option's written text that starts before the character that settles it, once, in the
    options' order; ``None`` where they are more than `MAX_LISTED`."""
    options = options_of(spec)
    assert options is not None  # `check_type` refused the others
    quoted = _quoted(spec, plan)
    written = [_json(option) if quoted else option for option, _ in options]
    found: dict[str, None] = {}
    for text in written:
        for start in range(min(_settled(text, written), len(text))):
            for end in range(start + 1, len(text) + 1):
                found[text[start:end]] = None
                if len(found) > MAX_LISTED:
                    return None
    return tuple(found)


def listed_ids(answers: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """The token ids of the tokenized `pieces`, each once, in their order; ``()`` where they
    are more than `MAX_LISTED` (the ``top_logprobs`` way)."""
    ids = tuple(dict.fromkeys(token for answer in answers for token in answer))
    return ids if len(ids) <= MAX_LISTED else ()


class Shared(NamedTuple):
    """An alternative that begins several options without settling one: the answer's text up
    to and through it (``prefix``), and the chance of the answer's tokens before it times its
    own (``chance``)."""

    prefix: str
    chance: float


class Reading(msgspec.Struct, frozen=True):
    """The options' chances read from the answer so far: ``values`` and their written
    ``surfaces`` (the answer's text with each option in place of its own), how many characters
    settle each (``settled``), and the shared prefixes whose split is still unknown
    (``waiting``), for the options that have no other way (``blind``)."""

    values: tuple[Any, ...]
    surfaces: tuple[str, ...]
    settled: tuple[int, ...]
    chances: tuple[float, ...]
    waiting: tuple[Shared, ...] = ()
    blind: frozenset[int] = frozenset()

    def result(self) -> dict[Any, float]:
        """Each option's value → its probability: the chances normalised, once none waits."""
        if self.waiting:
            names = ", ".join(repr(self.surfaces[index]) for index in sorted(self.blind))
            prefixes = ", ".join(repr(shared.prefix) for shared in self.waiting)
            raise ConfidenceError(
                f"the logprobs cannot tell the probability of {names}: its text leaves the "
                f"answer's tokens at {prefixes}, which begins other options too, and the server "
                "cannot continue the answer from there"
            )
        total = math.fsum(self.chances)
        if total <= 0.0:
            raise ConfidenceError("the answer's logprobs give every option a probability of 0")
        return {v: chance / total for v, chance in zip(self.values, self.chances, strict=True)}


def probabilities(
    spec: OutputSpec[Any],
    plan: Plan,
    text: str,
    value: Any,
    tokens: Sequence[TokenLogprob] | None,
) -> dict[Any, float]:
    """Each option's value → its probability, from the first choice's ``text`` (validated into
    ``value``) and its ``tokens``; a `ConfidenceError` where the logprobs cannot tell."""
    return read(spec, plan, text, value, tokens).result()


def read(
    spec: OutputSpec[Any],
    plan: Plan,
    text: str,
    value: Any,
    tokens: Sequence[TokenLogprob] | None,
) -> Reading:
    """The options' chances from the first choice's ``text`` (validated into ``value``) and its
    ``tokens``, with the shared prefixes a continuation must split; a `ConfidenceError` where
    the logprobs cannot tell."""
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
    settled = [_settled(surface, surfaces) for surface in surfaces]
    path = _path(tokens, text)
    chances: list[float] = []
    waiting: dict[str, float] = {}
    blind: set[int] = set()
    for index, surface in enumerate(surfaces):
        chance, shared = _chance(surface, settled[index], path)
        chances.append(chance)
        if chance == 0.0 and shared:
            blind.add(index)
            waiting.update(shared)
    if len(waiting) > len(options):  # a continuation each: bounded by the options
        raise ConfidenceError(
            f"the answer's tokens leave its options at {len(waiting)} alternatives that begin "
            "several of them: more continuations than options would be needed"
        )
    return Reading(
        values=tuple(v for _, v in options),
        surfaces=tuple(surfaces),
        settled=tuple(settled),
        chances=tuple(chances),
        waiting=tuple(Shared(*pair) for pair in sorted(waiting.items(), key=lambda p: -p[1])),
        blind=frozenset(blind),
    )


# What a chat body adds to continue its last (assistant) message instead of starting a new one:
# vLLM's and SGLang's request fields; llama.cpp does it unasked (its --no-prefill-assistant
# turns that off). The others have no such field: their chat template would close the message.
_CONTINUE: dict[str, dict[str, Any]] = {
    "vllm": {"continue_final_message": True, "add_generation_prompt": False},
    "vllm-guided": {"continue_final_message": True, "add_generation_prompt": False},
    "sglang": {"continue_final_message": True},
    "llamacpp": {},
}


def continuation(
    body: dict[str, Any], endpoint: Endpoint, plan: Plan, prefix: str
) -> dict[str, Any] | None:
    """The body of the second request: the first call's ``body`` (decoded) continued from the
    answer's ``prefix``, for one token with its alternatives and without the constraint (which
    would begin a whole option again); ``None`` where the server cannot continue a message."""
    more = {k: v for k, v in body.items() if k not in plan.fields and k not in _DROPPED}
    more["max_tokens"] = 1
    if endpoint == "completions":
        if not isinstance(body.get("prompt"), str):
            return None  # a list of prompts or token ids: not continued as text
        more["prompt"] = body["prompt"] + prefix
        return more
    extra = _CONTINUE.get(plan.dialect)
    if extra is None:
        return None
    more["messages"] = [*body["messages"], {"role": "assistant", "content": prefix}]
    return more | extra


_DROPPED = ("n", "stream", "stream_options", "max_completion_tokens")


def split(reading: Reading, tokens: Sequence[TokenLogprob] | None) -> Reading:
    """``reading`` with its first waiting prefix shared among the options that begin with it,
    from the continuation's ``tokens``: each option's share is the probability of the
    continuation's first token's alternatives that settle it over that of all that settle one
    of them; what the blind options get of it is added to their chances."""
    shared, *rest = reading.waiting
    if not tokens:
        raise ConfidenceError(
            f"the server sent no logprobs with the continuation of {shared.prefix!r}"
        )
    first = tokens[0]
    alternatives = list(first.top_logprobs)
    if all(alt.token != first.token for alt in alternatives):
        alternatives.append(TopLogprob(first.token, first.logprob))
    start = len(shared.prefix)
    masses: dict[int, float] = {}
    for index, surface in enumerate(reading.surfaces):
        if surface.startswith(shared.prefix):
            rest_of = surface[start:]
            masses[index] = math.fsum(
                math.exp(alt.logprob)
                for alt in alternatives
                if alt.token
                and rest_of.startswith(alt.token)
                and start + len(alt.token) >= reading.settled[index]
            )
    total = math.fsum(masses.values())
    if total <= 0.0:
        raise ConfidenceError(
            f"the continuation of {shared.prefix!r} settles none of the options that begin "
            "with it among its alternatives: their split is unknown"
        )
    chances = list(reading.chances)
    for index, mass in masses.items():
        if index in reading.blind:
            chances[index] += shared.chance * mass / total
    return msgspec.structs.replace(reading, chances=tuple(chances), waiting=tuple(rest))


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


def _chance(
    surface: str, settled: int, path: Sequence[TokenLogprob]
) -> tuple[float, dict[str, float]]:
    """The probability of the option written ``surface``, settled by its first ``settled``
    characters, along the answer's tokens ``path`` (which spell the answer, so that the
    answer's own option is settled along them); and the alternatives that begin it without
    settling it, as the answer's text through each → the chance of reaching it."""
    total = 0.0
    before = 0.0  # the logprob of the answer's tokens so far
    pos = index = 0
    shared: dict[str, float] = {}
    while True:  # the answer's option is settled within its tokens, the others leave them
        token = path[index]
        rest = surface[pos:]
        for alternative in token.top_logprobs:
            tail = alternative.token
            if tail and tail != token.token and rest.startswith(tail):
                if pos + len(tail) >= settled:
                    total += math.exp(before + alternative.logprob)
                else:  # begins the option without settling it: the same text, summed
                    prefix = surface[: pos + len(tail)]
                    chance = math.exp(before + alternative.logprob)
                    shared[prefix] = shared.get(prefix, 0.0) + chance
        if not rest.startswith(token.token):
            return total, shared  # the option leaves the answer's tokens here
        before += token.logprob
        pos += len(token.token)
        if pos >= settled:
            return total + math.exp(before), {}
        index += 1
