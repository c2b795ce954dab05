"""What both transports share: the pool, the limits, the targets, the error mapping, and the
httpx requests of the paths that go through httpx. The design is in `lmclient._transports`."""

from __future__ import annotations

import functools
import math
import os
import select
import socket
import sys
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, NoReturn, Protocol, TypeVar, overload

import httpx

from lmclient import errors
from lmclient._request import PreparedRequest, Timeouts
from lmclient._wire.http11 import (
    BadResponse,
    ContentDecoder,
    content_decoder,
    encode_head,
)

if TYPE_CHECKING:
    import ssl

__all__ = [
    "DEFAULT_LIMITS",
    "READ_SIZE",
    "STREAM_HIGH_WATER",
    "AsyncStreamResponse",
    "Limiter",
    "Pool",
    "RawResponse",
    "RespxMocks",
    "StaleConnection",
    "StreamResponse",
    "Target",
    "Targets",
    "araw_chunks",
    "check_uds",
    "closed_error",
    "header_dict",
    "httpx_error",
    "httpx_request",
    "io_error",
    "may_resend",
    "or_none",
    "own_client",
    "per_process",
    "raw_chunks",
    "raw_response",
    "readability",
    "remaining",
    "ssl_context",
]

MAX_IDLE_CONNECTIONS = 100  # per origin; more concurrent calls than this open (and close) more
KEEPALIVE_EXPIRY = 4.0  # below uvicorn's 5 s (vLLM, SGLang), so the server rarely closes first
READ_SIZE = 256 * 1024
STREAM_HIGH_WATER = 1024 * 1024  # an unread stream stops reading from the socket here
# For the httpx transports used under a respx mock and for a user's client.
DEFAULT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=100)


class RawResponse(NamedTuple):
    """Status, headers (readable by lower-case name) and the whole body of one response."""

    status: int
    headers: Mapping[str, str]
    body: bytes


# Builds a RawResponse from the tuple a transport has made itself: its three fields need none of
# the NamedTuple's Python-level __new__ (defaults, keywords), and one is built for every call.
raw_response: Callable[[tuple[int, Mapping[str, str], bytes]], RawResponse] = functools.partial(
    tuple.__new__, RawResponse
)


class StreamResponse:
    """A streamed response as the shells see it, whichever transport opened it (lmclient's own,
    or httpx's for a user's client, a proxy or a respx mock): its status and headers, an
    iterator of its checked body chunks, and `close`, which releases the connection (back to
    the pool once the body has ended, else closed) and may be called more than once."""

    __slots__ = ("chunks", "close", "headers", "status")

    def __init__(
        self,
        status: int,
        headers: Mapping[str, str],
        chunks: Iterator[bytes],
        close: Callable[[], None],
    ) -> None:
        self.status = status
        self.headers = headers
        self.chunks = chunks
        self.close = close


class AsyncStreamResponse:
    """`StreamResponse` for asyncio: ``chunks`` is iterated with ``async for``, ``aclose``
    awaited."""

    __slots__ = ("aclose", "chunks", "headers", "status")

    def __init__(
        self,
        status: int,
        headers: Mapping[str, str],
        chunks: AsyncIterator[bytes],
        aclose: Callable[[], Awaitable[None]],
    ) -> None:
        self.status = status
        self.headers = headers
        self.chunks = chunks
        self.aclose = aclose


# -- what every transport shares ----------------------------------------------------------------


