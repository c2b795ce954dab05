"""`Stream` and `AsyncStream`: text deltas and typed array items as they are generated.

Both are thin shells over `StreamState`; they only pull bytes and close the response. The
response is released when the stream ends, on error, on ``break`` followed by leaving the
``with`` block, and on task cancellation; use them as context managers. Released before its
answer ended, the server is asked to stop generating it where it can be (SGLang).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar, overload

from . import errors
from ._call import name_request
from ._headers import Headers
from ._output.types import json_decoder
from ._response import Response
from ._stream_state import StreamState
from ._tools import Args, decode_calls, one_or_two
from ._transports.common import AsyncStreamResponse, StreamResponse
from ._wire.protocol import LlamaCppTimings, Usage, VllmMetrics
from ._wire.sse import ArrayItems

if TYPE_CHECKING:
    from ._call import Lookup
    from ._tools import ToolCall
    from ._wire.partial import ObjectProgress, PartialObject
    from ._wire.progressive import Partial
    from ._wire.protocol import WireToolCall

__all__ = ["AsyncOpened", "AsyncStream", "Opened", "Stream"]

T = TypeVar("T")
E = TypeVar("E")  # the element of a list/tuple/set output, which items() yields
K = TypeVar("K")  # the key and value of a dict output, which fields() snapshots
V = TypeVar("V")
S = TypeVar("S")  # a snapshot: what partials() or fields() yields
S_co = TypeVar("S_co", covariant=True)
# What `deltas()` yields: reasoning and content text, told apart.
Delta = tuple[Literal["reasoning", "content"], str]
Opened = StreamResponse  # what a transport's stream() returns, once the status is a success
AsyncOpened = AsyncStreamResponse
Opener = Callable[[], tuple[StreamState, Opened]]
AsyncOpener = Callable[[], Awaitable[tuple[StreamState, AsyncOpened]]]
# The client's best-effort abort (`Client._abort`), for a stream closed before its answer ended.
Aborter = Callable[["Lookup[None] | None"], None]
AsyncAborter = Callable[["Lookup[None] | None"], Awaitable[None]]


class _Snapshots(Protocol[S_co]):
    """What `partials` and `fields` read a stream with: `ObjectProgress`, `PartialObject`."""

    def update(self, parts: list[str]) -> Iterator[S_co]: ...


def _item_decoder(state: StreamState) -> Callable[[str], Any]:
    """A decoder for one element of the output type's JSON array (the output decoder of the
    element type, as a call's value is decoded); TypeError for other types."""
    spec = state.call.spec
    assert spec is not None
    element = spec.element_type
    if element is None:
        raise TypeError(
            "items() needs a list[T], tuple[T, ...] or set[T] output type, "
            f"not {spec.output_type!r}"
        )
    return json_decoder(element)


def _partial_object(state: StreamState) -> PartialObject:
    """The whole fields of the output type's JSON object; TypeError for other types."""
    from ._wire.partial import PartialObject  # on the first fields(): most programs never need it

    spec = state.call.spec
    assert spec is not None
    return PartialObject(spec)


def _progress(state: StreamState) -> ObjectProgress:
    """The snapshots of the output type's JSON object as it grows; TypeError for other types."""
    from ._wire.partial import ObjectProgress  # on the first partials()

    spec = state.call.spec
    assert spec is not None
    return ObjectProgress(spec)


def _calls_decoder(state: StreamState) -> Callable[[list[WireToolCall]], list[ToolCall[Any]]]:
    """A decoder of closed tool calls into their tools' types; TypeError without ``tools=``."""
    tools = state.call.tools
    if not tools:
        raise TypeError("calls() needs a call with tools=")
    return lambda calls: decode_calls(tools, calls) if calls else []


async def _no_deltas() -> AsyncIterator[str]:
    """What iterating a stream yields once `aread` has read it: nothing."""
    if False:  # an async generator that ends at once
        yield ""


