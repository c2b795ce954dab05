"""lmclient's own thin transports: send one prepared request, return status, headers and body.

They call httpx's transport directly (``HTTPTransport.handle_request``), skipping
``httpx.Client``'s request building, cookies, auth and redirect layers, which cost ~40 % of a
thin client's CPU per call; a user's respx mock still intercepts them, since respx patches the
httpcore pool underneath. With a user's ``http_client`` they go through its public ``send()``,
so the user's proxies, mounts and HTTP/2 apply. Both map httpx's exceptions into lmclient's and
enforce the response-size limit and the call's deadline between chunks.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator

import httpx

from . import errors
from .core import PreparedRequest, Timeouts

__all__ = ["AsyncTransport", "RawResponse", "SyncTransport"]

# Enough keep-alive connections for the concurrency users run at (generate_many resizes it).
DEFAULT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=100)


class RawResponse:
    """Status, headers (readable by lower-case name) and the whole body of one response."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: httpx.Headers, body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body


def _httpx_request(request: PreparedRequest, timeouts: Timeouts) -> httpx.Request:
    return httpx.Request(
        request.method,
        request.url,
        headers=request.headers,
        content=request.body,
        extensions={"timeout": timeouts.as_httpx()},
    )


def _user_request(
    client: httpx.Client | httpx.AsyncClient, request: PreparedRequest, timeouts: Timeouts
) -> httpx.Request:
    return client.build_request(
        request.method,
        request.url,
        headers=request.headers,
        content=request.body,
        extensions={"timeout": timeouts.as_httpx()},
    )


class _Limiter:
    """Counts received bytes against the size limit and checks the deadline between chunks."""

    __slots__ = ("deadline_at", "max_bytes", "received")

    def __init__(self, response: httpx.Response, max_bytes: int, deadline_at: float | None) -> None:
        self.max_bytes = max_bytes
        self.deadline_at = deadline_at
        self.received = 0
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_bytes:
            raise errors.ProtocolError(
                f"response of {declared} bytes refused: larger than max_response_bytes={max_bytes}"
            )

    def count(self, chunk: bytes) -> None:
        self.received += len(chunk)
        if self.received > self.max_bytes:
            raise errors.ProtocolError(
                f"response refused after {self.received} bytes: larger than "
                f"max_response_bytes={self.max_bytes}"
            )
        if self.deadline_at is not None and time.monotonic() > self.deadline_at:
            raise errors.APITimeoutError("the call's deadline expired while reading the response")


def _connection_error(exc: httpx.HTTPError) -> errors.APIConnectionError:
    if isinstance(exc, httpx.TimeoutException):
        return errors.APITimeoutError(f"timed out: {type(exc).__name__}")
    return errors.APIConnectionError(f"{type(exc).__name__}: {exc}")


class SyncTransport:
    """Blocking I/O for `Client`."""

    def __init__(self, http_client: httpx.Client | None = None) -> None:
        self._client = http_client
        self._transport = (
            httpx.HTTPTransport(limits=DEFAULT_LIMITS) if http_client is None else None
        )

    def _open(self, request: PreparedRequest, timeouts: Timeouts) -> httpx.Response:
        if self._transport is not None:
            return self._transport.handle_request(_httpx_request(request, timeouts))
        assert self._client is not None  # the user's client: its headers, proxies, mounts apply
        req = _user_request(self._client, request, timeouts)
        return self._client.send(req, stream=True, follow_redirects=False)

    def send(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
    ) -> RawResponse:
        try:
            response = self._open(request, timeouts)
            try:
                limiter = _Limiter(response, max_bytes, deadline_at)
                chunks = []
                for chunk in response.iter_bytes():
                    limiter.count(chunk)
                    chunks.append(chunk)
            finally:
                response.close()
        except httpx.HTTPError as exc:
            raise _connection_error(exc) from exc
        return RawResponse(response.status_code, response.headers, b"".join(chunks))

    def stream(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
    ) -> tuple[httpx.Response, Iterator[bytes]]:
        """Open a response and return it with an iterator of its checked body chunks; the caller
        closes the response."""
        try:
            response = self._open(request, timeouts)
        except httpx.HTTPError as exc:
            raise _connection_error(exc) from exc

        def chunks() -> Iterator[bytes]:
            limiter = _Limiter(response, max_bytes, deadline_at)
            try:
                for chunk in response.iter_bytes():
                    limiter.count(chunk)
                    yield chunk
            except httpx.HTTPError as exc:
                raise _connection_error(exc) from exc

        return response, chunks()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


class AsyncTransport:
    """Non-blocking I/O for `AsyncClient`; mirrors `SyncTransport` line for line."""

    def __init__(self, http_client: httpx.AsyncClient | None = None) -> None:
        self._client = http_client
        self._transport = (
            httpx.AsyncHTTPTransport(limits=DEFAULT_LIMITS) if http_client is None else None
        )

    async def _open(self, request: PreparedRequest, timeouts: Timeouts) -> httpx.Response:
        if self._transport is not None:
            return await self._transport.handle_async_request(_httpx_request(request, timeouts))
        assert self._client is not None  # the user's client: its headers, proxies, mounts apply
        req = _user_request(self._client, request, timeouts)
        return await self._client.send(req, stream=True, follow_redirects=False)

    async def send(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
    ) -> RawResponse:
        try:
            response = await self._open(request, timeouts)
            try:
                limiter = _Limiter(response, max_bytes, deadline_at)
                chunks = []
                async for chunk in response.aiter_bytes():
                    limiter.count(chunk)
                    chunks.append(chunk)
            finally:
                await response.aclose()
        except httpx.HTTPError as exc:
            raise _connection_error(exc) from exc
        return RawResponse(response.status_code, response.headers, b"".join(chunks))

    async def stream(
        self,
        request: PreparedRequest,
        timeouts: Timeouts,
        max_bytes: int,
        deadline_at: float | None,
    ) -> tuple[httpx.Response, AsyncIterator[bytes]]:
        try:
            response = await self._open(request, timeouts)
        except httpx.HTTPError as exc:
            raise _connection_error(exc) from exc

        async def chunks() -> AsyncIterator[bytes]:
            limiter = _Limiter(response, max_bytes, deadline_at)
            try:
                async for chunk in response.aiter_bytes():
                    limiter.count(chunk)
                    yield chunk
            except httpx.HTTPError as exc:
                raise _connection_error(exc) from exc

        return response, chunks()

    async def aclose(self) -> None:
        if self._transport is not None:
            await self._transport.aclose()
