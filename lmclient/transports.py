"""lmclient's own transports: send one prepared request, return status, headers and body.

Why not httpx's: measured on a 2-core machine (benchmarks/), ``httpx.Client``'s layers (request
building, cookies, auth, redirects) are ~40 % of a thin client's CPU per call, httpx's transport
called directly still costs ~7x a raw socket, and ``httpx.AsyncClient``'s pool scans every
connection on every request, so async throughput falls as concurrency grows. An LLM client sends
the same request head to the same server again and again, so the transports here:

* speak HTTP/1.1 themselves (`lmclient._http11`, sans I/O): the request head depends only on the
  URL and the client's headers and is encoded once; a small response is parsed with a few
  ``bytes`` operations;
* keep idle connections in a LIFO list per origin: O(1) to check out and to return, the most
  recently used connection first (the one least likely to have been closed by the server);
  connections idle for `KEEPALIVE_EXPIRY` are dropped, a connection with anything to read while
  idle (the server closed it, or wrote bytes nobody asked for) is never reused, and a pooled
  connection that turns out closed before any byte of its response arrived is replaced by one
  fresh connection, once. A server may answer before it has read the whole request (a 413, a
  401) and close: a send broken that way still reads the answer, which is the call's result;
  Open connections are not capped (the caller bounds its concurrency, as `generate_many` does),
  idle ones are, at `MAX_IDLE_CONNECTIONS` per origin;
* sync: a blocking socket; async: an `asyncio.Protocol` that parses in ``data_received`` and
  wakes the waiting task once per response (or per chunk while streaming), with a read-timeout
  timer per connection that re-arms itself instead of one timer per read or per request. Every
  read is bounded: a whole response by ``max_bytes`` (counted after decoding), a stream by flow
  control (reading pauses while `STREAM_HIGH_WATER` bytes wait for the reader) and the read
  timeout, and the head by the parser;
* TLS with httpx's own context (`httpx.create_ssl_context`: certifi, verification on,
  ``SSL_CERT_FILE``/``SSL_CERT_DIR`` honoured); no proxies; no redirects.

Three cases go through httpx instead: a user's ``http_client`` (its public ``send()``, so
their proxies, mounts and HTTP/2 apply), a server the environment puts behind a proxy
(`lmclient._proxies`: an httpx transport with that proxy), and an active respx mock. respx's
default mocker patches httpcore's connection pools, which lmclient's sockets never reach; so
each request first checks, with one identity comparison, whether that entry point is still the
original, and while it is not, sends through an httpx transport, which respx then intercepts as
users expect. A compressed body is still inflated by `Limiter` there, piece by piece within
``max_bytes``, and not by httpx, which inflates a whole chunk at once.

Failures map to lmclient's errors: cannot connect, connection broken → `APIConnectionError`;
timeouts and an expired deadline → `APITimeoutError`; bytes that are not HTTP, or a body larger
than ``max_bytes`` (refused on its declared length before reading, else while counting) →
`ProtocolError`.
"""

from __future__ import annotations

import math
import select
import socket
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import httpx

from . import errors
from ._http11 import (
    BadResponse,
    ContentDecoder,
    ResponseParser,
    content_decoder,
    declared_length,
    encode_head,
    encode_request,
)
from ._proxies import proxied
from .core import PreparedRequest, Timeouts

if TYPE_CHECKING:
    import ssl

    from ._async_transport import AsyncTransport as AsyncTransport

__all__ = ["AsyncTransport", "RawResponse", "SyncTransport"]

MAX_IDLE_CONNECTIONS = 100  # per origin; more concurrent calls than this open (and close) more
KEEPALIVE_EXPIRY = 4.0  # below uvicorn's 5 s (vLLM, SGLang), so the server rarely closes first
READ_SIZE = 256 * 1024
STREAM_HIGH_WATER = 1024 * 1024  # an unread stream stops reading from the socket here
# For the httpx transports used under a respx mock and for a user's client.
DEFAULT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=100)