class _StreamBase(Generic[T, Args]):
    """What both shells report once (or while) the stream is read; ``Args`` the arguments of
    its tool calls, as `Response`'s."""

    _state: StreamState | None  # created when the stream opens
    _result: Response[T, Args] | None

    if not TYPE_CHECKING:  # what type checkers do with `Args`'s default (PEP 696)

        def __class_getitem__(cls, params: object) -> object:
            return super().__class_getitem__(one_or_two(params))

    @property
    def text(self) -> str:
        """The text received so far."""
        return "" if self._state is None else self._state.text

    @property
    def reasoning(self) -> str:
        """The reasoning (thinking) text received so far, apart from the content."""
        return "" if self._state is None else self._state.reasoning

    @property
    def tool_calls(self) -> tuple[ToolCall[Args], ...]:
        """The tool calls of a call with ``tools=``, assembled from their deltas and validated,
        once the stream has ended (`read` / `aread` read it); each call's arguments arrive in
        pieces, and are validated only whole."""
        if not self._done:
            raise errors.LMClientError("the stream is not finished: read it first")
        return self._finished().tool_calls

    @property
    def finish_reason(self) -> str | None:
        return None if self._state is None else self._state.finish_reason

    @property
    def usage(self) -> Usage | None:
        return None if self._state is None else self._state.usage

    @property
    def metrics(self) -> VllmMetrics | LlamaCppTimings | None:
        """What the server measured of the request (see `Response.metrics`), once sent: vLLM
        and llama.cpp send it on the last chunks."""
        return None if self._state is None else self._state.metrics

    @property
    def raw(self) -> list[Any]:
        """Every event received so far, decoded, all fields kept (not ``[DONE]``): what
        `Response.raw` is for a stream."""
        return [] if self._state is None else self._state.raw

    @property
    def events(self) -> int:
        """How many SSE data events arrived."""
        return 0 if self._state is None else self._state.events

    @property
    def headers(self) -> Headers:
        """The response's headers (case-insensitive, read-only) once the stream is open: rate
        limits and request ids before the first token; empty before. The final `Response`
        has the same."""
        return Headers.of(None if self._state is None else self._state.headers)

    @property
    def _done(self) -> bool:
        return self._state is not None and self._state.done

    def _finished(self) -> Response[T, Args]:
        state = self._state
        assert state is not None
        if self._result is None:
            watch = state.watch
            self._result = state.result() if watch is None else watch.stream_result(state)
        return self._result

    def _failed(self, exc: Exception) -> None:
        """A failure while reading: the client's key taken out of it (`scrub`: an error event
        may quote the request), named by the stream's request (as a call's errors are), then
        reported to an observed stream's hooks and span."""
        state = self._state
        if state is not None:
            state.scrub(exc)
            if isinstance(exc, errors.LMClientError):
                name_request(exc, state.call.request)
            if state.watch is not None:
                state.watch.failed(exc)

    def _report_end(self) -> None:
        """An observed stream's end, reported when it is released: its result if it was read
        to its end (a failure to validate is reported, and raised by `read`), else that it was
        closed early."""
        state = self._state
        if state is None or state.watch is None or state.watch.done:
            return
        if not state.done:
            state.watch.closed(state)
            return
        try:
            self._finished()
        except Exception:  # reported by `Watch.stream_result`; `read` raises it
            pass


