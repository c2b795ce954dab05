"""Scripted answers: each reply and the requests it applies to (the queue that orders them,
with the faults, is `_queue.py`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Union

from ._recording import RecordedRequest

__all__ = ["UNSET", "Match", "Reply", "StreamStyle", "When", "matches"]


class _Unset:
    """The type of `UNSET`: "no output type given" (``None`` could be meant as a type)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass(frozen=True)
class Match:
    """Which requests an entry applies to; every field given must hold.

    ``prompt``: a substring of, or a regex (``re.compile(...)``, searched) in, the prompt: the
    last user message (chat) or the prompt (completions); with ``role``, any message of that
    role instead (``role`` alone: the request has a message of that role). ``output_type``:
    the request asks for that output type the way lmclient would (see
    :meth:`RecordedRequest.asks_for`). ``endpoint`` and ``stream`` select the kind of request.
    """

    prompt: str | re.Pattern[str] | None = None
    role: str | None = None
    output_type: Any = UNSET
    endpoint: Literal["chat", "completions"] | None = None
    stream: bool | None = None

    def __call__(self, request: RecordedRequest) -> bool:
        if self.endpoint is not None and request.endpoint != self.endpoint:
            return False
        if self.stream is not None and request.stream != self.stream:
            return False
        if self.role is not None:
            texts = request.texts(self.role)
            if not texts:
                return False
            if self.prompt is not None and not any(_found(self.prompt, t) for t in texts):
                return False
        elif self.prompt is not None and not _found(self.prompt, request.prompt):
            return False
        return self.output_type is UNSET or request.asks_for(self.output_type)


When = Union[str, "re.Pattern[str]", Match, Callable[[RecordedRequest], bool], None]
"""What ``when=`` takes: a prompt substring, a compiled regex searched in the prompt, a
:class:`Match`, or a predicate on the :class:`RecordedRequest`."""


def matches(when: When, request: RecordedRequest) -> bool:
    """Whether a request satisfies a ``when=`` condition (``None`` matches every request)."""
    if when is None:
        return True
    if isinstance(when, (str, re.Pattern)):
        return _found(when, request.prompt)
    return bool(when(request))


def _found(needle: str | re.Pattern[str], text: str) -> bool:
    return needle in text if isinstance(needle, str) else needle.search(text) is not None


@dataclass(frozen=True)
class StreamStyle:
    """How an SSE answer is cut and disturbed.

    ``chunk_size``: characters of text per delta. ``keepalive``: a ``: keep-alive`` comment
    between events. After ``error_after`` text deltas an error event and ``[DONE]`` end the
    stream; after ``close_after`` the body ends cleanly without ``[DONE]`` or a finish reason;
    after ``drop_after`` the connection breaks (the client sees a transport error).
    """

    chunk_size: int = 4
    keepalive: bool = False
    error_after: int | None = None
    close_after: int | None = None
    drop_after: int | None = None

    def override(self, reply: Reply | None) -> StreamStyle:
        """This style with the stream settings a reply sets (``None`` keeps ours)."""
        if reply is None:
            return self
        return StreamStyle(
            chunk_size=reply.chunk_size if reply.chunk_size is not None else self.chunk_size,
            keepalive=reply.keepalive if reply.keepalive is not None else self.keepalive,
            error_after=_pick(reply.error_after, self.error_after),
            close_after=_pick(reply.close_after, self.close_after),
            drop_after=_pick(reply.drop_after, self.drop_after),
        )


def _pick(mine: int | None, default: int | None) -> int | None:
    return default if mine is None else mine


@dataclass(frozen=True)
class Reply:
    """A scripted answer, as queued by :meth:`FakeLLM.reply`.

    ``content`` is the text (``None`` sends ``content: null``, as with a refusal). ``when``
    limits the reply to the requests it matches (see :data:`When`). Stream settings left
    ``None`` come from the :class:`FakeLLM`.
    """

    content: str | None = None
    finish_reason: str = "stop"
    refusal: str | None = None
    reasoning: str | None = None
    usage: dict[str, Any] | None = None
    extra: dict[str, Any] | None = None  # top-level fields added to the body (every chunk)
    logprobs: Any = None
    probabilities: Mapping[str, float] | None = None  # option → probability: logprobs made up
    when: When = None
    times: int | None = None
    chunk_size: int | None = None
    keepalive: bool | None = None
    error_after: int | None = None
    close_after: int | None = None
    drop_after: int | None = None
    tool_calls: tuple[tuple[str, str], ...] = ()  # (name, arguments JSON) per call

    def matches(self, request: RecordedRequest) -> bool:
        return matches(self.when, request)
