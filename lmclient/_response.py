"""`Response`: a validated value with everything the server said about it."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import msgspec

from ._protocol import TokenLogprob, Usage

__all__ = ["Response"]

T = TypeVar("T")


class Response(msgspec.Struct, Generic[T], frozen=True):
    """The result of `Client.create`: ``value`` is ``values[0]``; every choice was validated.

    ``raw`` is the decoded wire struct (`protocol.ChatCompletion` or `protocol.Completion`),
    ``retries`` how many transport retries the call took, ``reasks`` how many times an invalid
    answer was sent back to the model for correction (``max_reasks``). A msgspec Struct: built
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

    @property
    def value(self) -> T:
        return self.values[0]

    @property
    def text(self) -> str:
        return self.texts[0]

    @property
    def finish_reason(self) -> str | None:
        return self.finish_reasons[0]