class RawResponse:
    """Status, headers (readable by lower-case name) and the whole body of one response."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body


# -- what every transport shares ----------------------------------------------------------------


class Limiter:
    """Refuses a body declared larger than ``max_bytes``; decodes a content coding; counts the
    bytes received against the limit and checks the deadline between chunks."""

    __slots__ = ("deadline_at", "decoder", "max_bytes", "received")

    def __init__(self, max_bytes: int, deadline_at: float | None) -> None:
        self.max_bytes = max_bytes
        self.deadline_at = deadline_at
        self.received = 0
        self.decoder: ContentDecoder | None = None

    def head(self, headers: Mapping[str, str], declared: int | None) -> None:
        """Check the head: ``declared`` is the body's Content-Length, if any."""
        if declared is not None and declared > self.max_bytes:
            raise errors.ProtocolError(
                f"response of {declared} bytes refused: larger than "
                f"max_response_bytes={self.max_bytes}"
            )
        if "content-encoding" in headers:
            self.decoder = content_decoder(headers)

    def take(self, piece: bytes) -> bytes:
        """Decode (if the body has a content coding) and count one piece of the body."""
        if self.decoder is not None:
            piece = self.decoder.decode(piece, self.max_bytes - self.received + 1)
        self._count(len(piece))
        return piece

    def finish(self) -> bytes:
        """The body ended: what a content decoder still holds."""
        if self.decoder is None:
            return b""
        rest = self.decoder.flush()
        self._count(len(rest))
        return rest

    def _count(self, n: int) -> None:
        self.received += n
        if self.received > self.max_bytes:
            raise errors.ProtocolError(
                f"response refused after {self.received} bytes: larger than "
                f"max_response_bytes={self.max_bytes}"
            )
        if self.deadline_at is not None and time.monotonic() > self.deadline_at:
            raise errors.APITimeoutError("the call's deadline expired while reading the response")


class StaleConnection(errors.APIConnectionError):
    """The connection was closed before any byte of the response arrived. On a pooled connection
    this is the server having closed it while idle: the request is sent again on a fresh one."""


def io_error(exc: BaseException, doing: str) -> errors.LMClientError:
    """lmclient's error for what failed while ``doing`` (e.g. "reading the response")."""
    if isinstance(exc, errors.LMClientError):
        return exc
    if isinstance(exc, BadResponse):
        return errors.ProtocolError(f"invalid HTTP response: {exc}")
    if isinstance(exc, TimeoutError):
        return errors.APITimeoutError(f"timed out {doing}")
    return errors.APIConnectionError(f"{type(exc).__name__} {doing}: {exc}")


def remaining(deadline_at: float, doing: str) -> float:
    """Seconds left before the call's deadline; `APITimeoutError` once it has passed."""
    left = deadline_at - time.monotonic()
    if left <= 0:
        raise errors.APITimeoutError(f"the call's deadline expired {doing}")
    return left


def or_none(timeout: float) -> float | None:
    """A timeout for socket and asyncio calls, where None means none."""
    return None if math.isinf(timeout) else timeout


class Target:
    """What a request's URL and header list fix: where to connect and the encoded head."""

    __slots__ = ("head", "headers", "host", "origin", "port", "tls")

    def __init__(self, request: PreparedRequest) -> None:
        url = httpx.URL(request.url)
        self.tls = url.scheme == "https"
        self.host = url.raw_host.decode("ascii")
        self.port = url.port or (443 if self.tls else 80)
        self.origin = (url.scheme, self.host, self.port)
        self.headers = request.headers  # kept, so that the cache's identity check stays valid
        self.head = encode_head(request.method, url.raw_path, url.netloc, request.headers)


class Targets:
    """Targets by method and URL, valid while the request carries the same header list (a
    client's headers are one list for all its calls)."""

    __slots__ = ("_cache",)

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], Target] = {}

    def get(self, request: PreparedRequest) -> Target:
        key = (request.method, request.url)
        target = self._cache.get(key)
        if target is None or target.headers is not request.headers:
            target = Target(request)
            if len(self._cache) >= 64:
                self._cache.clear()
            self._cache[key] = target
        return target


class _Connection(Protocol):
    origin: tuple[str, str, int]
    idle_since: float

    def usable(self, now: float) -> bool: ...
    def close(self) -> None: ...


C = TypeVar("C", bound=_Connection)


class Pool(Generic[C]):
    """Idle connections per origin, last in first out; and the checked-out ones.

    Every operation is O(1) (list append/pop, set add/discard, all atomic under the GIL, so the
    sync transport may be shared by threads without a lock)."""

    __slots__ = ("idle", "in_use")

    def __init__(self) -> None:
        self.idle: dict[tuple[str, str, int], list[C]] = {}
        self.in_use: set[C] = set()

    def checkout(self, origin: tuple[str, str, int]) -> C | None:
        idle = self.idle.get(origin)
        if not idle:
            return None
        now = time.monotonic()
        while True:
            try:
                conn = idle.pop()
            except IndexError:
                return None
            if conn.usable(now):
                self.in_use.add(conn)
                return conn
            conn.close()

    def add(self, conn: C) -> None:
        self.in_use.add(conn)

    def release(self, conn: C, reusable: bool) -> None:
        """Return a connection whose response was read to its end."""
        self.in_use.discard(conn)
        if reusable:
            idle = self.idle.get(conn.origin)
            if idle is None:
                idle = self.idle.setdefault(conn.origin, [])
            if len(idle) < MAX_IDLE_CONNECTIONS:
                now = conn.idle_since = time.monotonic()
                try:  # LIFO leaves the oldest at the bottom (another thread may empty the list)
                    oldest: C | None = idle[0]
                except IndexError:
                    oldest = None
                if oldest is not None and now - oldest.idle_since > KEEPALIVE_EXPIRY:
                    self._drop(idle, oldest)  # close one expired connection per release
                idle.append(conn)
                return
        conn.close()

    @staticmethod
    def _drop(idle: list[C], conn: C) -> None:
        try:
            idle.remove(conn)
        except ValueError:
            return  # another thread checked it out meanwhile (and will find it expired)
        conn.close()

    def discard(self, conn: C) -> None:
        """Close a connection whose state is unknown (error, cancellation, unread body)."""
        self.in_use.discard(conn)
        conn.close()

    def connections(self) -> list[C]:
        return [c for idle in self.idle.values() for c in idle] + list(self.in_use)

    def close(self) -> None:
        for conn in self.connections():
            conn.close()
        self.idle.clear()
        self.in_use.clear()


