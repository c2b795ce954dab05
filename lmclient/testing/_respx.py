"""Mount a :class:`FakeLLM` as a respx route, so any httpx client reaches it without sockets.

Imported only by :meth:`FakeLLM.mock`: respx and httpx are test-time dependencies.

Faults map to what httpx raises on a real connection, but no time passes: a delay or a stall
as long as the request's read timeout raises ``httpx.ReadTimeout`` at once (where the bytes
stop), a shorter one is skipped; a connection closed before or inside the head raises
``httpx.RemoteProtocolError`` from the request, one closed mid-body raises it while the body
is read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import httpx
import respx

from ._mount import Mountable
from ._wire import Pause, StreamDropped

__all__ = ["mock"]

DEFAULT_ORIGIN = "http://fake-llm.test"


@contextmanager
def mock(fake: Mountable, router: respx.Router | None) -> Iterator[str]:
    """Route requests to ``fake`` for the duration; yields the base URL clients should use."""
    given = fake._base_url
    base_url = given or DEFAULT_ORIGIN + fake.base_path

    def answer(request: httpx.Request) -> httpx.Response:
        response = fake.handle(
            request.method, request.url.raw_path.decode("ascii"), request.headers, request.read()
        )
        timeout = _read_timeout(request)
        if _times_out(response.delay, timeout):
            raise httpx.ReadTimeout(
                f"FakeLLM delayed the response by {response.delay} s", request=request
            )
        if response.cut is not None:
            raise httpx.RemoteProtocolError(
                f"FakeLLM closed the connection ({response.cut})", request=request
            )
        if response.chunks is None:
            return httpx.Response(response.status, headers=response.headers, content=response.body)
        headers = list(response.headers)
        if response.length is not None:
            headers.append(("content-length", str(response.length)))
        stream = _ChunkStream(response.chunks, request, timeout)
        return httpx.Response(response.status, headers=headers, stream=stream)

    if given is None:
        route = respx.Route()
    else:
        parts = urlsplit(given)
        route = respx.Route(url__startswith=f"{parts.scheme}://{parts.netloc}/")
    route.side_effect = answer
    with fake._mounted_at(base_url):
        if router is None:
            with respx.mock(assert_all_called=False) as started:
                started.add(route)
                yield base_url
            return
        name = f"lmclient-fake-{id(fake)}"
        router.add(route, name=name)
        try:
            yield base_url
        finally:
            router.pop(name, None)


def _read_timeout(request: httpx.Request) -> float | None:
    """The read timeout the client gave this request (httpx passes it in the extensions)."""
    timeout = request.extensions.get("timeout")
    read = timeout.get("read") if isinstance(timeout, dict) else None
    return float(read) if isinstance(read, (int, float)) else None


def _times_out(seconds: float, timeout: float | None) -> bool:
    return seconds > 0 and timeout is not None and seconds >= timeout


class _ChunkStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    """The body handed to httpx a piece at a time, for sync and async clients alike."""

    def __init__(
        self, chunks: Iterator[bytes | Pause], request: httpx.Request, timeout: float | None
    ) -> None:
        self._chunks = chunks
        self._request = request
        self._timeout = timeout

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self._chunks:
                if not isinstance(chunk, Pause):
                    yield chunk
                elif _times_out(chunk.seconds, self._timeout):
                    raise httpx.ReadTimeout(
                        f"FakeLLM stalled for {chunk.seconds} s", request=self._request
                    )
        except StreamDropped:
            raise httpx.RemoteProtocolError(
                "FakeLLM dropped the connection", request=self._request
            ) from None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self:
            yield chunk

    def close(self) -> None:
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()

    async def aclose(self) -> None:
        self.close()
