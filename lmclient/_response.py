"""`Response`: a validated value with everything the server said about it."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import msgspec

from ._protocol import TokenLogprob, Usage
from ._tools import ToolCall

__all__ = ["Response"]

T = TypeVar("T")


class Response(msgspec.Struct, Generic[T], frozen=True):
    """The result of `Client.create`: ``value`` is ``values[0]``; every choice was validated.

    ``raw`` is the decoded wire struct (`protocol.ChatCompletion` or `protocol.Completion`),
    ``retries`` how many transport retries the call took, ``reasks`` how many times an invalid
    answer was sent back to the model for correction (``max_reasks``), ``compact`` whether the
    server was held to lmclient's compact grammar (no whitespace outside strings, see the
    client's ``whitespace=``) rather than its own JSON converter. A msgspec Struct: built
    on every call, and far cheaper to build than a frozen dataclass.
    """

    values: list[T]
    texts: list[str]
    finish_reasons: list[str | None]
    usage: Usage | None
    model: str | None
    id: str | None
    raw: Any
    reasoning: str | None = None
    logprobs: list[TokenLogprob] | None = None
    retries: int = 0
    reasks: int = 0
    compact: bool = False
    # the first choice's, validated (`tools=`); a tuple, so that no call pays for a new list
    tool_calls: tuple[ToolCall[Any], ...] = ()

    @property
    def value(self) -> T:
        return self.values[0]

    @property
    def text(self) -> str:
        return self.texts[0]

    @property
    def finish_reason(self) -> str | None:
        return self.finish_reasons[0]

    @property
    def message(self) -> dict[str, Any]:
        """The first choice as an assistant message, its tool calls included: what to append to
        the messages of the next call, before the calls' results (`ToolCall.result`)."""
        message: dict[str, Any] = {"role": "assistant", "content": self.texts[0] or None}
        if self.tool_calls:
            message["tool_calls"] = [call.wire() for call in self.tool_calls]
        return message
