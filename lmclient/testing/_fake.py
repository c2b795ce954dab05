"""``FakeLLM``: an OpenAI-compatible server as a pure function of the request.

Both ways of mounting it (a real loopback HTTP server, or respx routes) call
:meth:`FakeLLM.handle`, so they answer byte for byte alike.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

import msgspec

from lmclient._servers import SERVERS

from ._answers import answer_for, bad_request, check_body, encode, first_set, usage_for
from ._constraints import Constraint, served_constraint
from ._errors import ConstraintError, UnsatisfiableError
from ._faults import MARK, Fault, FaultKind, seconds_text, shape, status_body
from ._inflight import InFlight
from ._logprobs import listed_problem
from ._models import Models
from ._queue import Script
from ._recording import Endpoint, RecordedRequest
from ._runaway import (
    CAP,
    Guard,
    Loop,
    Run,
    RunawayKind,
    check_span,
    loop_of,
    read_guard,
    reads_guard,
)
from ._scoring import API_ROUTES, ROOT_ROUTES, pooling_response
from ._script import UNSET, Reply, StreamStyle, When, matches
from ._wire import (
    JSON_HEADERS,
    Answer,
    FakeResponse,
    Kind,
    completion_body,
    endless_response,
    error_response,
    json_response,
    runaway_body,
    runaway_stream,
    sse_response,
)

if TYPE_CHECKING:
    import respx

__all__ = ["FakeLLM"]

CREATED = 1_700_000_000  # a fixed "created" timestamp keeps whole bodies comparable in tests
DEFAULT_OVERSIZE = 64 * 2**20 + 1  # one byte over lmclient's default max_response_bytes

# The release of vLLM the default fake (server=None) says it is: one that reads both
# structured_outputs and guided_*, as the default reads every placement, so that clients of
# every dialect, a forced vllm-guided one included, take it for what they expect.
ANY_DIALECT_VLLM = "0.11.0"


class FakeLLM:
    """A fake OpenAI-compatible LLM server for tests.

    What a generation request gets, in order: a scripted entry that matches it, reply or
    fault (:meth:`reply`, :meth:`reply_sequence`, :meth:`fail`, :meth:`stall`, ...; counted
    entries first, in the order scripted, then the newest sticky one); else text generated
    from the constraint the request carries (a JSON instance of a schema, a regex match, one
    of the choices, a sentence of a grammar); else ``default_text``.
    Generation is deterministic for a given ``seed``; choice ``i`` of a request with ``n``
    choices uses ``seed + i``.

    ``max_tokens`` (or ``max_completion_tokens``) is honoured with the fake's token estimate,
    one token per four characters: longer text is cut and ends with ``finish_reason
    "length"``. Stream settings (``chunk_size``, ``keepalive``, ``error_after``,
    ``close_after``, ``drop_after``; see :class:`StreamStyle`) apply to every stream unless a
    scripted reply overrides them. ``on_chunk(index)`` runs before each SSE ``data:`` event
    is written, in the thread writing the stream, so a test can pace a stream with a
    ``threading.Event``; ``on_request(request)`` runs before any request is answered.

    ``server`` is the kind of server it impersonates: it answers that server's probe endpoint,
    which clients use to pick a dialect, and reads only the constraint fields that server
    reads, so a field it ignores (``guided_json`` on vLLM >= 0.12, ``response_format`` on
    TGI's completions) leaves the answer unconstrained, as in production. The default,
    ``None``, answers the probe of vLLM 0.11 (which reads both ``structured_outputs`` and
    ``guided_*``) and reads every known placement, so one fake serves clients of any dialect;
    ``"generic"`` answers no probe and reads every placement.

    Like a server, it answers only under ``base_path`` (``/v1`` unless ``base_url`` has
    another path): ``/api/chat/completions``, a base URL without ``/v1``, or one that ends in
    ``/chat/completions`` are 404s here as in production. ``gateway=True`` imitates an
    OpenAI-compatible gateway that serves only the POST routes: no probe answered, no
    ``GET /v1/models`` (a client made with ``model=None`` must be given a model), no
    ``/tokenize``.

    It also answers ``POST /v1/embeddings`` (a deterministic unit vector per text, float or
    base64 as asked, ``dimensions`` honoured), ``POST /tokenize`` (one id per four
    characters) and the scoring routes (``/rerank``, ``/score``, ``/classify``: a query and a
    document score by the words they share) where the imitated server has them, in that
    server's shapes.

    Mount it with ``with fake.serve() as base_url:`` (a real HTTP server on 127.0.0.1) or
    ``with fake.mock() as base_url:`` (respx routes for any httpx client); while mounted,
    :attr:`base_url` is that URL.
    """

    def __init__(
        self,
        models: Iterable[str] | None = None,
        *,
        server: str | None = None,
        seed: int = 0,
        default_text: str = "This is a fake reply.",
        base_url: str | None = None,
        chunk_size: int = 4,
        keepalive: bool = False,
        error_after: int | None = None,
        close_after: int | None = None,
        drop_after: int | None = None,
        on_chunk: Callable[[int], object] | None = None,
        on_request: Callable[[RecordedRequest], object] | None = None,
        base_path: str | None = None,
        gateway: bool = False,
    ) -> None:
        # None: any model name is served, and /v1/models lists "fake-model", so a client made
        # with model=None adopts that one.
        self._served = Models.of(models, server)
        self.server = server
        self.seed = seed
        self.default_text = default_text
        self.style = StreamStyle(chunk_size, keepalive, error_after, close_after, drop_after)
        self.on_chunk = on_chunk
        self.on_request = on_request
        self._base_url = base_url
        self.base_path = _base_path(base_path, base_url)
        self.gateway = gateway
        self._mounts: list[str] = []
        self._script = Script()
        self._routes: dict[tuple[str, str], FakeResponse] = {}
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._ids = itertools.count(1)
        self._in_flight = InFlight()
        # The route that aborts a request by its id, where the imitated server has one (SGLang's
        # ``/abort_request``, at the root): answered as the server does, recorded (`aborted`).
        known_server = None if server in (None, "generic") or gateway else SERVERS.get(server)
        self._abort_path = None if known_server is None else known_server.abort
        if server is not None and server != "generic" and server not in SERVERS:
            kinds = [*SERVERS, "generic", None]
            raise ValueError(f"server must be one of {kinds}, not {server!r}")
        if server != "generic" and not gateway:
            known = SERVERS[server or "vllm"]
            answer = dict(known.answer)
            if server is None:
                answer[known.version_key] = ANY_DIALECT_VLLM
            self.add_route("GET", known.probes[0], answer)
            for path, also in known.also.items():  # a second probe that tells the kind apart
                self.add_route("GET", path, dict(also))

    @property
    def base_url(self) -> str | None:
        """The URL clients should use (``http://.../v1``): while the fake is mounted, that of
        the latest mount; otherwise the ``base_url`` it was given (respx only answers that
        origin then), or ``None``."""
        with self._lock:
            return self._mounts[-1] if self._mounts else self._base_url

    @base_url.setter
    def base_url(self, value: str | None) -> None:
        self._base_url = value

    # -- scripting -------------------------------------------------------------------------

    def reply(
        self,
        value: Any,
        *,
        times: int | None = None,
        when: When = None,
        finish_reason: str = "stop",
        refusal: str | None = None,
        reasoning: str | None = None,
        usage: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
        logprobs: Any = None,
        probabilities: Mapping[str, float] | None = None,
        chunk_size: int | None = None,
        keepalive: bool | None = None,
        error_after: int | None = None,
        close_after: int | None = None,
        drop_after: int | None = None,
        tool_calls: Iterable[tuple[str, Any]] = (),
    ) -> Reply:
        """Script the answer text: a ``str`` is sent as is, ``None`` as ``content: null``, any
        other value JSON-encoded by msgspec (Structs, dataclasses, lists, numbers, ...).

        ``tool_calls`` are ``(name, arguments)`` pairs sent as the answer's tool calls, the
        arguments JSON-encoded (a ``str`` as is, so that invalid JSON can be scripted); the
        finish reason is then ``"tool_calls"`` unless one is given.

        ``usage`` replaces the estimated counts (details such as ``prompt_tokens_details``
        included); ``extra`` adds fields at the top level of the body (of every chunk, in a
        stream), as servers add their own (``metrics``, ``timings``, ...). ``logprobs`` is the
        choice's object as sent; ``probabilities`` (option → probability, the answer's option
        among them) makes it up in the server's shape, when the request asks for logprobs.

        ``times=None`` (default) answers every later request no counted entry takes;
        ``times=k`` answers the next ``k``. ``when`` limits the reply to the requests it
        matches: a prompt substring, a compiled regex, a :class:`Match` (message role, output
        type, endpoint, stream) or a predicate. Each choice of an ``n > 1`` request takes its
        own reply.
        """
        content = value if value is None or isinstance(value, str) else encode(value)
        if probabilities is not None and not any(k in (content or "") for k in probabilities):
            raise ValueError(f"probabilities= needs the answer's option among its keys: {value!r}")
        calls = tuple((name, a if isinstance(a, str) else encode(a)) for name, a in tool_calls)
        if calls and finish_reason == "stop":
            finish_reason = "tool_calls"
        reply = Reply(
            content=content,
            finish_reason=finish_reason,
            refusal=refusal,
            reasoning=reasoning,
            usage=usage,
            extra=extra,
            logprobs=logprobs,
            probabilities=None if probabilities is None else dict(probabilities),
            when=when,
            times=times,
            chunk_size=chunk_size,
            keepalive=keepalive,
            error_after=error_after,
            close_after=close_after,
            drop_after=drop_after,
            tool_calls=calls,
        )
        self._script.add(reply)
        return reply

    def reply_sequence(self, values: Iterable[Any], *, when: When = None) -> list[Reply]:
        """Script one answer per value, used once each, in order."""
        return [self.reply(value, times=1, when=when) for value in values]

    def reply_error(
        self,
        status: int,
        body: dict[str, Any] | str | bytes,
        *,
        headers: Mapping[str, str] | None = None,
        times: int | None = 1,
        when: When = None,
    ) -> Fault:
        """:meth:`fail` with a required body: a ``dict`` is JSON-encoded, a ``str`` becomes
        the message of a vLLM-style envelope, ``bytes`` are sent verbatim."""
        return self.fail(status, body=body, headers=headers, times=times, when=when)

    # -- faults ----------------------------------------------------------------------------
    # Each queues a Fault like a reply (FIFO among counted entries; times=None: every request)
    # and applies to generation requests only, never to probes or /v1/models. A fault that
    # shapes an answer (delay, stall, cuts, corruption) shows the reply the next request would
    # get, without using it up: the retry that follows a fault gets that reply.

    def fail(
        self,
        status: int = 500,
        *,
        body: dict[str, Any] | str | bytes | None = None,
        headers: Mapping[str, str] | None = None,
        retry_after: float | None = None,
        times: int | None = 1,
        when: When = None,
    ) -> Fault:
        """Answer with HTTP ``status``: the body is a vLLM-style error envelope (a ``str``
        body is its message), a ``dict`` JSON-encoded, ``bytes`` sent verbatim as text.
        ``retry_after`` sets the ``Retry-After`` header (seconds)."""
        if status < 400:
            raise ValueError("fail needs an error status (>= 400)")
        if isinstance(body, bytes):
            raw, content_type = body, "text/plain; charset=utf-8"
        elif isinstance(body, dict):
            raw, content_type = msgspec.json.encode(body), "application/json"
        else:
            raw, content_type = status_body(status, body), "application/json"
        given = {k.lower(): v for k, v in (headers or {}).items()}
        given.setdefault("content-type", content_type)
        if retry_after is not None:
            given["retry-after"] = seconds_text(retry_after)
        fault = Fault("status", times, when, status=status, headers=tuple(given.items()), body=raw)
        return self._add(fault)

    def delay(self, seconds: float, *, times: int | None = 1, when: When = None) -> Fault:
        """Wait ``seconds`` (``math.inf``: until the server stops) before the status line,
        then answer as usual."""
        return self._add(Fault("delay", times, when, seconds=seconds))

    def stall(
        self,
        seconds: float = math.inf,
        *,
        after: int = 2,
        times: int | None = 1,
        when: When = None,
    ) -> Fault:
        """Stop mid-body for ``seconds`` (default: until the server stops), then go on: a
        JSON body halfway, a stream after ``after`` ``data:`` events."""
        return self._add(Fault("stall", times, when, seconds=seconds, after=after))

    def disconnect(
        self,
        at: Literal["start", "headers", "body", "stream"] = "body",
        *,
        after: int = 2,
        times: int | None = 1,
        when: When = None,
    ) -> Fault:
        """Close the connection: ``"start"`` before any byte of the answer, ``"headers"``
        halfway through the head, ``"body"`` halfway through the body (a stream: halfway
        through the event after ``after`` events), ``"stream"`` between two events, after
        ``after`` ``data:`` events (streaming requests only)."""
        kinds: dict[str, FaultKind] = {
            "start": "disconnect_start",
            "headers": "disconnect_headers",
            "body": "disconnect_body",
            "stream": "disconnect_stream",
        }
        if at not in kinds:
            raise ValueError(f"at must be one of {list(kinds)}, not {at!r}")
        return self._add(Fault(kinds[at], times, when, after=after))

    def invalid_json(self, *, after: int = 2, times: int | None = 1, when: When = None) -> Fault:
        """Answer 200 with JSON that does not parse (the last byte of the body, or of the
        event after ``after`` events in a stream, is missing)."""
        return self._add(Fault("invalid_json", times, when, after=after))

    def invalid_utf8(self, *, times: int | None = 1, when: When = None) -> Fault:
        """Answer 200 whose text starts with the byte ``0xFF``, which is not UTF-8."""
        return self._add(Fault("invalid_utf8", times, when))

    def truncate(self, *, after: int = 2, times: int | None = 1, when: When = None) -> Fault:
        """End a stream cleanly after ``after`` ``data:`` events: no finish reason, no
        ``[DONE]`` (streaming requests only)."""
        return self._add(Fault("truncate", times, when, after=after))

    def stream_error(
        self,
        *,
        after: int = 2,
        status: int = 500,
        message: str = "fake mid-stream error",
        times: int | None = 1,
        when: When = None,
    ) -> Fault:
        """Send an error event (vLLM's ``{"error": {..., "code": status}}``) and ``[DONE]``
        after ``after`` ``data:`` events of a 200 stream (streaming requests only)."""
        return self._add(
            Fault("stream_error", times, when, after=after, status=status, message=message)
        )

    def endless(
        self,
        *,
        every: float = 0.01,
        keepalive: bool = False,
        times: int | None = 1,
        when: When = None,
    ) -> Fault:
        """Stream the answer, then never end: a one-space delta every ``every`` seconds (with
        ``keepalive``, a ``: keep-alive`` comment instead), until the client goes away or the
        server stops (streaming requests only)."""
        return self._add(Fault("endless", times, when, every=every, keepalive=keepalive))

    def oversize(
        self,
        size: int = DEFAULT_OVERSIZE,
        *,
        chunked: bool = False,
        times: int | None = 1,
        when: When = None,
    ) -> Fault:
        """Answer 200 with a body of at least ``size`` bytes (default: one byte over
        lmclient's default limit) whose text is ``x`` repeated: valid JSON under a declared
        ``content-length``, or with ``chunked`` (and always for streams) of unannounced size.
        Produced piece by piece, never held in memory."""
        return self._add(Fault("oversize", times, when, size=size, chunked=chunked))

    def runaway(
        self,
        kind: RunawayKind = "repeat",
        *,
        span: str | None = None,
        times: int | None = 1,
        when: When = None,
    ) -> Fault:
        """Answer with a loop: a valid prefix of the answer the request would get, then
        ``kind`` for ever: ``"repeat"`` a span (``span``, or a piece of the answer: a list's
        last item, a string's first words, a number's digits; a text's first words),
        ``"whitespace"`` newlines and spaces after the first ``{``/``[`` (``span``: other
        whitespace), ``"digits"`` a number's digits that never end, ``"unclosed"`` a string
        that never closes, counting ``step 1 step 2 ...``.

        A stream sends one delta (``chunk_size`` characters, a token) at a time until the
        client leaves (:attr:`Fault.abandoned` is then set) or, when the request gives
        ``max_tokens``, that many deltas, then ``finish_reason "length"`` with usage; a
        non-streamed answer is the text of ``max_tokens`` deltas (else 2,048). Where the
        server played reads vLLM's ``repetition_detection`` (vLLM >= 0.17, and the default
        fake) and the request sets it, the loop ends as vLLM ends it: ``finish_reason
        "repetition"``, ``stop_reason "repetition_detected"``.
        """
        check_span(kind, span)
        return self._add(Fault("runaway", times, when, runaway=kind, span=span))

    def _add(self, fault: Fault) -> Fault:
        self._script.add(fault)
        return fault

    def add_route(
        self,
        method: str,
        path: str,
        body: Any,
        *,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Answer ``method path`` (exact path, e.g. ``"/version"``) with a fixed response.

        For server probes and extra endpoints; a ``str``/``bytes`` body is sent as is, anything
        else as JSON. Fixed routes take precedence over the built-in endpoints.
        """
        raw = body.encode() if isinstance(body, str) else body
        if isinstance(raw, bytes):
            given = {"content-type": "text/plain; charset=utf-8"}
        else:
            raw, given = msgspec.json.encode(body), dict(JSON_HEADERS)
        given.update({k.lower(): v for k, v in (headers or {}).items()})
        self._routes[(method.upper(), path)] = FakeResponse(status, list(given.items()), raw)

    @property
    def pending(self) -> int:
        """How many uses of counted (``times=k``) replies and faults are left."""
        return self._script.pending

    def reset(self) -> None:
        """Forget recorded requests, scripted replies and faults, and the in-flight peak (not
        routes)."""
        self._script.clear()
        with self._lock:
            self._requests.clear()
        self._in_flight.reset()

    # -- observation -----------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received, oldest first (probes and models included)."""
        with self._lock:
            return list(self._requests)

    @property
    def calls(self) -> list[RecordedRequest]:
        """The generation requests (chat and completions) received, oldest first: what
        lmclient's server probes and ``GET /v1/models`` are not."""
        return [r for r in self.requests if r.endpoint in ("chat", "completions")]

    @property
    def aborted(self) -> list[Any]:
        """The ids that requests to the imitated server's abort route named, oldest first
        (SGLang's ``POST /abort_request``: each body's ``rid``). The fake answers that route as
        SGLang 0.5.23 does (200, no body), and keeps generating: a test asserts what a client
        asked for."""
        return [
            r.body.get("rid") if isinstance(r.body, dict) else r.body
            for r in self.requests
            if r.path == self._abort_path and r.method == "POST"
        ]

    @property
    def last_request(self) -> RecordedRequest:
        with self._lock:
            if not self._requests:
                raise LookupError("FakeLLM has not received any request")
            return self._requests[-1]

    def assert_called(
        self, times: int | None = None, *, with_output_type: Any = UNSET, when: When = None
    ) -> list[RecordedRequest]:
        """Assert on the generation requests received; returns the ones selected.

        ``with_output_type`` and ``when`` select requests (those that ask for that output type
        the way lmclient would, see :meth:`RecordedRequest.asks_for`; those ``when`` matches);
        then there must be exactly ``times`` of them, or at least one when ``times`` is
        ``None``. The error lists every call with the constraint it carried.
        """
        selected = [
            call
            for call in self.calls
            if matches(when, call)
            and (with_output_type is UNSET or call.asks_for(with_output_type))
        ]
        if (len(selected) > 0) if times is None else (len(selected) == times):
            return selected
        wanted = "at least 1" if times is None else str(times)
        what = "" if with_output_type is UNSET else f" asking for {with_output_type!r}"
        what += "" if when is None else f" matching {when!r}"
        seen = "\n".join(f"  {_describe(call)}" for call in self.calls) or "  (none)"
        message = f"expected {wanted} call(s){what}, got {len(selected)}; calls received:\n{seen}"
        raise AssertionError(message)

    @property
    def max_in_flight(self) -> int:
        """The most requests handled at the same time (served mode), streams included."""
        return self._in_flight.peak

    # -- mounting --------------------------------------------------------------------------

    def serve(self, *, uds: str | os.PathLike[str] | None = None) -> AbstractContextManager[str]:
        """Run a real HTTP/1.1 server on 127.0.0.1; yields its base URL (``.../v1``). With
        ``uds`` (a path where nothing exists yet), on that Unix socket instead, for clients made
        with ``uds=`` the same path; it yields ``http://localhost/v1`` and removes the socket
        when done.

        Leaving the block stops it promptly, even while a stall, a delay or an endless stream
        is in progress: their waits end when the server stops."""
        from ._server import serve

        return serve(self, uds)

    def mock(self, router: respx.Router | None = None) -> AbstractContextManager[str]:
        """Route httpx requests to the fake with respx; yields the base URL to use.

        Without ``router`` a ``respx.mock`` is started for the duration; with one, a route is
        added to it and removed on exit. Requests to any URL are answered, or only those under
        the origin of ``base_url`` when the fake was given one.
        """
        from ._respx import mock

        return mock(self, router)

    @contextmanager
    def _mounted_at(self, url: str) -> Iterator[str]:
        """Make ``url`` the :attr:`base_url` for the duration of a mount."""
        with self._lock:
            self._mounts.append(url)
        try:
            yield url
        finally:
            with self._lock:
                self._mounts.remove(url)

    # -- handling --------------------------------------------------------------------------

    def handle(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes
    ) -> FakeResponse:
        """Answer one HTTP request; records it first. Never raises for bad input."""
        path = path.split("?", 1)[0]
        try:
            decoded: Any = msgspec.json.decode(body) if body else None
            bad_json = False
        except msgspec.DecodeError:
            decoded, bad_json = None, True
        request = RecordedRequest(
            method=method.upper(),
            path=path,
            endpoint=self._route(path),
            headers={k.lower(): v for k, v in headers.items()},
            body=decoded,
            raw_body=body,
        )
        with self._lock:
            self._requests.append(request)
        if self.on_request is not None:
            self.on_request(request)
        fixed = self._routes.get((request.method, path))
        if fixed is not None:
            return fixed
        if path == self._abort_path and request.method == "POST":
            return _abort_response(decoded)
        if request.endpoint == "models" and request.method == "GET" and not self.gateway:
            return self._models()
        if request.endpoint in ("embeddings", "tokenize", "scoring") and request.method == "POST":
            return pooling_response(request, decoded, self.server, self._served)
        if request.endpoint not in ("chat", "completions") or request.method != "POST":
            return error_response(
                404, f"Route {request.method} {path} not found", "not_found_error", code=404
            )
        if bad_json or not isinstance(decoded, dict):
            return bad_request("The request body is not a JSON object")
        return self._generate(request, decoded)

    def _route(self, path: str) -> Endpoint:
        """What ``path`` reaches, as on a server: the API under `base_path` only (another
        prefix, or a path doubled by a base URL that already ends in it, is a 404 there as
        here), ``/tokenize`` and the scoring routes at the root too; a gateway serves none of
        the GET routes and nothing at the root."""
        base = self.base_path
        if path.startswith(base) and path[len(base) :] in _API:
            endpoint = _API[path[len(base) :]]
            return "other" if self.gateway and endpoint == "tokenize" else endpoint
        return "other" if self.gateway else ROOT_ROUTES.get(path, "other")

    def _models(self) -> FakeResponse:
        """``GET /v1/models``; its cards' ``owned_by`` is the imitated server's own name, which
        clients read as a hint of the server (``lmclient-fake`` where it has none)."""
        known = None if self.server == "generic" else SERVERS[self.server or "vllm"]
        owner = (known.owner if known is not None else None) or "lmclient-fake"
        cards = [
            {"id": model, "object": "model", "created": 0, "owned_by": owner}
            for model in self._served.names
        ]
        return json_response(200, {"object": "list", "data": cards})

    def _generate(self, request: RecordedRequest, body: dict[str, Any]) -> FakeResponse:
        kind: Kind = "chat" if request.endpoint == "chat" else "completions"
        refused = self._served.refusal(body)
        if refused is not None:
            return refused
        problem = check_body(kind, body)
        if not problem and self.server == "vllm":
            problem = listed_problem(kind, body)
        if problem:
            return bad_request(problem)
        try:
            guard = read_guard(body) if reads_guard(self.server) else None
        except ValueError as exc:
            return bad_request(str(exc))
        try:
            constraint = served_constraint(body, self.server, kind)
        except ConstraintError as exc:
            return bad_request(str(exc))
        entry = self._script.take(request)
        fault = entry if isinstance(entry, Fault) else None
        if fault is not None and fault.kind == "status":
            return fault.response()
        # a runaway starts as the whole answer would: it is not cut at max_tokens
        whole = fault is not None and fault.kind == "runaway"
        limit = None if whole else first_set(body, "max_completion_tokens", "max_tokens")
        try:
            answers, first = self._answers(request, body, constraint, entry, limit)
        except UnsatisfiableError as exc:
            return bad_request(str(exc))
        if fault is not None and fault.kind in ("invalid_utf8", "oversize"):
            text = "" if fault.kind == "oversize" else answers[0].content or ""
            answers[0] = dataclasses.replace(answers[0], content=MARK + text)
        number = next(self._ids)
        rid = body.get("rid") if self.server == "sglang" else None
        head = {
            # SGLang answers with the request's rid as the id (its ``meta_info["id"]``)
            "id": rid
            if isinstance(rid, str)
            else f"chatcmpl-{number}"
            if kind == "chat"
            else f"cmpl-{number}",
            "object": "chat.completion" if kind == "chat" else "text_completion",
            "created": CREATED,
            "model": self._served.answering(body),
        }
        if first is not None and first.extra:
            head.update(first.extra)
        usage = usage_for(kind, body, answers, first)
        style = self.style.override(first)
        if fault is not None and fault.kind == "endless":
            return endless_response(
                kind,
                head,
                answers[0],
                style.chunk_size,
                fault.every,
                fault.keepalive,
                self.on_chunk,
            )
        if fault is not None and fault.kind == "runaway":
            loop = loop_of(answers[0].content, fault.runaway, fault.span)
            return self._run_away(request, head, loop, style.chunk_size, guard, fault)
        if not request.stream:
            response = json_response(200, completion_body(kind, head, answers, usage))
        else:
            shown = usage if _include_usage(body) else None
            response = sse_response(kind, head, answers, shown, style, self.on_chunk)
        return response if fault is None else shape(fault, response)

    def _run_away(
        self,
        request: RecordedRequest,
        head: dict[str, Any],
        loop: Loop,
        chunk_size: int,
        guard: Guard | None,
        fault: Fault,
    ) -> FakeResponse:
        """A runaway fault's answer: streamed until the client leaves or ``max_tokens``; not
        streamed, up to ``max_tokens`` or :data:`CAP`; ended early by vLLM's guard."""
        body = request.body
        kind: Kind = "chat" if request.endpoint == "chat" else "completions"
        given = first_set(body, "max_completion_tokens", "max_tokens")
        limit = given if isinstance(given, int) and not isinstance(given, bool) else None
        prompt_tokens = usage_for(kind, body, [], None)["prompt_tokens"]
        if not request.stream:
            run = Run(loop, chunk_size, limit or CAP, guard)
            return runaway_body(kind, head, run, prompt_tokens)
        run = Run(loop, chunk_size, limit, guard)
        shown = prompt_tokens if _include_usage(body) else None
        return runaway_stream(kind, head, run, shown, self.on_chunk, fault.abandoned.set)

    def _answers(
        self,
        request: RecordedRequest,
        body: dict[str, Any],
        constraint: Constraint,
        entry: Reply | Fault | None,
        limit: Any,
    ) -> tuple[list[Answer], Reply | None]:
        """One answer per choice, cut at ``limit`` tokens (``None``: whole), and the first
        choice's reply (``None``: generated).

        Each choice takes its own reply. Under a fault, every choice shows the reply the
        request would get, without using it up: the retry that follows a fault gets it."""
        count = body.get("n") or 1
        if isinstance(entry, Fault):
            shown = self._script.reply_for(request, consume=False)
            replies = [shown] * count
        else:
            replies = [entry] + [self._script.reply_for(request) for _ in range(count - 1)]
        answers = [
            answer_for(
                reply,
                constraint,
                index,
                limit,
                body,
                server=self.server,
                seed=self.seed,
                default_text=self.default_text,
            )
            for index, reply in enumerate(replies)
        ]
        return answers, replies[0]


def _abort_response(body: Any) -> FakeResponse:
    """SGLang's ``POST /abort_request`` (0.5.23, ``srt/entrypoints/http_server.py``): the body
    is an ``AbortReq`` (``rid``, ``abort_all``, ...; other keys ignored), answered 200 with an
    empty body whether the rid is running, finished or unknown; a body that is no such object
    is FastAPI's 422."""
    if not isinstance(body, dict) or not isinstance(body.get("rid", ""), (str, type(None))):
        detail = [{"type": "model_attributes_type", "loc": ["body"], "msg": "Input should be a "
                   "valid dictionary or object to extract fields from", "input": body}]  # fmt: skip
        return json_response(422, {"detail": detail})
    return FakeResponse(200, [])


def _include_usage(body: dict[str, Any]) -> bool:
    """Whether a streaming request asks for the usage event (``stream_options``)."""
    options = body.get("stream_options") or {}
    return isinstance(options, dict) and options.get("include_usage") is True


def _describe(call: RecordedRequest) -> str:
    """One line about a call for assertion messages: endpoint, prompt and constraint."""
    try:
        constraint = call.constraint
    except ConstraintError as exc:
        carried = f"malformed constraint ({exc})"
    else:
        value = "" if constraint.value is None else " " + encode(constraint.value)[:120]
        carried = constraint.kind + value
    return f"{call.endpoint} {call.prompt[:60]!r}: {carried}"


# The API's routes under the base path, as every server has them (llama.cpp's token count is
# under its chat completions).
_API: dict[str, Endpoint] = {
    "/chat/completions": "chat",
    "/completions": "completions",
    "/models": "models",
    "/embeddings": "embeddings",
    "/chat/completions/input_tokens": "tokenize",
    **API_ROUTES,
}


def _base_path(given: str | None, base_url: str | None) -> str:
    """The path the API is served under: ``base_path`` as given, else that of ``base_url``,
    else ``/v1`` (vLLM's, SGLang's, llama.cpp's)."""
    if given is None:
        given = urlsplit(base_url).path if base_url is not None else "/v1"
    path = "/" + given.strip("/")
    if path == "/" or "?" in path or "#" in path:
        raise ValueError(f"base_path must be a path such as '/v1', not {given!r}")
    return path