class Limiter:
    """Refuses a body declared larger than ``max_bytes``; decodes a content coding; counts the
    bytes received against the limit and checks the deadline between chunks. It raises only
    lmclient's errors (an undecodable body is a `ProtocolError`, mapped by `io_error`), so the
    transports need not map what it raises."""

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
            try:
                self.decoder = content_decoder(headers)
            except BadResponse as exc:
                raise io_error(exc, "reading the response") from exc

    def take(self, piece: bytes) -> bytes:
        """Decode (if the body has a content coding) and count one piece of the body."""
        if self.decoder is not None:
            try:
                decoded = self.decoder.decode(piece, self.max_bytes - self.received + 1)
            except BadResponse as exc:
                raise io_error(exc, "reading the response") from exc
            if decoded is None:  # it would pass the limit: dropped uncounted (`ContentDecoder`)
                self.received = self.max_bytes + 1
                self._refuse()
            piece = decoded
        self.received += len(piece)
        if self.received > self.max_bytes or (
            self.deadline_at is not None and time.monotonic() > self.deadline_at
        ):
            self._refuse()
        return piece

    def finish(self) -> bytes:
        """The body ended: what a content decoder still holds (counted, not decoded again)."""
        decoder, self.decoder = self.decoder, None
        if decoder is None:
            return b""
        try:
            tail = decoder.flush()
        except BadResponse as exc:
            raise io_error(exc, "reading the response") from exc
        return self.take(tail)

    def _refuse(self) -> NoReturn:
        if self.received > self.max_bytes:
            raise errors.ProtocolError(
                f"response refused after {self.received} bytes: larger than "
                f"max_response_bytes={self.max_bytes}"
            )
        raise errors.APITimeoutError("the call's deadline expired while reading the response")


class StaleConnection(errors.APIConnectionError):
    """The connection was closed before any byte of the response arrived. On a pooled connection
    this is the server having closed it while idle: the request is sent again on a fresh one."""


def io_error(exc: BaseException, doing: str, answered: bool = True) -> errors.LMClientError:
    """lmclient's error for what failed while ``doing`` (e.g. "reading the response"): the one
    map of the transports' errors (httpcore's ``map_exceptions``). It is applied where a
    socket's error or bytes that are not HTTP arise — each phase of an exchange (`sockets`'s
    send, head and body; `protocol`'s callbacks), a connect, the `Limiter` — so that above the
    phases only lmclient's errors travel, with what may land anywhere (a ``KeyboardInterrupt``,
    a ``GeneratorExit``, a signal handler's), and a failing call pays nothing for the mapping.

    A connection broken before any byte of its answer came (``answered`` false) is a
    `StaleConnection`: on a pooled connection the request is sent again (`may_resend`)."""
    if isinstance(exc, errors.LMClientError):
        return exc
    if isinstance(exc, BadResponse):
        return errors.ProtocolError(f"invalid HTTP response: {exc}")
    if isinstance(exc, TimeoutError):  # (socket.timeout is TimeoutError)
        return errors.APITimeoutError(f"timed out {doing}")
    if not answered:
        return StaleConnection(f"{type(exc).__name__} {doing}: {exc}")
    return errors.APIConnectionError(f"{type(exc).__name__} {doing}: {exc}")


def may_resend(exc: BaseException, pooled: bool) -> bool:
    """Whether a request whose exchange ended by ``exc`` is sent once more, on a fresh
    connection: when its connection came from the pool and was lost before any byte of the
    answer (`StaleConnection`): the server closed it while it was idle, after the pool's check,
    so the request never reached a server that meant to answer it. On a fresh connection the
    loss stands, as does any other error: a timeout, a broken answer (the request may have run:
    sending it again could run it twice), the call's own end."""
    return pooled and isinstance(exc, StaleConnection)


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
    """What a request's method, URL and header list fix: where to connect, and the request's
    head (`encode_head`), encoded once; `encode_request` frames each body under it."""

    __slots__ = ("head", "headers", "host", "method", "origin", "port", "tls")

    def __init__(self, request: PreparedRequest) -> None:
        url = httpx.URL(request.url)
        self.method = request.method
        self.tls = url.scheme == "https"
        self.host = url.raw_host.decode("ascii")
        self.port = url.port or (443 if self.tls else 80)
        self.origin = (url.scheme, self.host, self.port)
        self.headers = request.headers  # kept alive, so that its id() in the key stays its own
        self.head = encode_head(request.method, url.raw_path, url.netloc, request.headers)