class Stream(_StreamBase[T, Args]):
    """Iterate for text deltas; `items()` for array elements; `partials()` for an object as it
    grows, `fields()` for its whole fields; `value` for the validated whole."""

    def __init__(self, opener: Opener, abort: Aborter) -> None:
        self._opener = opener
        self._abort = abort
        self._state = None
        self._result = None
        self._response: StreamResponse | None = None
        self._chunks: Iterator[bytes] = iter(())
        self._deltas: Iterator[str] | None = None
        self._closed = False

    def __enter__(self) -> Stream[T, Args]:
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
            self._state.headers = self._response.headers
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
        except Exception as exc:
            self._failed(exc)
            raise
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
        self._rest()

    def partials(self) -> Iterator[Partial[T]]:
        """A snapshot of a JSON-object output each time what it shows changes: strings as they
        grow, numbers once whole, nested objects and arrays as they fill, with the paths still
        being written (see docs/streaming.md); each top-level field is validated as it closes,
        and the whole value at the end. Text already read by iterating the stream counts: the
        snapshots always start from the beginning."""
        return self._snapshots(_progress)

    @overload
    def fields(self: Stream[dict[K, V]]) -> Iterator[dict[K, V]]: ...  # type: ignore[overload-overlap]
    @overload
    def fields(self) -> Iterator[dict[str, Any]]: ...
    def fields(self) -> Iterator[dict[Any, Any]]:
        """A snapshot of a JSON-object output each time a top-level field closes: a new dict of
        the fields complete so far, each value validated against its field's type (see
        docs/streaming.md); at the end the whole value is validated too. Text already read by
        iterating the stream counts: the snapshots always start from the first field."""
        return self._snapshots(_partial_object)

    def _snapshots(self, make: Callable[[StreamState], _Snapshots[S]]) -> Iterator[S]:
        """`partials` and `fields`: their reader made now if the stream is open (a type that is
        not an object raises here, not at the first ``next``), else once it opens."""
        reader = None if self._state is None else make(self._state)
        return self._follow(reader, make)

    def _follow(
        self, reader: _Snapshots[S] | None, make: Callable[[StreamState], _Snapshots[S]]
    ) -> Iterator[S]:
        deltas = self._iterator()
        state = self._state
        assert state is not None
        if reader is None:  # the stream was opened just now, by `_iterator`
            reader = make(state)
        yield from reader.update(state.parts)  # deltas read before, if any
        for _ in deltas:
            yield from reader.update(state.parts)
        self._rest()

    def deltas(self) -> Iterator[Delta]:
        """Every delta as it arrives, reasoning and content apart: ``("reasoning", text)`` or
        ``("content", text)``, in the server's order; at the end the value is validated (as
        `read`). It reads the stream from its start: call it before any other read."""
        if self._deltas is not None:
            raise errors.LMClientError("deltas() must be the first read of the stream")
        state = self._open()
        self._deltas = iter(())  # read here: iterating the stream afterwards yields nothing
        try:
            for chunk in self._chunks:
                yield from state.tagged(state.feed(chunk))
            yield from state.tagged(state.end())
        except Exception as exc:
            self._failed(exc)
            raise
        finally:
            self.close()
        self._rest()

    def calls(self) -> Iterator[ToolCall[Args]]:
        """Each tool call of a call with ``tools=``, validated, as soon as its arguments close
        (when the next call starts, or the choice ends); `tool_calls` then holds them all. It
        reads the stream from its start: call it before any other read."""
        if self._deltas is not None:
            raise errors.LMClientError("calls() must be the first read of the stream")
        state = self._open()
        decode = _calls_decoder(state)
        self._deltas = iter(())  # read here: iterating the stream afterwards yields nothing
        given = 0
        try:
            for chunk in self._chunks:
                state.feed(chunk)
                for call in decode(state.closed_calls()):
                    given += 1
                    yield call
            state.end()
            for call in decode(state.closed_calls()):
                given += 1
                yield call
        except Exception as exc:
            self._failed(exc)
            raise
        finally:
            self.close()
        yield from self._rest().tool_calls[given:]  # a typed turn's: its text, read whole

    def read(self) -> T:
        """Read the rest of the stream and return the validated value."""
        return self._rest().value

    def _rest(self) -> Response[T, Args]:
        """Read the rest of the stream; its answer validated (a typed turn's calls, or the
        value, which the readers that end with it do not ask for)."""
        if not self._done:
            if self._deltas is None:  # nothing iterated yet: no delta needs to be handed out
                state = self._open()
                self._deltas = iter(())
                try:
                    for chunk in self._chunks:
                        state.feed(chunk)
                    state.end()
                except Exception as exc:
                    self._failed(exc)
                    raise
                finally:
                    self.close()
            else:
                for _ in self._deltas:
                    pass
            if not self._done:
                raise errors.LMClientError("the stream was closed before it ended")
        return self._finished()

    @property
    def value(self) -> T:
        """The validated value; reads the rest of the stream first."""
        return self.read()

    def close(self) -> None:
        """Release the connection; idempotent. A stream closed before the server said its
        answer ended (a ``break``, an error, leaving the ``with`` block) has the server asked
        to stop generating it, where it can be (SGLang: `StreamState.abort`)."""
        self._closed = True
        response, self._response = self._response, None
        if response is not None:
            response.close()
            if self._state is not None:
                self._abort(self._state.abort())
        self._report_end()


