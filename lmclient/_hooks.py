"""Hooks: each call reported, as small typed events, to the application's callables, and to an
OpenTelemetry span when tracing is on (`_otel`).

A client with neither hooks nor spans pays one look-up per call (`Observer.key`); everything
else here runs only for an observed call. The shells say *when* (`Watch.sending`,
`Watch.received`, ...); this module decides *what* each event carries, so both shells report
alike. Events carry no prompt, answer or key: the request body and the answers' texts only with
``hook_content=True``, and the key never (it is in the request's headers, which no event
carries; `ResponseHead` carries the response's).

A hook that raises does not fail the call: observability must not change a call's outcome (a
metrics backend that is down must not take the service down with it). The failure is logged
once per hook and client, at WARNING with its traceback, so that a broken hook is seen without
flooding the log at the request rate; later failures of that hook are logged at DEBUG.
"""

from __future__ import annotations

import inspect
import itertools
import logging
import sys
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import errors
from ._events import (
    CallFailed,
    CallFinished,
    Hook,
    HookEvent,
    Reasking,
    RequestSent,
    ResponseHead,
    Retrying,
    StreamFinished,
)
from ._log import log
from .errors import ConfigurationError

if TYPE_CHECKING:
    from ._call import Attempts, Call
    from ._core import ClientCore
    from ._otel import CallSpan
    from ._response import Response
    from ._stream_state import StreamState

__all__ = ["Hook", "Observer", "Watch"]  # (the events are `_events`'s: imported from there)


_MODULES = sys.modules
_TRACED = "opentelemetry.trace"  # in sys.modules once the application has imported OpenTelemetry
_call_ids = itertools.count(1)  # process-wide: ids stay unique across clients (atomic in CPython)


class Observer:
    """A client's hooks and tracing switch (checked once, when the client is made); it starts
    each observed call's `Watch`.

    ``key`` is the name whose presence in ``sys.modules`` says that a call is observed: the
    package itself (always there) with hooks or ``tracing=True``, ``"opentelemetry.trace"``
    with ``tracing=None`` (on once the application has imported OpenTelemetry), and ``""``
    (never there) otherwise. The shells' one check per call is ``key in sys.modules``."""

    __slots__ = ("content", "hooks", "key", "tracing", "warned")

    def __init__(self, hooks: Sequence[Hook], *, content: bool, tracing: bool | None) -> None:
        if isinstance(hooks, (str, bytes)) or not isinstance(hooks, Sequence):
            raise ConfigurationError("hooks must be a sequence of callables")
        for hook in hooks:
            if not callable(hook):
                raise ConfigurationError(f"a hook must be callable, not {hook!r}")
            if inspect.iscoroutinefunction(hook) or inspect.iscoroutinefunction(
                getattr(hook, "__call__", None)  # noqa: B004 (an instance with an async __call__)
            ):
                raise ConfigurationError(
                    f"hooks are plain callables, called on the event loop: {hook!r} is a "
                    "coroutine function, whose coroutine would never be awaited (schedule "
                    "async work from a plain hook, e.g. with loop.create_task or a queue)"
                )
        if tracing is not None and not isinstance(tracing, bool):
            raise ConfigurationError(f"tracing must be None, True or False, not {tracing!r}")
        if not isinstance(content, bool):
            raise ConfigurationError(f"hook_content must be a bool, not {content!r}")
        if tracing:
            try:
                from . import _otel  # noqa: F401 (imported now so that a missing API fails here)
            except ImportError:
                raise ConfigurationError(
                    "tracing=True needs opentelemetry-api (pip install opentelemetry-api)"
                ) from None
        self.hooks = tuple(hooks)
        self.content = content
        self.tracing = tracing
        self.warned: set[int] = set()  # the hooks (by index) whose failure was logged
        self.key = "lmclient" if self.hooks or tracing else _TRACED if tracing is None else ""

    def watch(self, endpoint: str, *, stream: bool) -> Watch:
        """A new call's `Watch`; its span starts with `Watch.begin`."""
        return Watch(self, endpoint, stream=stream)


