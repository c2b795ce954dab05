"""The events a call reports: what a hook is called with and what a span records.

Their own module, below both readers: `_hooks` (which calls the application's hooks) and
`_otel` (which records them on a span) import the events from here and not from each other,
so neither module imports the other when it is imported. Events carry no prompt, answer or
key: the request body and the answers' texts only with ``hook_content=True``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import msgspec

from ._headers import Headers
from ._wire.protocol import Usage

__all__ = [
    "CallFailed",
    "CallFinished",
    "Hook",
    "HookEvent",
    "Reasking",
    "RequestSent",
    "ResponseHead",
    "Retrying",
    "StreamFinished",
]


class _CallEvent(msgspec.Struct, frozen=True, kw_only=True):
    """What every event carries: which call (``call_id``, unique in the process), its endpoint
    (``"chat"`` or ``"completions"``), its model, and the attempt (1 for the first request;
    each retry and re-ask is a new attempt; 0 on a `CallFailed` before any request)."""

    call_id: int
    endpoint: str
    model: str | None
    attempt: int


class RequestSent(_CallEvent, frozen=True, kw_only=True):
    """A request is about to be written (each attempt). ``body``: the request body, with
    ``hook_content=True`` only."""

    stream: bool
    body: bytes | None = None


class ResponseHead(_CallEvent, frozen=True, kw_only=True):
    """A response arrived: its status, the seconds since its request was sent, the server's
    ``x-request-id`` header if any, and ``headers``, all of them (case-insensitive, read-only:
    rate limits, what a gateway adds). A stream reports it once its head is read; other calls
    once the whole response is (lmclient's transport reads it in one go)."""

    status: int
    elapsed: float
    request_id: str | None = None
    # the transport's dict (lower-case names), wrapped by `headers` when a hook reads them
    _headers: Mapping[str, str] | None = msgspec.field(default=None, name="headers")

    @property
    def headers(self) -> Headers:
        return Headers.of(self._headers)


class Retrying(_CallEvent, frozen=True, kw_only=True):
    """The attempt failed and will be retried after ``delay`` seconds: the error's type name
    and its HTTP status, if it was an error response."""

    delay: float
    error: str
    status: int | None = None


class Reasking(_CallEvent, frozen=True, kw_only=True):
    """The answer did not validate and is sent back for correction: re-ask ``number`` (1 for
    the first), the validation ``detail``, and with ``hook_content=True`` the invalid ``text``."""

    number: int
    detail: str
    text: str | None = None


class CallFailed(_CallEvent, frozen=True, kw_only=True):
    """The call raised: the exception's type name, its HTTP status if it was an error response,
    the seconds since the call started, and the usage of the answers it received (an invalid
    or truncated answer's, re-asked ones included: what the failed call still cost)."""

    error: str
    status: int | None = None
    elapsed: float
    total_usage: Usage | None = None


class CallFinished(_CallEvent, frozen=True, kw_only=True):
    """The call returned a validated `Response`: its usage (the last answer's) and total usage
    (every answer's, the re-asked ones too: what the call cost), finish reasons, model and id
    as the server said them, the retries and re-asks it took, the seconds since it started;
    with ``hook_content=True``, every choice's text."""

    usage: Usage | None
    total_usage: Usage | None
    finish_reasons: tuple[str | None, ...]
    response_model: str | None
    response_id: str | None
    retries: int
    reasks: int
    elapsed: float
    texts: tuple[str, ...] | None = None


class StreamFinished(_CallEvent, frozen=True, kw_only=True):
    """A stream ended without an error: ``ended`` if it was read to its end and its value
    validated, false if it was closed (or its task cancelled) before; then the usage and
    finish reason are what had arrived. ``events``: the SSE data events received; with
    ``hook_content=True``, the text received."""

    ended: bool
    usage: Usage | None
    finish_reasons: tuple[str | None, ...]
    response_model: str | None
    response_id: str | None
    retries: int
    events: int
    elapsed: float
    text: str | None = None


HookEvent = (
    RequestSent | ResponseHead | Retrying | Reasking | CallFailed | CallFinished | StreamFinished
)
"""Every event a hook is called with."""

Hook = Callable[[HookEvent], object]
"""A hook: called with each event, in the thread (or on the event loop) of the call."""
