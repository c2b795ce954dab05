"""`Stream` and `AsyncStream`: text deltas and typed array items as they are generated.

Both are thin shells over `StreamState`; they only pull bytes and close the response. The
response is released when the stream ends, on error, on ``break`` followed by leaving the
``with`` block, and on task cancellation; use them as context managers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Generic, TypeVar, overload

import msgspec

from . import errors
from ._protocol import Usage
from ._response import Response
from ._sse import ArrayItems
from ._stream_state import StreamState
from ._transports.common import AsyncStreamResponse, StreamResponse
from ._types import DECODE_ERRORS

__all__ = ["AsyncStream", "Stream"]

T = TypeVar("T")
E = TypeVar("E")  # the element of a list/tuple/set output, which items() yields
Opened = StreamResponse  # what a transport's stream() returns, once the status is a success
AsyncOpened = AsyncStreamResponse
Opener = Callable[[], tuple[StreamState, Opened]]
AsyncOpener = Callable[[], Awaitable[tuple[StreamState, AsyncOpened]]]


def _item_decoder(state: StreamState) -> Callable[[str], Any]:
    """A decoder for one element of the output type's JSON array; TypeError for other types."""
    spec = state.call.spec
    assert spec is not None
    element = spec.element_type
    if element is None:
        raise TypeError(
            "items() needs a list[T], tuple[T, ...] or set[T] output type, "
            f"not {spec.output_type!r}"
        )
    decoder = msgspec.json.Decoder(element)

    def decode(text: str) -> Any:
        try:
            return decoder.decode(text)
        except DECODE_ERRORS as exc:
            raise errors.ValidationError(str(exc), text=text, output_type=element) from None

    return decode


async def _no_deltas() -> AsyncIterator[str]:
    """What iterating a stream yields once `aread` has read it: nothing."""
    if False:  # an async generator that ends at once
        yield ""


class _StreamBase(Generic[T]):
    """What both shells report once (or while) the stream is read."""

    _state: StreamState | None  # created when the stream opens
    _result: Response[T] | None

    @property
    def text(self) -> str:
        """The text received so far."""
        return "" if self._state is None else self._state.text

    @property
    def finish_reason(self) -> str | None:
        return None if self._state is None else self._state.finish_reason

    @property
    def usage(self) -> Usage | None:
        return None if self._state is None else self._state.usage

    @property
    def events(self) -> int:
        """How many SSE data events arrived."""
        return 0 if self._state is None else self._state.events

    @property
    def _done(self) -> bool:
        return self._state is not None and self._state.done

    def _finished(self) -> Response[T]:
        assert self._state is not None
        if self._result is None:
            self._result = self._state.result()
        return self._result


class Stream(_StreamBase[T]):
    """Iterate for text deltas; `items()` for array elements; `value` for the validated whole."""

    def __init__(self, opener: Opener) -> None:
        self._opener = opener
        self._state = None
        self._result = None
        self._response: StreamResponse | None = None
        self._chunks: Iterator[bytes] = iter(())
        self._deltas: Iterator[str] | None = None
        self._closed = False

    def __enter__(self) -> Stream[T]:
        self._open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[str]:
        return self._iterator()

    def _open(self) -> StreamState:
        if self._state is None:
            if self._closed:
                raise errors.LMClientError("the stream is closed")
            self._state, self._response = self._opener()
            self._chunks = self._response.chunks
        return self._state

    def _iterator(self) -> Iterator[str]:
        if self._deltas is None:
            self._deltas = self._read(self._open(), self._chunks)
        return self._deltas

    def _read(self, state: StreamState, chunks: Iterator[bytes]) -> Iterator[str]:
        try:
            for chunk in chunks:
                yield from state.feed(chunk)
            yield from state.end()
        finally:
            self.close()

    @overload
    def items(self: Stream[list[E]]) -> Iterator[E]: ...
    @overload
    def items(self: Stream[tuple[E, ...]]) -> Iterator[E]: ...
    @overload
    def items(self: Stream[set[E]]) -> Iterator[E]: ...
    @overload
    def items(self: Stream[frozenset[E]]) -> Iterator[E]: ...
    def items(self) -> Iterator[Any]:
        """Each element of a JSON-array output, validated, as soon as it closes; at the end the
        whole value is validated too (a cut array raises `TruncatedError`)."""
        deltas = self._iterator()
        assert self._state is not None
        decode = _item_decoder(self._state)
        splitter = ArrayItems()
        for delta in deltas:
            for text in splitter.feed(delta):
                yield decode(text)
        self.read()

    def read(self) -> T:
        """Read the rest of the stream and return the validated value."""
        if not self._done:
            if self._deltas is None:  # nothing iterated yet: no delta needs to be handed out
                state = self._open()
                self._deltas = iter(())
                try:
                    for chunk in self._chunks:
                        state.feed(chunk)
                    state.end()
                finally:
                    self.close()
            else:
                for _ in self._deltas:
                    pass
            if not self._done:
                raise errors.LMClientError("the stream was closed before it ended")
        return self._finished().value

    @property
    def value(self) -> T:
        """The validated value; reads the rest of the stream first."""
        return self.read()

    def close(self) -> None:
        """Release the connection; idempotent."""
        self._closed = True
        response, self._response = self._response, None
        if response is not None:
            response.close()