class Watch:
    """One observed call: its identity, its clock, its span; each method reports one event.

    As a context manager it reports the exception that leaves it, if any (a failed set-up
    request included), and leaves the span's context. `begin`, once the set-up requests are
    done, starts the span and makes it current (so that what the call sends, and the spans of
    what it calls, belong to it).
    """

    __slots__ = (
        "_observer",
        "_sent",
        "_started",
        "_token",
        "attempt",
        "call_id",
        "done",
        "endpoint",
        "model",
        "span",
        "stream",
    )

    def __init__(self, observer: Observer, endpoint: str, *, stream: bool) -> None:
        self._observer = observer
        self.call_id = next(_call_ids)
        self.endpoint = endpoint
        self.model: str | None = None
        self.span: CallSpan | None = None
        self.stream = stream
        self.attempt = 0
        self.done = False  # the call's last event was reported (and its span ended)
        self._started = self._sent = time.monotonic()
        self._token: object = None

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        try:
            if exc is not None:
                self.failed(exc)
        finally:
            if self.span is not None:
                self.span.leave(self._token)

    def begin(self, core: ClientCore, params: dict[str, Any]) -> dict[str, Any]:
        """The client is set up (model and dialect known): the span starts, if tracing is on
        now, and is current until the watch is left. Returns the call's ``params``, with the
        span's trace context as its ``traceparent`` (and ``tracestate``) when the call gives
        none, so that the server's spans join the call's."""
        defaults = core.defaults
        self.model = params.get("model") or defaults.get("model") or core.model
        observer = self._observer
        if observer.tracing or (observer.tracing is None and _TRACED in _MODULES):
            from ._otel import CallSpan, current_traceparent

            self.span = CallSpan(core, self.endpoint, self.model, stream=self.stream)
            self._token = self.span.enter()
            if _TRACE_PARAMS.isdisjoint(params) and _TRACE_PARAMS.isdisjoint(defaults):
                context = current_traceparent()
                if context is not None:
                    traceparent, tracestate = context
                    params = {**params, "traceparent": traceparent}
                    if tracestate is not None:
                        params["tracestate"] = tracestate
        return params

    # -- the events ----------------------------------------------------------------------------

    def sending(self, call: Attempts) -> None:
        """An attempt's request is about to be written."""
        self.attempt += 1
        self._sent = time.monotonic()
        body = call.request.body
        if self.span is not None and self.attempt == 1:
            self.span.request(body)
        self._emit(
            RequestSent(
                call_id=self.call_id,
                endpoint=self.endpoint,
                model=self.model,
                attempt=self.attempt,
                stream=self.stream,
                body=body if self._observer.content else None,
            )
        )

    def received(self, status: int, headers: Mapping[str, str]) -> None:
        """An attempt's response head (or whole response) arrived."""
        self._emit(
            ResponseHead(
                call_id=self.call_id,
                endpoint=self.endpoint,
                model=self.model,
                attempt=self.attempt,
                status=status,
                elapsed=time.monotonic() - self._sent,
                request_id=headers.get("x-request-id"),
                _headers=headers,
            )
        )

    def retrying(self, delay: float, exc: errors.LMClientError) -> None:
        """The attempt failed with ``exc``; the next starts in ``delay`` seconds."""
        self._emit(
            Retrying(
                call_id=self.call_id,
                endpoint=self.endpoint,
                model=self.model,
                attempt=self.attempt,
                delay=delay,
                error=type(exc).__name__,
                status=_status(exc),
            )
        )

    def reasked(self, call: Call, exc: errors.ValidationError) -> None:
        """``call`` asks again after the invalid answer ``exc``."""
        self._emit(
            Reasking(
                call_id=self.call_id,
                endpoint=self.endpoint,
                model=self.model,
                attempt=self.attempt,
                number=call.reasks,
                detail=exc.detail,
                text=exc.text if self._observer.content else None,
            )
        )

    def finished(self, response: Response[Any, Any]) -> Response[Any, Any]:
        """The call returned ``response`` (returned as is)."""
        self._end(
            CallFinished(
                call_id=self.call_id,
                endpoint=self.endpoint,
                model=self.model,
                attempt=self.attempt,
                usage=response.usage,
                total_usage=response.total_usage,
                finish_reasons=tuple(response.finish_reasons),
                response_model=response.model,
                response_id=response.id,
                retries=response.retries,
                reasks=response.reasks,
                elapsed=time.monotonic() - self._started,
                texts=tuple(response.texts) if self._observer.content else None,
            )
        )
        return response

    def failed(self, exc: BaseException) -> None:
        """The call raised ``exc`` (reported once: the first failure is the call's)."""
        if not self.done:
            self._end(
                CallFailed(
                    call_id=self.call_id,
                    endpoint=self.endpoint,
                    model=self.model,
                    attempt=self.attempt,
                    error=type(exc).__name__,
                    status=_status(exc),
                    elapsed=time.monotonic() - self._started,
                    total_usage=getattr(exc, "total_usage", None),
                )
            )

    def stream_result(self, state: StreamState) -> Response[Any, Any]:
        """The stream's validated `Response` (`StreamState.result`), reported."""
        try:
            response = state.result()
        except BaseException as exc:
            self.failed(exc)
            raise
        if not self.done:
            self._stream_end(state, ended=True, retries=response.retries)
        return response

    def closed(self, state: StreamState) -> None:
        """The stream was closed before its end (or its end is reported already)."""
        if not self.done:
            self._stream_end(state, ended=False, retries=state.call.retries)

    # -- plumbing ------------------------------------------------------------------------------

    def _stream_end(self, state: StreamState, *, ended: bool, retries: int) -> None:
        self._end(
            StreamFinished(
                call_id=self.call_id,
                endpoint=self.endpoint,
                model=self.model,
                attempt=self.attempt,
                ended=ended,
                usage=state.usage,
                finish_reasons=(state.finish_reason,) if state.finish_reason else (),
                response_model=state.model,
                response_id=state.id,
                retries=retries,
                events=state.events,
                elapsed=time.monotonic() - self._started,
                text=state.text if self._observer.content else None,
            )
        )

    def _end(self, event: CallFinished | CallFailed | StreamFinished) -> None:
        self.done = True
        self._emit(event)

    def _emit(self, event: HookEvent) -> None:
        """``event`` to every hook, then to the span; a hook that raises is logged, not raised."""
        observer = self._observer
        for index, hook in enumerate(observer.hooks):
            try:
                hook(event)
            except Exception:
                first = index not in observer.warned
                observer.warned.add(index)
                log.log(
                    logging.WARNING if first else logging.DEBUG,
                    "hook %r raised on %s (the call goes on%s)",
                    hook,
                    type(event).__name__,
                    "; later failures of this hook are logged at DEBUG" if first else "",
                    exc_info=True,
                )
        if self.span is not None:
            self.span.record(event)


_TRACE_PARAMS = frozenset({"traceparent", "tracestate"})


def _status(exc: BaseException) -> int | None:
    """The HTTP status of an error response, if ``exc`` is one."""
    status = getattr(exc, "status_code", None) if isinstance(exc, errors.APIStatusError) else None
    return status if isinstance(status, int) else None
