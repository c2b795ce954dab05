"""`Response`: a validated value with everything the server said about it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import msgspec

from ._headers import Headers
from ._output.turn import OPEN
from ._tools import Args, ToolCall, one_or_two
from ._wire.protocol import LlamaCppTimings, Measured, TokenLogprob, Usage, VllmMetrics
from .errors import ConfidenceError, NoValueError, ProtocolError

__all__ = ["Response"]

T = TypeVar("T")

_decode = msgspec.json.decode
_measured = msgspec.json.Decoder(Measured).decode


class Response(msgspec.Struct, Generic[T, Args], frozen=True):
    """The result of `Client.create`: ``value`` is ``values[0]``; every choice was validated.

    ``Response[T]`` is a value of type ``T``; ``Response[str, W]`` a call with ``tools=`` whose
    `tool_calls` have arguments of type ``W`` (``create(..., tools=[weather])`` with
    ``weather: Tool[W]``). Written with one parameter, the calls' arguments are ``object``:
    `Tool.match` narrows them.

    ``retries`` is how many transport retries the call took, ``reasks`` how many times an
    invalid answer was sent back to the model for correction (``max_reasks``), ``compact``
    whether the server was held to lmclient's compact grammar (no whitespace outside strings,
    see the client's ``whitespace=``) rather than its own JSON converter. ``usage`` is the
    last answer's; ``total_usage`` the sum of every answer's the call received (the invalid
    ones that were re-asked, and the last) that reported usage; a retried attempt ended in an
    error status, which reports none. ``unmetered`` is how many of those answers reported no
    usage, or only part of it: with any, ``total_usage`` falls short by their tokens, and a
    `UsageTotal` counts the call as unmetered. `metrics` is what the server measured of the
    request, where it sends it: `VllmMetrics` or `LlamaCppTimings`.

    The body is kept as received, undecoded, so that `raw` and `metrics` cost only the calls
    that read them (msgspec encodes it as ``body``, in base64; encode `raw` for the JSON). A
    msgspec Struct: built on every call, and far cheaper to build than a frozen dataclass.
    """

    values: list[T]
    texts: list[str]
    finish_reasons: list[str | None]
    usage: Usage | None
    model: str | None
    id: str | None
    # the body as received (a stream: its events' data), read by `raw` and `metrics`
    _body: bytes | list[bytes] | None = msgspec.field(name="body")
    # every answer's usage: the invalid ones that were re-asked, and the last (`add_usage`)
    total_usage: Usage | None = None
    # of those answers, how many had no usage to count (`_usage.counted`)
    unmetered: int = 0
    reasoning: str | None = None
    logprobs: list[TokenLogprob] | None = None
    retries: int = 0
    reasks: int = 0
    compact: bool = False
    # the response's headers as the transport read them (lower-case names): `headers` wraps them
    _headers: Mapping[str, str] | None = msgspec.field(default=None, name="headers")
    # the first choice's, validated (`tools=`); a tuple, so that no call pays for a new list
    tool_calls: tuple[ToolCall[Args], ...] = ()
    # create(probabilities=True): each option of the first choice → its probability
    _probabilities: dict[T, float] | None = msgspec.field(default=None, name="probabilities")

    if not TYPE_CHECKING:  # what type checkers do with `Args`'s default (PEP 696)

        def __class_getitem__(cls, params: object) -> object:
            return super().__class_getitem__(one_or_two(params))

    @property
    def value(self) -> T:
        """The first choice's value; a `NoValueError` where the answer is tool calls instead (a
        typed turn: ``create(prompt, Answer, tools=[...])``)."""
        try:
            return self.values[0]
        except IndexError:
            raise NoValueError(
                f"the answer calls tools ({', '.join(c.name for c in self.tool_calls)}), so it "
                "has no value: run them and send their results (r.message, then each "
                "call.result(...)) for the next turn, or let client.run() loop"
            ) from None

    @property
    def probabilities(self) -> dict[T, float]:
        """Each option of a choice output (`Literal`, `Enum`, `bool`, `Choice`) → the chance the
        model gave it, read from the server's logprobs and normalised over the options (they sum
        to 1), in the type's order; the first choice's. Only for ``create(...,
        probabilities=True)``: otherwise a `ConfidenceError`."""
        found = self._probabilities
        if found is None:
            raise ConfidenceError(
                "this response has no probabilities: ask for them with "
                "create(..., probabilities=True)"
            )
        return found

    @property
    def headers(self) -> Headers:
        """The response's headers (a stream's: its head's), names case-insensitive, read-only:
        rate limits, request ids, what a gateway adds. Wrapped when asked (no copy)."""
        return Headers.of(self._headers)

    @property
    def text(self) -> str:
        return self.texts[0]

    @property
    def finish_reason(self) -> str | None:
        return self.finish_reasons[0]

    @property
    def metrics(self) -> VllmMetrics | LlamaCppTimings | None:
        """What the server measured of the request, where it sends it: vLLM's ``metrics``
        (`VllmMetrics`), llama.cpp's ``timings`` (`LlamaCppTimings`); in a stream, the last
        event's that has them. Read from the body when asked (as `raw`)."""
        body = self._body
        if body is None:
            return None
        for data in reversed(body) if isinstance(body, list) else (body,):
            try:
                measured = _measured(data)
            except msgspec.ValidationError as exc:  # the call decoded it: it is JSON
                raise ProtocolError(f"unexpected measures ({exc})", body=data) from None
            if measured.metrics is not None or measured.timings is not None:
                return measured.metrics or measured.timings
        return None

    @property
    def raw(self) -> Any:
        """The whole body as the server sent it, every field kept, known or not: a ``dict``;
        for a stream, the list of its events' objects (each chunk, the usage chunk included;
        not ``[DONE]``). Decoded anew at each access: keep it."""
        body = self._body
        if body is None:
            return None
        if isinstance(body, list):
            return [_decode(event) for event in body]
        return _decode(body)

    @property
    def message(self) -> dict[str, Any]:
        """The first choice as an assistant message, its tool calls included: what to append to
        the messages of the next call, before the calls' results (`ToolCall.result`)."""
        content = self.texts[0] or None
        if self.tool_calls:
            if content is not None and content.startswith(OPEN):
                content = None  # a typed turn's calls, its text: sent once, as tool_calls
            return {
                "role": "assistant",
                "content": content,
                "tool_calls": [call.wire() for call in self.tool_calls],
            }
        return {"role": "assistant", "content": content}