class Targets(dict[str, Target]):
    """Targets by URL, each the one last used for it; and by method, URL and header list (`find`).
    A client's calls share one header list (a call's own headers make another), so the URL's last
    target is almost always the request's: `find` looks there first."""

    __slots__ = ("_all",)

    def __init__(self) -> None:
        super().__init__()
        self._all: dict[tuple[str, str, int], Target] = {}

    def find(self, request: PreparedRequest) -> Target:
        """The request's target, made the first time it is asked for."""
        target = self.get(request.url)
        if (
            target is not None
            and target.headers is request.headers
            and target.method == request.method
        ):
            return target
        key = (request.method, request.url, id(request.headers))
        target = self._all.get(key)
        if target is None:
            if len(self._all) >= 64:  # bounded: a call's own headers may be new on every call
                self._all.clear()
                self.clear()
            # A target keeps its header list alive, so that the list's id() stays its own.
            target = self._all[key] = Target(request)
        self[request.url] = target
        return target


class _Connection(Protocol):
    origin: tuple[str, str, int]
    idle_since: float

    def stale(self) -> object:
        """Truthy when the idle connection must not carry another request."""

    def close(self) -> None: ...


C = TypeVar("C", bound=_Connection)


class _Forked(Protocol):
    def after_fork(self) -> None:
        """In a forked child: forget what belongs to the parent process."""


# Every transport of this process, told when it has forked (`forked_child`).
_TRANSPORTS: weakref.WeakSet[_Forked] = weakref.WeakSet()


def per_process(transport: _Forked) -> None:
    """Have ``transport`` forget its connections in a child forked from this process.

    A pooled socket survives ``fork()`` in both processes: two processes writing requests to one
    connection read each other's answers (a pre-fork server whose master made one call before
    forking: gunicorn ``--preload``, uWSGI, `multiprocessing` with fork). The reset runs in the
    child, before its first call, so the calls themselves pay nothing for it (a process check
    at every checkout would be a system call per call: glibc no longer caches the pid)."""
    _TRANSPORTS.add(transport)


def _forked_child() -> None:
    for transport in list(_TRANSPORTS):
        transport.after_fork()


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_forked_child)


class Pool(Generic[C]):
    """Idle connections per origin, last in first out; and every open one (``opened``), so
    that closing the pool closes the checked-out ones too.

    Every operation is O(1) (list append/pop, set add/discard, all atomic under the GIL, so the
    sync transport may be shared by threads without a lock). A connection joins ``opened`` when
    it is made (`add`) and leaves it when the pool closes it: checking one out and releasing it,
    which every call does, touch only its idle list.

    The pool holds its idle connections; a checked-out one is held by its call alone
    (``opened`` is weak). A call that ends by an exception closes its connection where it
    waits (connecting, sending, receiving: where a signal's handler, a ``KeyboardInterrupt`` or
    a closed generator's ``GeneratorExit`` lands in practice); one raised between two of its
    other steps (after the checkout, before the release) may land where no handler is, and the
    connection is then closed when the call's frames let go of it (`SyncTransport`'s
    connections close their socket when collected; an asyncio connection is held by its loop
    until closed, and a task is interrupted only where it awaits). Either way no connection
    stays checked out after its call."""

    __slots__ = ("idle", "opened")

    def __init__(self) -> None:
        self.idle: dict[tuple[str, str, int], list[C]] = {}
        self.opened: weakref.WeakSet[C] = weakref.WeakSet()

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
            if now - conn.idle_since < KEEPALIVE_EXPIRY and not conn.stale():
                return conn
            self.discard(conn)

    def add(self, conn: C) -> None:
        self.opened.add(conn)

    def release(self, conn: C, reusable: bool) -> None:
        """Return a connection whose response was read to its end."""
        if reusable:
            idle = self.idle.get(conn.origin)
            if idle is None:
                idle = self.idle.setdefault(conn.origin, [])
            if len(idle) < MAX_IDLE_CONNECTIONS:
                now = conn.idle_since = time.monotonic()
                oldest: C | None = None
                if idle:  # (usually empty for sequential calls: no IndexError raised then)
                    try:  # LIFO leaves the oldest at the bottom (another thread may empty it)
                        oldest = idle[0]
                    except IndexError:
                        pass
                if oldest is not None and now - oldest.idle_since > KEEPALIVE_EXPIRY:
                    self._drop(idle, oldest)  # close one expired connection per release
                idle.append(conn)
                return
        self.discard(conn)

    def _drop(self, idle: list[C], conn: C) -> None:
        try:
            idle.remove(conn)
        except ValueError:
            return  # another thread checked it out meanwhile (and will find it expired)
        self.discard(conn)

    def discard(self, conn: C) -> None:
        """Close a connection (one whose state is unknown: an error, a cancellation, an unread
        body; or one that must not be reused)."""
        self.opened.discard(conn)
        conn.close()

    @property
    def in_use(self) -> set[C]:
        """The open connections that are checked out."""
        return set(self.opened).difference([c for idle in self.idle.values() for c in idle])

    def connections(self) -> list[C]:
        return list(self.opened)

    def close(self) -> None:
        for conn in self.connections():
            conn.close()
        self.idle.clear()
        self.opened.clear()

    def forget(self) -> list[C]:
        """Empty the pool without closing anything (in a forked child: the connections are
        the parent's); returns what it held."""
        inherited = list(self.opened)
        self.idle = {}
        self.opened = weakref.WeakSet()
        return inherited


