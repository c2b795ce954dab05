"""`SyncTransport`: blocking sockets for `Client`; the design is in `lmclient._transports`."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING

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
    io_error,
    may_resend,
    or_none,
    own_client,
    per_process,
    raw_chunks,
    raw_response,
    ssl_context,
)
from lmclient._transports.sockets import SyncBody, SyncConnection, read_body
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
        conn, first = self._exchange(request, timeouts, deadline_at)
        parser = conn.parser
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
                piece = read_body(conn, parser, timeouts.read, deadline_at)
                if piece:
                    parts.append(limiter.take(piece))
            if limiter.decoder is not None:
                parts.append(limiter.finish())
        except BaseException:  # (lmclient's errors: the phase and the limiter map theirs)
            self._pool.discard(conn)
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
        conn, first = self._exchange(request, timeouts, deadline_at)
        parser = conn.parser
        assert parser.headers is not None
        limiter = Limiter(max_bytes, deadline_at)
        try:
            limiter.head(parser.headers, parser.length)
        except BaseException:
            self._pool.discard(conn)
            raise
        body = SyncBody(self._pool, conn, parser, limiter, first, timeouts.read)
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
    ) -> tuple[SyncConnection, bytes]:
        """Send the request and read the head (`SyncConnection`'s phases); return the
        connection (its parser holds the head) with the body bytes that came with the head. A
        connection that fails is closed; a pooled one lost before any answer is replaced once
        (`may_resend`)."""
        target = self._targets.find(request)
        payload = encode_request(target.head, request.body)
        conn = self._pool.checkout(target.origin)
        pooled = conn is not None
        while True:
            if conn is None:
                conn = self._connect(target, timeouts.connect)
            try:
                broken = conn.send_request(payload, timeouts.write)
                return conn, conn.receive_head(timeouts.read, deadline_at, broken)
            except BaseException as exc:
                self._pool.discard(conn)
                if not may_resend(exc, pooled):
                    raise
            conn = None
            pooled = False

    def _connect(self, target: Target, timeout: float) -> SyncConnection:
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
                conn = SyncConnection(sock, target.origin, timeout)
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
