"""Scripted replies and the order in which requests consume them.

Counted replies (``times=k``) are consumed first, oldest first: a scripted sequence plays out
in order. Sticky replies (``times=None``) answer every request no counted reply takes; the
newest matching one wins, so a later ``reply(...)`` replaces an earlier default.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._recording import RecordedRequest

__all__ = ["Reply", "Script", "StreamStyle"]


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
    """A scripted answer, as queued by :meth:`FakeLLM.reply` and :meth:`FakeLLM.reply_error`.

    For a generation answer ``content`` is the text (``None`` sends ``content: null``, as with
    a refusal). An error answer has ``status >= 400`` and sends ``body`` with ``headers``.
    ``when`` limits the reply to requests whose prompt contains the substring, or for which
    the predicate is true. Stream settings left ``None`` come from the :class:`FakeLLM`.
    """

    content: str | None = None
    finish_reason: str = "stop"
    refusal: str | None = None
    reasoning: str | None = None
    usage: dict[str, int] | None = None
    logprobs: Any = None
    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    when: str | Callable[[RecordedRequest], bool] | None = None
    times: int | None = None
    chunk_size: int | None = None
    keepalive: bool | None = None
    error_after: int | None = None
    close_after: int | None = None
    drop_after: int | None = None

    @property
    def is_error(self) -> bool:
        return self.status >= 400

    def matches(self, request: RecordedRequest) -> bool:
        if self.when is None:
            return True
        if isinstance(self.when, str):
            return self.when in request.prompt
        return self.when(request)


class Script:
    """The thread-safe queue of scripted replies (see the module docstring for the order)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counted: list[tuple[Reply, list[int]]] = []  # reply, [remaining uses]
        self._sticky: list[Reply] = []

    def add(self, reply: Reply) -> None:
        if reply.times is not None and reply.times < 1:
            raise ValueError("times must be None (every request) or at least 1")
        with self._lock:
            if reply.times is None:
                self._sticky.append(reply)
            else:
                self._counted.append((reply, [reply.times]))

    def take(self, request: RecordedRequest, *, errors: bool) -> Reply | None:
        """The reply for the next answer to ``request``; ``errors=False`` skips error replies."""
        with self._lock:
            for index, (reply, remaining) in enumerate(self._counted):
                if (errors or not reply.is_error) and reply.matches(request):
                    remaining[0] -= 1
                    if remaining[0] == 0:
                        del self._counted[index]
                    return reply
            for reply in reversed(self._sticky):
                if (errors or not reply.is_error) and reply.matches(request):
                    return reply
        return None

    @property
    def pending(self) -> int:
        """Uses left of the counted replies (sticky ones never run out)."""
        with self._lock:
            return sum(remaining[0] for _, remaining in self._counted)

    def clear(self) -> None:
        with self._lock:
            self._counted.clear()
            self._sticky.clear()