class PatchWatch:
    """Whether a method of a class of ``module`` has been replaced, as respx replaces the one
    its mocker intercepts while a mock is active: the transports then send through httpx.

    The original is learnt the first time the method is seen unreplaced (its ``__module__`` is
    ``module``'s), so a mock started before lmclient was imported is still seen, and lmclient
    need not import httpcore (no httpcore imported, no httpcore mock). `active` answers "not
    replaced" with one identity comparison, ``current() is original``: until the module is
    imported, ``current`` returns None (the module), as ``original`` is; after, the method."""

    __slots__ = ("_attr", "_class_name", "_module", "current", "original")

    def __init__(self, module: str, class_name: str, attr: str) -> None:
        self._module = module
        self._class_name = class_name
        self._attr = attr
        self.current: Callable[[], object] = functools.partial(sys.modules.get, module)
        self.original: object = None

    def active(self) -> bool:
        if self.current() is self.original:
            return False
        module = sys.modules.get(self._module)
        if module is None:
            return False
        self.current = functools.partial(getattr, getattr(module, self._class_name), self._attr)
        current = self.current()
        if current is self.original:
            return False
        if self.original is None and getattr(current, "__module__", "").startswith(
            f"{self._module}."
        ):
            self.original = current
            return False
        return True


def respx_watches(asynchronous: bool) -> tuple[PatchWatch, PatchWatch]:
    """What each of respx's two mockers replaces while a mock is active, for the sync or the
    async client: ``respx.mock()`` (``using="httpcore"``, the default) the connection pools'
    ``handle_request`` (public httpcore API); ``respx.mock(using="httpx")`` the clients'
    ``_transport_for_url``. respx offers no public way to ask whether a mock is active, and
    that method is httpx's private one, so it is named here only, tested by
    ``tests/client/test_respx_mockers.py`` (both mockers, sync and async, calls and streams)."""
    if asynchronous:
        return (
            PatchWatch("httpcore", "AsyncConnectionPool", "handle_async_request"),
            PatchWatch("httpx", "AsyncClient", "_transport_for_url"),
        )
    return (
        PatchWatch("httpcore", "ConnectionPool", "handle_request"),
        PatchWatch("httpx", "Client", "_transport_for_url"),
    )


