"""Mount a :class:`FakeLLM` as a respx route, so any httpx client reaches it without sockets.

Imported only by :meth:`FakeLLM.mock`: respx and httpx are test-time dependencies.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpx
import respx

from ._wire import StreamDropped

if TYPE_CHECKING:
    from ._fake import FakeLLM

__all__ = ["mock"]

DEFAULT_BASE_URL = "http://fake-llm.test/v1"


@contextmanager
def mock(fake: FakeLLM, router: respx.Router | None) -> Iterator[str]:
    """Route requests to ``fake`` for the duration; yields the base URL clients should use."""
    base_url = fake.base_url or DEFAULT_BASE_URL

    def answer(request: httpx.Request) -> httpx.Response:
        response = fake.handle(
            request.method, request.url.raw_path.decode("ascii"), request.headers, request.read()
        )
        if response.chunks is None:
            return httpx.Response(response.status, headers=response.headers, content=response.body)
        stream = _ChunkStream(response.chunks)
        return httpx.Response(response.status, headers=response.headers, stream=stream)

    if fake.base_url is None:
        route = respx.Route()
    else:
        parts = urlsplit(fake.base_url)
        route = respx.Route(url__startswith=f"{parts.scheme}://{parts.netloc}/")
    route.side_effect = answer
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


class _ChunkStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    """SSE events handed to httpx one at a time, for sync and async clients alike."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._chunks
        except StreamDropped:
            raise httpx.RemoteProtocolError("FakeLLM dropped the connection") from None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self:
            yield chunk

    def close(self) -> None:
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()

    async def aclose(self) -> None:
        self.close()
