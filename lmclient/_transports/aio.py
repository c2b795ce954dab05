"""`AsyncTransport`: `SyncTransport` for asyncio, over an `asyncio.Protocol`; the design is in
`lmclient._transports`."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable
from typing import Literal, overload

import httpx

from lmclient._proxies import proxied
from lmclient._request import PreparedRequest, Timeouts
from lmclient._transports.common import (
    DEFAULT_LIMITS,
    AsyncStreamResponse,
    Limiter,
    Pool,
    RawResponse,
    RespxMocks,
    Target,
    Targets,
    araw_chunks,
    check_uds,
    closed_error,
    header_dict,
    httpx_error,
    httpx_request,
    may_resend,
    own_client,
    per_process,
    raw_response,
    ssl_context,
)
from lmclient._transports.protocol import AsyncBody, AsyncConnection, connect
from lmclient._wire.http11 import declared_length, encode_request

__all__ = ["AsyncTransport"]

_RESPX = RespxMocks(True)  # respx's two mockers


class AsyncTransport:
    """Non-blocking I/O for `AsyncClient`; mirrors `SyncTransport`."""

    def __init__(
        self,
        http_client: httpx.AsyncClient | None = None,
        proxy: str | None = None,
        uds: str | None = None,
    ) -> None:
        check_uds(http_client, uds)
        self._client = http_client
        self._uds = uds  # every connection to this Unix socket, whatever the URL's host
        self._via_httpx = http_client is not None or proxy is not None
        self._proxy = proxy
        self._pool: Pool[AsyncConnection] = Pool()
        self._targets = Targets()
        self._ssl: ssl.SSLContext | None = None
        # via a proxy, or under respx: an httpx client, which both of respx's mockers intercept
        self._httpx: httpx.AsyncClient | None = None
        if proxy is not None:
            self._httpx = own_client(
                proxied(httpx.AsyncHTTPTransport, proxy, limits=DEFAULT_LIMITS)
            )
        per_process(self)

    def after_fork(self) -> None:
        """In a forked child: forget the parent's connections, closing none. They belong to
        the parent's event loop, whose epoll instance the two processes share: closing one
        here would unregister its socket from the parent's loop too (a parent call waiting on
        it would then wait for ever). The child never runs that loop; the sockets close with
        the child. httpx's pool (a proxy's, respx's) is replaced the same way, unclosed."""
        self._pool.forget()
        if self._httpx is not None:
            self._httpx = None
            if self._proxy is not None:
                self._httpx = own_client(
                    proxied(httpx.AsyncHTTPTransport, self._proxy, limits=DEFAULT_LIMITS)
                )

    def send(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
    ) -> Awaitable[RawResponse]:
        """The response, to be awaited. (Not a coroutine itself: the caller awaits the
        exchange's own, one coroutine per call rather than two.)"""
        if self._via_httpx or _RESPX.active():
            return self._httpx_send(request, timeouts, max_bytes, deadline_at)
        return self._exchange(request, timeouts, max_bytes, deadline_at, False)

    async def stream(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
    ) -> AsyncStreamResponse:
        if self._via_httpx or _RESPX.active():
            return await self._httpx_stream(request, timeouts, max_bytes, deadline_at)
        return await self._exchange(request, timeouts, max_bytes, deadline_at, True)

    async def aclose(self) -> None:
        """Close every connection; when this returns, their sockets are closed too: asyncio
        closes an aborted transport's socket one loop iteration later, so one iteration is
        always let run — also for the connections a stream or a call closed before (a
        ``break``, a deadline), which the pool no longer holds. A caller that blocks the loop
        afterwards must not leave a server generating for a client that left."""
        self._pool.close()
        if self._httpx is not None:
            await self._httpx.aclose()
        await asyncio.sleep(0)

    def closed(self) -> AsyncTransport:
        """What a closed client sends through instead of this transport, once it is closed."""
        return _ClosedAsyncTransport()

    def check_open(self) -> None:
        """Nothing: an open transport (`closed`'s raises `ClientClosedError`), for the client's
        methods that may answer without a request."""

    def mocked(self) -> bool:
        """Whether a request sent now would go to a respx mock (its answers are then a test's,
        not a server's: `ClientCore.adopt_probes`)."""
        return _RESPX.active()

    # -- own HTTP/1.1 --------------------------------------------------------------------

    @overload
    async def _exchange(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
        stream: Literal[False],
    ) -> RawResponse: ...
    @overload
    async def _exchange(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
        stream: Literal[True],
    ) -> AsyncStreamResponse: ...
    async def _exchange(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
        stream: bool,
    ) -> RawResponse | AsyncStreamResponse:
        """Send the request, then receive the head (a stream) or the whole response
        (otherwise), each phase the connection's; return the response. A connection that fails
        is closed; a pooled one lost before any answer is replaced once (`may_resend`). (One
        function for the exchange: each call, and in asyncio each layer of coroutines, costs
        every request.)"""
        target = self._targets.find(request)
        payload = encode_request(target.head, request.body)
        conn = self._pool.checkout(target.origin)
        pooled = conn is not None
        while True:
            if conn is None:
                conn = await self._connect(target, timeouts.connect)
            try:
                parser = conn.send_request(payload, max_bytes, deadline_at, timeouts.read, stream)
                if conn.drain is not None:
                    await conn.drained(timeouts.write)
                while not conn.arrived(stream):
                    waiter = conn.waiter = conn.loop.create_future()  # woken by data_received
                    await waiter
                break
            except BaseException as exc:
                self._pool.discard(conn)
                if not may_resend(exc, pooled):
                    raise
            conn = None
            pooled = False
        headers = parser.headers
        assert headers is not None
        if stream:
            chunks = AsyncBody(self._pool, conn)
            return AsyncStreamResponse(parser.status, headers, chunks, chunks.aclose)
        whole = conn.take_pieces()  # (an idle connection holds no body)
        conn.finish()
        status = parser.status  # before the connection goes back (and its parser is reset)
        self._pool.release(conn, parser.keep_alive)
        return raw_response((status, headers, whole))

    async def _connect(self, target: Target, timeout: float) -> AsyncConnection:
        if target.tls and self._ssl is None:
            self._ssl = ssl_context()
        conn = await connect(target, timeout, self._uds, self._ssl if target.tls else None)
        self._pool.add(conn)
        return conn

    # -- through httpx: a user's client, or a respx mock ---------------------------------

    async def _httpx_open(self, request: PreparedRequest, timeouts: Timeouts) -> httpx.Response:
        if self._client is not None:
            req = httpx_request(self._client, request, timeouts)
            return await self._client.send(req, stream=True, follow_redirects=False)
        if self._httpx is None:
            self._httpx = own_client(httpx.AsyncHTTPTransport(limits=DEFAULT_LIMITS, uds=self._uds))
        req = httpx_request(None, request, timeouts)
        return await self._httpx.send(req, stream=True, follow_redirects=False)

    async def _httpx_send(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
    ) -> RawResponse:
        try:
            response = await self._httpx_open(request, timeouts)
            try:
                limiter = Limiter(max_bytes, deadline_at)
                limiter.head(response.headers, declared_length(response.headers))
                chunks = [limiter.take(chunk) async for chunk in araw_chunks(response)]
                chunks.append(limiter.finish())
            finally:
                await response.aclose()
        except httpx.HTTPError as exc:
            raise httpx_error(exc) from exc
        return RawResponse(response.status_code, header_dict(response), b"".join(chunks))

    async def _httpx_stream(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
    ) -> AsyncStreamResponse:
        try:
            response = await self._httpx_open(request, timeouts)
        except httpx.HTTPError as exc:
            raise httpx_error(exc) from exc

        async def chunks() -> AsyncIterator[bytes]:
            limiter = Limiter(max_bytes, deadline_at)
            try:
                limiter.head(response.headers, declared_length(response.headers))
                async for chunk in araw_chunks(response):
                    yield limiter.take(chunk)
                tail = limiter.finish()
                if tail:
                    yield tail
            except httpx.HTTPError as exc:
                raise httpx_error(exc) from exc

        return AsyncStreamResponse(
            response.status_code, header_dict(response), chunks(), response.aclose
        )


class _ClosedAsyncTransport(AsyncTransport):
    """What a closed `AsyncClient` sends through: every request refused, no connection opened (the
    transport it replaces was closed; this one holds nothing to close)."""

    def check_open(self) -> None:
        raise closed_error()

    def send(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
    ) -> Awaitable[RawResponse]:
        raise closed_error()

    async def stream(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
    ) -> AsyncStreamResponse:
        raise closed_error()