class PatchWatch:
    """Whether a method of an httpcore class has been replaced (respx's default mocker does it
    for the connection pools while a mock is active).

    The original is learnt the first time httpcore is seen unpatched, so lmclient need not import
    httpcore (no httpcore imported, no respx mock); after that a check is one identity test."""

    __slots__ = ("_attr", "_class", "_class_name", "_original")

    def __init__(self, class_name: str, attr: str) -> None:
        self._class_name = class_name
        self._attr = attr
        self._class: Any = None
        self._original: Any = None

    def active(self) -> bool:
        cls = self._class
        if cls is None:
            module = sys.modules.get("httpcore")
            if module is None:
                return False
            cls = self._class = getattr(module, self._class_name)
        current = getattr(cls, self._attr)
        if current is self._original:
            return False
        if self._original is None and getattr(current, "__module__", "").startswith("httpcore."):
            self._original = current
            return False
        return True


_SYNC_MOCK = PatchWatch("ConnectionPool", "handle_request")


def ssl_context() -> ssl.SSLContext:
    """httpx's TLS settings: certifi's roots (or SSL_CERT_FILE/SSL_CERT_DIR), verification on."""
    return httpx.create_ssl_context()


# The codings `Limiter` decodes, piece by piece within max_bytes: httpx's own decoding inflates a
# whole chunk at once (a compressed bomb grows far past the limit before it is counted), and a
# user's client would otherwise also ask for brotli or zstd.
_DECODABLE = ("accept-encoding", "gzip, deflate")


def httpx_request(
    client: httpx.Client | httpx.AsyncClient | None, request: PreparedRequest, timeouts: Timeouts
) -> httpx.Request:
    """The prepared request for httpx: built by the user's client if there is one."""
    extensions = {"timeout": timeouts.as_httpx()}
    if client is None:
        return httpx.Request(
            request.method,
            request.url,
            headers=request.headers,
            content=request.body,
            extensions=extensions,
        )
    return client.build_request(  # the user's client: its headers, proxies, mounts apply
        request.method,
        request.url,
        headers=[*request.headers, _DECODABLE],
        content=request.body,
        extensions=extensions,
    )


def httpx_error(exc: httpx.HTTPError) -> errors.APIConnectionError:
    """lmclient's error for an httpx failure (under a respx mock or with a user's client)."""
    if isinstance(exc, httpx.TimeoutException):
        return errors.APITimeoutError(f"timed out: {type(exc).__name__}")
    return errors.APIConnectionError(f"{type(exc).__name__}: {exc}")


# -- sync -------------------------------------------------------------------------------------


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

    def usable(self, now: float) -> bool:
        """Not expired, and nothing to read: an idle connection that has become readable was
        closed by the server, or carries bytes nobody asked for (a stray response, a ``408``
        written before closing), which would otherwise be read as the next request's answer
        (httpcore checks the same before reuse; the async connection closes itself on them)."""
        return now - self.idle_since < KEEPALIVE_EXPIRY and not self.readable()

    def close(self) -> None:
        self.sock.close()


def readability(sock: socket.socket | Any) -> Callable[[], bool]:
    """A check, without waiting, of whether ``sock`` (a socket, or asyncio's wrapper of one) has
    anything to read (bytes or EOF); for an SSL socket, also bytes it has already decrypted."""
    pending = getattr(sock, "pending", None)
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        poll = poller.poll
        if pending is None:
            return lambda: bool(poll(0))
        return lambda: bool(pending() or poll(0))
    fileno = sock.fileno()

    def selected() -> bool:  # no poll() on Windows
        return bool((pending is not None and pending()) or select.select([fileno], [], [], 0)[0])

    return selected


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


def __getattr__(name: str) -> Any:
    """`AsyncTransport` is loaded on first use: its module imports asyncio, which a program
    using only `Client` does not need to pay for."""
    if name == "AsyncTransport":
        from ._async_transport import AsyncTransport

        return AsyncTransport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