class RespxMocks:
    """Whether either of respx's mockers is active for the sync or the async client
    (`respx_watches`): then a transport sends through httpx. A mock needs respx imported, so
    until it is (a service in production), one look-up in `sys.modules` answers for both."""

    __slots__ = ("_clients", "_pools")

    def __init__(self, asynchronous: bool) -> None:
        self._pools, self._clients = respx_watches(asynchronous)

    def active(self) -> bool:
        return "respx" in sys.modules and (self._pools.active() or self._clients.active())


@overload
def own_client(transport: httpx.HTTPTransport) -> httpx.Client: ...
@overload
def own_client(transport: httpx.AsyncHTTPTransport) -> httpx.AsyncClient: ...
def own_client(
    transport: httpx.HTTPTransport | httpx.AsyncHTTPTransport,
) -> httpx.Client | httpx.AsyncClient:
    """An httpx client around ``transport``, for the paths that go through httpx without a
    user's client: respx's ``using="httpx"`` mocker intercepts clients, not transports. It
    sends lmclient's requests as they are: no environment proxies, headers or cookies of its
    own (the requests are built without it), no redirects."""
    if isinstance(transport, httpx.AsyncHTTPTransport):
        return httpx.AsyncClient(transport=transport, trust_env=False, timeout=None)
    return httpx.Client(transport=transport, trust_env=False, timeout=None)


def closed_error() -> errors.ClientClosedError:
    """What a closed client's transport raises for any request, before any socket."""
    return errors.ClientClosedError(
        "the client is closed: make a new one (close() was called, or its with-block ended)"
    )


def raw_chunks(response: httpx.Response) -> Iterator[bytes]:
    """The body as received, for `Limiter`. A body a mock read already (respx's ``httpx``
    mocker hands over a read response) is its content, all at once."""
    if response.is_stream_consumed:
        return iter((response.content,))
    return response.iter_raw()


async def araw_chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """`raw_chunks` for an async response."""
    if response.is_stream_consumed:
        yield response.content
        return
    async for chunk in response.aiter_raw():
        yield chunk


def check_uds(http_client: object, uds: str | None) -> None:
    """A user's ``http_client`` decides where it connects: ``uds=`` beside it would be ignored."""
    if uds is not None and http_client is not None:
        raise errors.ConfigurationError(
            "uds= and http_client= were both given, and the http_client's transport decides "
            "where it connects: give the socket to it (httpx.HTTPTransport(uds=...)) instead"
        )


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


def header_dict(response: httpx.Response) -> dict[str, str]:
    """An httpx response's headers as lmclient's own transport gives them: a dict of lower-case
    names, a repeated header's values joined by ", " (httpx's ``items()``), which nothing else
    holds a reference to (`Response.headers` wraps it)."""
    return dict(response.headers.items())


def httpx_error(exc: httpx.HTTPError) -> errors.APIConnectionError:
    """lmclient's error for an httpx failure (under a respx mock or with a user's client)."""
    if isinstance(exc, httpx.TimeoutException):
        return errors.APITimeoutError(f"timed out: {type(exc).__name__}")
    return errors.APIConnectionError(f"{type(exc).__name__}: {exc}")


def readability(sock: socket.socket | Any) -> Callable[[], object]:
    """A check, without waiting, of whether ``sock`` (a socket, or asyncio's wrapper of one) has
    anything to read (bytes or EOF): truthy if so. For an SSL socket, also bytes it has already
    decrypted. An idle connection that has become readable was closed by the server, or carries
    bytes nobody asked for (a stray response, a ``408`` written before closing), which would
    otherwise be read as the next request's answer (httpcore checks the same before reuse)."""
    pending = getattr(sock, "pending", None)
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        if pending is None:
            return functools.partial(poller.poll, 0)  # one system call, no Python frame
        poll = poller.poll
        return lambda: pending() or poll(0)
    fileno = sock.fileno()

    def selected() -> bool:  # no poll() on Windows
        return bool((pending is not None and pending()) or select.select([fileno], [], [], 0)[0])

    return selected