class AsyncStream(_StreamBase[T]):
    """`Stream` for asyncio: ``async with`` / ``async for``; ``await aread()`` for the value."""

    def __init__(self, opener: AsyncOpener) -> None:
        self._opener = opener
        self._state = None
        self._result = None
        self._response: AsyncStreamResponse | None = None
        self._chunks: AsyncIterator[bytes] | None = None
        self._deltas: AsyncIterator[str] | None = None
        self._closed = False

    async def __aenter__(self) -> AsyncStream[T]:
        await self._open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lazy()

    async def _lazy(self) -> AsyncIterator[str]:
        async for delta in await self._iterator():
            yield delta

    async def _open(self) -> tuple[StreamState, AsyncIterator[bytes]]:
        if self._state is None or self._chunks is None:
            if self._closed:
                raise errors.LMClientError("the stream is closed")
            self._state, self._response = await self._opener()
            self._chunks = self._response.chunks
        return self._state, self._chunks

    async def _iterator(self) -> AsyncIterator[str]:
        if self._deltas is None:
            self._deltas = self._read(*await self._open())
        return self._deltas

    async def _read(self, state: StreamState, chunks: AsyncIterator[bytes]) -> AsyncIterator[str]:
        try:
            async for chunk in chunks:
                for delta in state.feed(chunk):
                    yield delta
            for delta in state.end():
                yield delta
        finally:
            await self.aclose()

    @overload
    def items(self: AsyncStream[list[E]]) -> AsyncIterator[E]: ...
    @overload
    def items(self: AsyncStream[tuple[E, ...]]) -> AsyncIterator[E]: ...
    @overload
    def items(self: AsyncStream[set[E]]) -> AsyncIterator[E]: ...
    @overload
    def items(self: AsyncStream[frozenset[E]]) -> AsyncIterator[E]: ...
    async def items(self) -> AsyncIterator[Any]:
        """Each element of a JSON-array output, validated, as soon as it closes."""
        deltas = await self._iterator()
        assert self._state is not None
        decode = _item_decoder(self._state)
        splitter = ArrayItems()
        async for delta in deltas:
            for text in splitter.feed(delta):
                yield decode(text)
        await self.aread()

    async def aread(self) -> T:
        """Read the rest of the stream and return the validated value."""
        if not self._done:
            if self._deltas is None:  # nothing iterated yet: no delta needs to be handed out
                state, chunks = await self._open()
                self._deltas = _no_deltas()
                try:
                    async for chunk in chunks:
                        state.feed(chunk)
                    state.end()
                finally:
                    await self.aclose()
            else:
                async for _ in self._deltas:
                    pass
            if not self._done:
                raise errors.LMClientError("the stream was closed before it ended")
        return self._finished().value

    @property
    def value(self) -> T:
        """The validated value once the stream has been read (``await aread()`` reads it)."""
        if not self._done:
            raise errors.LMClientError("the stream is not finished: use `await stream.aread()`")
        return self._finished().value

    async def aclose(self) -> None:
        """Release the connection; idempotent."""
        self._closed = True
        response, self._response = self._response, None
        if response is not None:
            await response.aclose()
