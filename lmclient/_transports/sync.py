"""`SyncTransport`: blocking sockets for `Client`; the design is in `lmclient._transports`."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING

import httpx

from lmclient import errors
from lmclient._core import PreparedRequest, Timeouts
from lmclient._http11 import BadResponse, ResponseParser, declared_length, encode_request
from lmclient._proxies import proxied
from lmclient._transports.common import (
    DEFAULT_LIMITS,
    READ_SIZE,
    Limiter,
    PatchWatch,
    Pool,
    RawResponse,
    StaleConnection,
    Target,
    Targets,
    httpx_error,
    httpx_request,
    io_error,
    or_none,
    readability,
    remaining,
    ssl_context,
)

if TYPE_CHECKING:
    import ssl

__all__ = ["SyncTransport"]

_SYNC_MOCK = PatchWatch("ConnectionPool", "handle_request")


class _SyncConnection:
    """A socket and what the pool needs to know about it."""

    __slots__ = ("idle_since", "origin", "readable", "sock", "timeout")

    def __init__(self, sock: socket.socket, origin: tuple[str, str, int], timeout: float) -> None:
        self.sock = sock
        self.origin = origin
        self.timeout = timeout
        self.idle_since = 0.0
        self.readable = readability(sock)

    def set_timeout(self, timeout: float) -> None:
        if timeout != self.timeout:
            self.sock.settimeout(or_none(timeout))
            self.timeout = timeout

    def pace(self, read_timeout: float, deadline_at: float | None, doing: str) -> None:
        """Before a read: wait no longer than the read timeout, nor past the deadline (so a
        server trickling bytes cannot keep a call alive after it)."""
        if deadline_at is not None:
            self.set_timeout(min(read_timeout, remaining(deadline_at, doing)))

    def usable(self) -> bool:
        """Nothing to read: an idle connection that has become readable was
        closed by the server, or carries bytes nobody asked for (a stray response, a ``408``
        written before closing), which would otherwise be read as the next request's answer
        (httpcore checks the same before reuse; the async connection closes itself on them)."""
        return not self.readable()

    def close(self) -> None:
        self.sock.close()


def _read_body(
    conn: _SyncConnection, parser: ResponseParser, read_timeout: float, deadline_at: float | None
) -> bytes:
    """One read's worth of body (possibly none); `parser.complete` tells when the body has
    ended, also when it ends with the connection; a close before that end raises."""
    conn.pace(read_timeout, deadline_at, "reading the response")
    data = conn.sock.recv(READ_SIZE)
    if data:
        return parser.feed(data)
    if not parser.feed_eof():
        raise errors.APIConnectionError(
            "the server closed the connection before the response was complete"
        )
    return b""


class _SyncBody(httpx.SyncByteStream):
    """A streamed response's body: iterate for its checked chunks; `close` releases the
    connection (back to the pool once the body has ended, else closed)."""

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

    def __init__(self, http_client: httpx.Client | None = None, proxy: str | None = None) -> None:
        self._client = http_client
        self._via_httpx = http_client is not None or proxy is not None
        self._pool: Pool[_SyncConnection] = Pool()
        self._targets = Targets()
        self._ssl: ssl.SSLContext | None = None
        self._httpx: httpx.HTTPTransport | None = None  # via a proxy, or under respx
        if proxy is not None:
            self._httpx = proxied(httpx.HTTPTransport, proxy, limits=DEFAULT_LIMITS)

    def send(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
    ) -> RawResponse:
        if self._via_httpx or _SYNC_MOCK.active():
            return self._httpx_send(request, timeouts, max_bytes, deadline_at)
        limiter = Limiter(max_bytes, deadline_at)
        conn, parser, first = self._exchange(request, timeouts, limiter)
        try:
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
        self._pool.release(conn, parser.keep_alive)
        assert parser.headers is not None
        body = parts[0] if len(parts) == 1 else b"".join(parts)
        return RawResponse(parser.status, parser.headers, body)

    def stream(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
    ) -> tuple[httpx.Response, Iterator[bytes]]:
        """Open a response and return it with an iterator of its checked body chunks; the caller
        closes the response."""
        if self._via_httpx or _SYNC_MOCK.active():
            return self._httpx_stream(request, timeouts, max_bytes, deadline_at)
        limiter = Limiter(max_bytes, deadline_at)
        conn, parser, first = self._exchange(request, timeouts, limiter)
        assert parser.headers is not None
        body = _SyncBody(self._pool, conn, parser, limiter, first, timeouts.read)
        return httpx.Response(parser.status, headers=parser.headers, stream=body), body

    def close(self) -> None:
        self._pool.close()
        if self._httpx is not None:
            self._httpx.close()

    # -- own HTTP/1.1 --------------------------------------------------------------------

    def _exchange(
        self, request: PreparedRequest, timeouts: Timeouts, limiter: Limiter
    ) -> tuple[_SyncConnection, ResponseParser, bytes]:
        """Send the request; return its connection and parser once the head has arrived, with the
        body bytes that came with it. A pooled connection found closed is replaced once."""
        target = self._targets.get(request)
        payload = encode_request(target.head, request.body)
        conn = self._pool.checkout(target.origin)
        if conn is not None:
            try:
                return conn, *self._roundtrip(conn, payload, timeouts, limiter)
            except StaleConnection:
                pass
        conn = self._connect(target, timeouts.connect)
        return conn, *self._roundtrip(conn, payload, timeouts, limiter)

    def _roundtrip(
        self, conn: _SyncConnection, payload: bytes, timeouts: Timeouts, limiter: Limiter
    ) -> tuple[ResponseParser, bytes]:
        parser = ResponseParser()
        doing = "sending the request"
        try:
            conn.set_timeout(timeouts.write)
            try:
                conn.sock.sendall(payload)
            except OSError as exc:
                if isinstance(exc, TimeoutError):
                    raise
                # A server may answer early (413, 401) and close before reading the whole
                # body, which breaks the send: its answer is what the caller needs, so read it
                # (httpcore does the same); with no answer, the send's error stands.
                doing = f"sending the request ({type(exc).__name__}: {exc})"
                sent = False
            else:
                doing = "waiting for the response"
                sent = True
            conn.set_timeout(timeouts.read)
            recv = conn.sock.recv
            first = b""
            while parser.headers is None:
                conn.pace(timeouts.read, limiter.deadline_at, doing)
                data = recv(READ_SIZE)
                if not data:
                    if parser.started:
                        raise errors.APIConnectionError(
                            "the server closed the connection in the response head"
                        )
                    raise StaleConnection("the server closed the connection without answering")
                first = parser.feed(data)
            if not sent:
                parser.keep_alive = False  # the server stopped reading the request mid-body
            limiter.head(parser.headers, parser.length)
        except BaseException as exc:
            self._pool.discard(conn)
            if (
                isinstance(exc, OSError)
                and not isinstance(exc, TimeoutError)
                and not parser.started
            ):
                raise StaleConnection(f"{type(exc).__name__} {doing}: {exc}") from exc
            if isinstance(exc, (OSError, BadResponse)):
                raise io_error(exc, doing) from exc
            raise
        return parser, first

    def _connect(self, target: Target, timeout: float) -> _SyncConnection:
        try:
            sock = socket.create_connection((target.host, target.port), or_none(timeout))
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if target.tls:
                    if self._ssl is None:
                        self._ssl = ssl_context()
                    sock = self._ssl.wrap_socket(sock, server_hostname=target.host)
            except BaseException:
                sock.close()
                raise
        except OSError as exc:
            raise io_error(exc, f"connecting to {target.host}:{target.port}") from exc
        conn = _SyncConnection(sock, target.origin, timeout)
        self._pool.add(conn)
        return conn

    # -- through httpx: a user's client, or a respx mock ---------------------------------

    def _httpx_open(self, request: PreparedRequest, timeouts: Timeouts) -> httpx.Response:
        if self._client is not None:
            req = httpx_request(self._client, request, timeouts)
            return self._client.send(req, stream=True, follow_redirects=False)
        if self._httpx is None:
            self._httpx = httpx.HTTPTransport(limits=DEFAULT_LIMITS)
        return self._httpx.handle_request(httpx_request(None, request, timeouts))

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
                chunks = [limiter.take(chunk) for chunk in response.iter_raw()]
                chunks.append(limiter.finish())
            finally:
                response.close()
        except httpx.HTTPError as exc:
            raise httpx_error(exc) from exc
        except BadResponse as exc:
            raise io_error(exc, "reading the response") from exc
        return RawResponse(response.status_code, response.headers, b"".join(chunks))

    def _httpx_stream(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
    ) -> tuple[httpx.Response, Iterator[bytes]]:
        try:
            response = self._httpx_open(request, timeouts)
        except httpx.HTTPError as exc:
            raise httpx_error(exc) from exc

        def chunks() -> Iterator[bytes]:
            limiter = Limiter(max_bytes, deadline_at)
            try:
                limiter.head(response.headers, declared_length(response.headers))
                for chunk in response.iter_raw():
                    yield limiter.take(chunk)
                tail = limiter.finish()
                if tail:
                    yield tail
            except httpx.HTTPError as exc:
                raise httpx_error(exc) from exc
            except BadResponse as exc:
                raise io_error(exc, "reading the response") from exc

        return response, chunks()