class AsyncStream(_StreamBase[T, Args]):
    """`Stream` for asyncio: ``async with`` / ``async for``; ``await aread()`` for the value."""

    def __init__(self, opener: AsyncOpener, abort: AsyncAborter) -> None:
        self._opener = opener
        self._abort = abort
        self._state = None
        self._result = None
        self._response: AsyncStreamResponse | None = None
        self._chunks: AsyncIterator[bytes] | None = None
        self._deltas: AsyncIterator[str] | None = None
        self._closed = False

    async def __aenter__(self) -> AsyncStream[T, Args]:
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
            self._state.headers = self._response.headers
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
        except Exception as exc:
            self._failed(exc)
            raise
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
        await self._arest()

    def partials(self) -> AsyncIterator[Partial[T]]:
        """A snapshot of a JSON-object output each time what it shows changes (as
        `Stream.partials`)."""
        return self._snapshots(_progress)

    @overload
    def fields(self: AsyncStream[dict[K, V]]) -> AsyncIterator[dict[K, V]]: ...  # type: ignore[overload-overlap]
    @overload
    def fields(self) -> AsyncIterator[dict[str, Any]]: ...
    def fields(self) -> AsyncIterator[dict[Any, Any]]:
        """A snapshot of a JSON-object output each time a top-level field closes (as
        `Stream.fields`)."""
        return self._snapshots(_partial_object)

    def _snapshots(self, make: Callable[[StreamState], _Snapshots[S]]) -> AsyncIterator[S]:
        """`partials` and `fields` (as `Stream._snapshots`)."""
        reader = None if self._state is None else make(self._state)
        return self._follow(reader, make)

    async def _follow(
        self, reader: _Snapshots[S] | None, make: Callable[[StreamState], _Snapshots[S]]
    ) -> AsyncIterator[S]:
        deltas = await self._iterator()
        state = self._state
        assert state is not None
        if reader is None:  # the stream was opened just now, by `_iterator`
            reader = make(state)
        for snapshot in reader.update(state.parts):  # deltas read before, if any
            yield snapshot
        async for _ in deltas:
            for snapshot in reader.update(state.parts):
                yield snapshot
        await self._arest()

    async def deltas(self) -> AsyncIterator[Delta]:
        """Every delta as it arrives, reasoning and content apart (as `Stream.deltas`)."""
        if self._deltas is not None:
            raise errors.LMClientError("deltas() must be the first read of the stream")
        state, chunks = await self._open()
        self._deltas = _no_deltas()
        try:
            async for chunk in chunks:
                for delta in state.tagged(state.feed(chunk)):
                    yield delta
            for delta in state.tagged(state.end()):
                yield delta
        except Exception as exc:
            self._failed(exc)
            raise
        finally:
            await self.aclose()
        await self._arest()

    async def calls(self) -> AsyncIterator[ToolCall[Args]]:
        """Each tool call, validated, as soon as its arguments close (as `Stream.calls`)."""
        if self._deltas is not None:
            raise errors.LMClientError("calls() must be the first read of the stream")
        state, chunks = await self._open()
        decode = _calls_decoder(state)
        self._deltas = _no_deltas()
        given = 0
        try:
            async for chunk in chunks:
                state.feed(chunk)
                for call in decode(state.closed_calls()):
                    given += 1
                    yield call
            state.end()
            for call in decode(state.closed_calls()):
                given += 1
                yield call
        except Exception as exc:
            self._failed(exc)
            raise
        finally:
            await self.aclose()
        for call in (await self._arest()).tool_calls[given:]:  # a typed turn's (`Stream.calls`)
            yield call

    async def aread(self) -> T:
        """Read the rest of the stream and return the validated value."""
        return (await self._arest()).value

    async def _arest(self) -> Response[T, Args]:
        """Read the rest of the stream; its answer validated (as `Stream._rest`)."""
        if not self._done:
            if self._deltas is None:  # nothing iterated yet: no delta needs to be handed out
                state, chunks = await self._open()
                self._deltas = _no_deltas()
                try:
                    async for chunk in chunks:
                        state.feed(chunk)
                    state.end()
                except Exception as exc:
                    self._failed(exc)
                    raise
                finally:
                    await self.aclose()
            else:
                async for _ in self._deltas:
                    pass
            if not self._done:
                raise errors.LMClientError("the stream was closed before it ended")
        return self._finished()

    @property
    def value(self) -> T:
        """The validated value once the stream has been read (``await aread()`` reads it)."""
        if not self._done:
            raise errors.LMClientError("the stream is not finished: use `await stream.aread()`")
        return self._finished().value

    async def aclose(self) -> None:
        """Release the connection; idempotent; the server asked to stop an answer that had not
        ended (as `Stream.close`), also when the task reading it is cancelled."""
        self._closed = True
        response, self._response = self._response, None
        if response is not None:
            await response.aclose()
            if self._state is not None:
                await self._abort(self._state.abort())
        self._report_end()
