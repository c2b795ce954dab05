"""`SyncTransport`: blocking sockets for `Client`; the design is in `lmclient._transports`."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING

import httpx

from lmclient import errors
from lmclient._proxies import proxied
from lmclient._request import PreparedRequest, Timeouts
from lmclient._transports.common import (
    DEFAULT_LIMITS,
    READ_SIZE,
    Limiter,
    Pool,
    RawResponse,
    RespxMocks,
    StaleConnection,
    StreamResponse,
    Target,
    Targets,
    check_uds,
    closed_error,
    header_dict,
    httpx_error,
    httpx_request,
    io_error,
    or_none,
    own_client,
    per_process,
    raw_chunks,
    raw_response,
    readability,
    remaining,
    ssl_context,
)
from lmclient._wire.http11 import BadResponse, ResponseParser, declared_length, encode_request

if TYPE_CHECKING:
    import ssl

__all__ = ["SyncTransport"]

_RESPX = RespxMocks(False)  # respx's two mockers


class _SyncConnection:
    """A socket and what the pool needs to know about it.

    Every wait is bounded by the socket's own timeout (Python's, `socket.settimeout`: one for
    both directions, set only when it changes), which CPython keeps as a deadline: it polls
    before each send and receive and, when a signal interrupts the wait, polls again for what
    is left (PEP 475), so a process with a periodic signal (a profiler, ``setitimer``, a
    watchdog) cannot stretch a wait; and ``sendall`` is bounded as a whole, however slowly the
    server reads. The kernel's timeouts (SO_RCVTIMEO, SO_SNDTIMEO) would save that poll, but a
    signal restarts them whole, and a send's with each piece the server takes: a 1 s deadline
    outlived a server answering after 6 s under a 0.2 s SIGALRM, and an 8 MiB prompt to a slow
    reader ran 54 s past a 2 s one."""

    __slots__ = (
        "__weakref__",  # (the pool's set of open connections is weak: `Pool`)
        "idle_since",
        "origin",
        "parser",
        "sock",
        "stale",
        "timeout",
    )

    def __init__(self, sock: socket.socket, origin: tuple[str, str, int], timeout: float) -> None:
        self.sock = sock
        self.origin = origin
        self.timeout = timeout  # the socket's, as set (math.inf: none)
        self.idle_since = 0.0
        self.stale = readability(sock)
        self.parser = ResponseParser()  # reset for each response (`_exchange`)

    def set_timeout(self, timeout: float) -> None:
        self.sock.settimeout(or_none(timeout))
        self.timeout = timeout

    def pace(self, read_timeout: float, deadline_at: float, doing: str) -> None:
        """Before a read: wait no longer than the read timeout, nor past the deadline (so a
        server trickling bytes cannot keep a call alive after it)."""
        timeout = min(read_timeout, remaining(deadline_at, doing))
        if timeout != self.timeout:
            self.set_timeout(timeout)

    def close(self) -> None:
        self.sock.close()

    def __del__(self) -> None:
        # Nothing holds the connection any more: its call ended by an exception raised between
        # two of its steps (see `Pool`), or a stream was dropped unread. Close it as the call
        # would have (no ResourceWarning: it is not the user's socket to close).
        sock = getattr(self, "sock", None)  # (None: the interrupt came before it was set)
        if sock is not None:
            sock.close()


def _read_body(
    conn: _SyncConnection, parser: ResponseParser, read_timeout: float, deadline_at: float | None
) -> bytes:
    """One read's worth of body (possibly none); `parser.complete` tells when the body has
    ended, also when it ends with the connection; a close before that end raises."""
    if deadline_at is not None:
        conn.pace(read_timeout, deadline_at, "reading the response")
    data = conn.sock.recv(READ_SIZE)
    if data:
        return parser.feed(data)
    if not parser.feed_eof():
        raise errors.APIConnectionError(
            "the server closed the connection before the response was complete"
        )
    return b""


class _SyncBody:
    """A streamed response's body: iterate for its checked chunks; `close` releases the
    connection (back to the pool once the body has ended, else closed)."""

    __slots__ = ("_conn", "_first", "_limiter", "_parser", "_pool", "_read_timeout")

    def __init__(
        self,
        pool: Pool[_SyncConnection],
        conn: _SyncConnection,
        parser: ResponseParser,
        limiter: Limiter,
        first: bytes,
        read_timeout: float,
    ) -> None:
        self._pool = pool
        self._conn: _SyncConnection | None = conn
        self._parser = parser
        self._limiter = limiter
        self._first = first
        self._read_timeout = read_timeout

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        conn = self._conn
        if conn is None:
            raise StopIteration
        try:
            if self._first:
                piece, self._first = self._limiter.take(self._first), b""
                if piece:
                    return piece
            parser = self._parser
            deadline_at = self._limiter.deadline_at
            while not parser.complete:
                piece = _read_body(conn, parser, self._read_timeout, deadline_at)
                if piece:
                    piece = self._limiter.take(piece)
                    if piece:
                        return piece
            tail = self._limiter.finish()
        except BaseException as exc:
            self.close()
            if isinstance(exc, (OSError, BadResponse)):
                raise io_error(exc, "reading the response") from exc
            raise
        self._conn = None
        self._pool.release(conn, parser.keep_alive)
        if tail:
            return tail
        raise StopIteration

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self._pool.discard(conn)


class SyncTransport:
    """Blocking I/O for `Client`."""

    def __init__(
        self,
        http_client: httpx.Client | None = None,
        proxy: str | None = None,
        uds: str | None = None,
    ) -> None:
        check_uds(http_client, uds)
        self._client = http_client
        self._uds = uds  # every connection to this Unix socket, whatever the URL's host
        self._via_httpx = http_client is not None or proxy is not None
        self._proxy = proxy
        self._pool: Pool[_SyncConnection] = Pool()
        self._targets = Targets()
        self._ssl: ssl.SSLContext | None = None
        # via a proxy, or under respx: an httpx client, which both of respx's mockers intercept
        self._httpx: httpx.Client | None = None
        if proxy is not None:
            self._httpx = own_client(proxied(httpx.HTTPTransport, proxy, limits=DEFAULT_LIMITS))
        per_process(self)

    def after_fork(self) -> None:
        """In a forked child: the parent's sockets are closed here (which leaves them open in
        the parent: no shutdown), and httpx's pool (a proxy's, respx's) is replaced, unclosed.
        A user's own ``http_client`` is theirs to replace."""
        for conn in self._pool.forget():
            conn.close()
        if self._httpx is not None:
            self._httpx = None
            if self._proxy is not None:
                self._httpx = own_client(
                    proxied(httpx.HTTPTransport, self._proxy, limits=DEFAULT_LIMITS)
                )

    def send(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
    ) -> RawResponse:
        if self._via_httpx or _RESPX.active():
            return self._httpx_send(request, timeouts, max_bytes, deadline_at)
        conn, parser, first = self._exchange(request, timeouts, deadline_at)
        headers = parser.headers
        assert headers is not None
        if parser.complete and len(first) <= max_bytes and "content-encoding" not in headers:
            # The whole response came with its head (a small one, the common case): within the
            # limit, nothing to decode, the deadline met. (The parser is read before the
            # connection goes back: another thread may take it, and reset its parser.)
            status = parser.status
            self._pool.release(conn, parser.keep_alive)
            return raw_response((status, headers, first))
        limiter = Limiter(max_bytes, deadline_at)
        try:
            limiter.head(headers, parser.length)
            parts = [limiter.take(first)] if first else []
            while not parser.complete:
                piece = _read_body(conn, parser, timeouts.read, deadline_at)
                if piece:
                    parts.append(limiter.take(piece))
            if limiter.decoder is not None:
                parts.append(limiter.finish())
        except BaseException as exc:
            self._pool.discard(conn)
            if isinstance(exc, (OSError, BadResponse)):
                raise io_error(exc, "reading the response") from exc
            raise
        status = parser.status
        self._pool.release(conn, parser.keep_alive)
        body = parts[0] if len(parts) == 1 else b"".join(parts)
        return raw_response((status, headers, body))

    def stream(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
    ) -> StreamResponse:
        """Open a response once its head has arrived; the caller reads its chunks and closes
        it."""
        if self._via_httpx or _RESPX.active():
            return self._httpx_stream(request, timeouts, max_bytes, deadline_at)
        conn, parser, first = self._exchange(request, timeouts, deadline_at)
        assert parser.headers is not None
        limiter = Limiter(max_bytes, deadline_at)
        try:
            limiter.head(parser.headers, parser.length)
        except BaseException as exc:
            self._pool.discard(conn)
            if isinstance(exc, BadResponse):
                raise io_error(exc, "reading the response") from exc
            raise
        body = _SyncBody(self._pool, conn, parser, limiter, first, timeouts.read)
        return StreamResponse(parser.status, parser.headers, body, body.close)

    def close(self) -> None:
        self._pool.close()
        if self._httpx is not None:
            self._httpx.close()

    def closed(self) -> SyncTransport:
        """What a closed client sends through instead of this transport, once it is closed."""
        return _ClosedSyncTransport()

    def check_open(self) -> None:
        """Nothing: an open transport (`closed`'s raises `ClientClosedError`), for the client's
        methods that may answer without a request."""

    def mocked(self) -> bool:
        """Whether a request sent now would go to a respx mock (its answers are then a test's,
        not a server's: `ClientCore.adopt_probes`)."""
        return _RESPX.active()

    # -- own HTTP/1.1 --------------------------------------------------------------------

    def _exchange(
        self, request: PreparedRequest, timeouts: Timeouts, deadline_at: float | None
    ) -> tuple[_SyncConnection, ResponseParser, bytes]:
        """Send the request; return its connection and parser once the head has arrived, with the
        body bytes that came with it. A pooled connection found closed is replaced once. (One
        function for the whole exchange: each call costs every request.)"""
        target = self._targets.find(request)
        payload = encode_request(target.head, request.body)
        conn = self._pool.checkout(target.origin)
        pooled = conn is not None
        while True:
            if conn is None:
                conn = self._connect(target, timeouts.connect)
            parser = conn.parser  # its last response was read to its end: `start` begins anew
            received = False  # any byte of the response
            sock = conn.sock
            doing = "sending the request"
            try:
                if timeouts.write != conn.timeout:  # (the call's deadline capped it)
                    conn.set_timeout(timeouts.write)
                try:
                    sock.sendall(payload)
                except OSError as exc:
                    if isinstance(exc, TimeoutError):
                        raise
                    # A server may answer early (413, 401) and close before reading the whole
                    # body, which breaks the send: its answer is what the caller needs, so read
                    # it (httpcore does the same); with no answer, the send's error stands.
                    doing = f"sending the request ({type(exc).__name__}: {exc})"
                    sent = False
                else:
                    doing = "waiting for the response"
                    sent = True
                if deadline_at is None and timeouts.read != conn.timeout:
                    conn.set_timeout(timeouts.read)  # (with a deadline: `pace`, each read)
                while True:
                    if deadline_at is not None:
                        conn.pace(timeouts.read, deadline_at, doing)
                    data = sock.recv(READ_SIZE)
                    if not data:
                        if received:
                            raise errors.APIConnectionError(
                                "the server closed the connection in the response head"
                            )
                        raise StaleConnection("the server closed the connection without answering")
                    if received:
                        first = parser.feed(data)
                    else:
                        received = True
                        first = parser.start(data)
                    if parser.headers is not None:
                        break
                if not sent:
                    parser.keep_alive = False  # the server stopped reading the request mid-body
                return conn, parser, first
            except BaseException as exc:
                self._pool.discard(conn)
                if isinstance(exc, OSError) and not isinstance(exc, TimeoutError) and not received:
                    if not pooled:
                        raise StaleConnection(f"{type(exc).__name__} {doing}: {exc}") from exc
                elif not (pooled and isinstance(exc, StaleConnection)):
                    if isinstance(exc, (OSError, BadResponse)):
                        raise io_error(exc, doing) from exc
                    raise
            conn = None  # the pooled connection was closed: once more on a fresh one
            pooled = False

    def _connect(self, target: Target, timeout: float) -> _SyncConnection:
        uds = self._uds
        try:
            if uds is None:
                sock = socket.create_connection((target.host, target.port), or_none(timeout))
            else:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                if uds is None:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                else:  # (TCP options fail on a Unix socket; a Unix socket has no TLS here)
                    sock.settimeout(or_none(timeout))
                    sock.connect(uds)
                if target.tls:
                    if self._ssl is None:
                        self._ssl = ssl_context()
                    sock = self._ssl.wrap_socket(sock, server_hostname=target.host)
                conn = _SyncConnection(sock, target.origin, timeout)
            except BaseException:
                sock.close()
                raise
        except OSError as exc:
            where = f"{target.host}:{target.port}" if uds is None else f"the Unix socket {uds}"
            raise io_error(exc, f"connecting to {where}") from exc
        self._pool.add(conn)
        return conn

    # -- through httpx: a user's client, or a respx mock ---------------------------------

    def _httpx_open(self, request: PreparedRequest, timeouts: Timeouts) -> httpx.Response:
        if self._client is not None:
            req = httpx_request(self._client, request, timeouts)
            return self._client.send(req, stream=True, follow_redirects=False)
        if self._httpx is None:
            self._httpx = own_client(httpx.HTTPTransport(limits=DEFAULT_LIMITS, uds=self._uds))
        req = httpx_request(None, request, timeouts)
        return self._httpx.send(req, stream=True, follow_redirects=False)

    def _httpx_send(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
    ) -> RawResponse:
        try:
            response = self._httpx_open(request, timeouts)
            try:
                limiter = Limiter(max_bytes, deadline_at)
                limiter.head(response.headers, declared_length(response.headers))
                chunks = [limiter.take(chunk) for chunk in raw_chunks(response)]
                chunks.append(limiter.finish())
            finally:
                response.close()
        except httpx.HTTPError as exc:
            raise httpx_error(exc) from exc
        except BadResponse as exc:
            raise io_error(exc, "reading the response") from exc
        return RawResponse(response.status_code, header_dict(response), b"".join(chunks))

    def _httpx_stream(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
    ) -> StreamResponse:
        try:
            response = self._httpx_open(request, timeouts)
        except httpx.HTTPError as exc:
            raise httpx_error(exc) from exc

        def chunks() -> Iterator[bytes]:
            limiter = Limiter(max_bytes, deadline_at)
            try:
                limiter.head(response.headers, declared_length(response.headers))
                for chunk in raw_chunks(response):
                    yield limiter.take(chunk)
                tail = limiter.finish()
                if tail:
                    yield tail
            except httpx.HTTPError as exc:
                raise httpx_error(exc) from exc
            except BadResponse as exc:
                raise io_error(exc, "reading the response") from exc

        return StreamResponse(response.status_code, header_dict(response), chunks(), response.close)


class _ClosedSyncTransport(SyncTransport):
    """What a closed `Client` sends through: every request refused, no connection opened (the
    transport it replaces was closed; this one holds nothing to close)."""

    def check_open(self) -> None:
        raise closed_error()

    def send(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
    ) -> RawResponse:
        raise closed_error()

    def stream(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
    ) -> StreamResponse:
        raise closed_error()
