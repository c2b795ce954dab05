"""`SyncTransport`: blocking sockets for `Client`; the design is in `lmclient._transports`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal, overload

import httpx

from lmclient._proxies import proxied
from lmclient._request import PreparedRequest, Timeouts
from lmclient._transports.common import (
    DEFAULT_LIMITS,
    Limiter,
    Pool,
    RawResponse,
    RespxMocks,
    StreamResponse,
    Target,
    Targets,
    check_uds,
    closed_error,
    header_dict,
    httpx_error,
    httpx_request,
    may_resend,
    own_client,
    per_process,
    raw_chunks,
    raw_response,
    ssl_context,
)
from lmclient._transports.sockets import SyncBody, SyncConnection, connect, read_rest
from lmclient._wire.http11 import declared_length, encode_request

if TYPE_CHECKING:
    import ssl

__all__ = ["SyncTransport"]

_RESPX = RespxMocks(False)  # respx's two mockers


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
        self._pool: Pool[SyncConnection] = Pool()
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
        return self._exchange(request, timeouts, max_bytes, deadline_at, False)

    def stream(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
    ) -> StreamResponse:
        if self._via_httpx or _RESPX.active():
            return self._httpx_stream(request, timeouts, max_bytes, deadline_at)
        return self._exchange(request, timeouts, max_bytes, deadline_at, True)

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

    @overload
    def _exchange(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
        stream: Literal[False],
    ) -> RawResponse: ...
    @overload
    def _exchange(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
        stream: Literal[True],
    ) -> StreamResponse: ...
    def _exchange(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
        stream: bool,
    ) -> RawResponse | StreamResponse:
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
                conn = self._connect(target, timeouts.connect)
            try:
                broken = conn.send_request(payload, timeouts.write)
                first = conn.receive_head(timeouts.read, deadline_at, broken)
                break
            except BaseException as exc:
                self._pool.discard(conn)
                if not may_resend(exc, pooled):
                    raise
            conn = None
            pooled = False
        parser = conn.parser
        headers = parser.headers
        assert headers is not None
        if stream:
            chunks = SyncBody(self._pool, conn, first, max_bytes, timeouts.read, deadline_at)
            return StreamResponse(parser.status, headers, chunks, chunks.close)
        if not parser.complete or len(first) > max_bytes or "content-encoding" in headers:
            return read_rest(self._pool, conn, first, max_bytes, timeouts.read, deadline_at)
        # The whole response came with its head (a small one, the common case): within the
        # limit, nothing to decode, the deadline met.
        status = parser.status  # before the connection goes back (another thread may take it)
        self._pool.release(conn, parser.keep_alive)
        return raw_response((status, headers, first))

    def _connect(self, target: Target, timeout: float) -> SyncConnection:
        if target.tls and self._ssl is None:
            self._ssl = ssl_context()
        conn = connect(target, timeout, self._uds, self._ssl if target.tls else None)
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
