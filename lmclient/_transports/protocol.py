"""One connection of `AsyncTransport`: an `asyncio.Protocol` that parses as bytes arrive, the
phases of an exchange on it (sending the request, waiting for the head or the whole response)
and a streamed body; the design is in `lmclient._transports`. Its callbacks map what the parser
and the limiter raise (`io_error`) into the error the waiting task raises."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from lmclient import errors
from lmclient._transports.common import (
    STREAM_HIGH_WATER,
    Limiter,
    Pool,
    StaleConnection,
    Target,
    io_error,
    or_none,
    readability,
)
from lmclient._wire.http11 import BadResponse, ResponseParser

if TYPE_CHECKING:
    import ssl

__all__ = ["AsyncBody", "AsyncConnection", "connect"]


def _nothing() -> object:
    return False


class AsyncConnection(asyncio.Protocol):
    """One connection as an asyncio protocol: parses in `data_received`, buffers the body
    pieces, and wakes the task waiting for them.

    While a request is in flight, ``parser`` is set. ``streaming`` wakes the waiter for every
    piece (a stream), otherwise only once the response is complete (one wake per call). The read
    timeout and the call's deadline share one timer per connection that, when it fires, ends the
    call if either has passed, else re-arms itself for the sooner of the two, and lapses once the
    connection is idle: no timer per read, and on a busy connection none per request either, with
    a deadline or without (scheduling and cancelling one costs heap operations in Python on every
    call, and a cancelled one stays in the loop's heap until it would have fired)."""

    __slots__ = (
        "__weakref__",  # (the pool's set of open connections is weak: `Pool`)
        "buffered",
        "closed",
        "deadline_at",
        "drain",
        "error",
        "idle_since",
        "kept",
        "last_read",
        "limiter",
        "loop",
        "max_bytes",
        "origin",
        "parser",
        "pieces",
        "read_timeout",
        "readable",
        "reading_paused",
        "streaming",
        "timer",
        "timer_at",
        "transport",
        "waiter",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop, origin: tuple[str, str, int]) -> None:
        self.loop = loop
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.parser: ResponseParser | None = None  # while a request is in flight: `kept`
        self.kept = ResponseParser()  # reset for each response (`send_request`)
        self.limiter: Limiter | None = None  # only for a body the declared length cannot bound
        self.max_bytes = 0
        self.deadline_at: float | None = None
        self.pieces: list[bytes] = []
        self.buffered = 0
        self.error: errors.LMClientError | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.drain: asyncio.Future[None] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.timer_at = 0.0  # when the timer fires
        self.streaming = False
        self.reading_paused = False
        self.closed = False
        self.read_timeout = math.inf
        self.last_read = 0.0
        self.idle_since = 0.0
        self.readable: Callable[[], object] = _nothing

    # -- the pool's view -------------------------------------------------------------------

    def stale(self) -> object:
        """Closed, of another loop, or with something to read: bytes that arrived while idle
        close the connection in `data_received`, but only once the loop has had a turn, so
        bytes still in the kernel are looked for too (as the sync connection does)."""
        return self.closed or self.loop is not asyncio.get_running_loop() or self.readable()

    def close(self) -> None:
        self._cancel_timer()
        if self.parser is not None and not self.parser.complete:  # e.g. the client was closed
            self._fail(errors.APIConnectionError("the connection was closed during the call"))
        self.parser = None
        if self.transport is not None and not self.closed:
            self.closed = True
            if not self.loop.is_closed():  # a client kept across asyncio.run() calls
                self.transport.abort()

    # -- one request -----------------------------------------------------------------------

    # -- the phases of an exchange (httpcore's `_send_request_*`, `_receive_response_*`) ----

    def send_request(
        self,
        payload: bytes,
        max_bytes: int,
        deadline_at: float | None,
        read_timeout: float,
        stream: bool,
    ) -> ResponseParser:
        """Send a request; the returned parser fills as the response arrives. (A connection
        is idle with no limiter, pieces or error: a response's reader takes its pieces, and a
        connection with an error is closed.)

        A connection the server closed before the request could be written — a fresh one that
        the server closed on accepting it, a pooled one that closed after its check — raises
        `StaleConnection`, as the sync transport's send does: asyncio would drop the write
        without a word, and nothing would ever answer the waiter."""
        assert self.transport is not None
        if self.closed or self.transport.is_closing():  # closing: its connection_lost is due
            raise StaleConnection("the server closed the connection before the request was sent")
        parser = self.parser = self.kept
        parser.reset()
        self.max_bytes = max_bytes
        self.deadline_at = deadline_at
        self.streaming = stream
        self.read_timeout = read_timeout
        self.transport.write(payload)
        if not math.isinf(read_timeout):
            self.last_read = time.monotonic()
        due = self._due()
        if due is not None and (self.timer is None or self.timer_at > due):  # else it re-arms
            self._cancel_timer()
            self._arm_timer(due)
        return parser

    async def drained(self, timeout: float) -> None:
        """Wait until the kernel took a large request body (rare: bodies are small)."""
        assert self.drain is not None
        try:
            await asyncio.wait_for(asyncio.shield(self.drain), or_none(timeout))
        except asyncio.TimeoutError:
            raise errors.APITimeoutError("timed out sending the request") from None

    def arrived(self, stream: bool) -> bool:
        """Whether the head (a stream) or the whole response (a call) has arrived; the
        connection's error (`data_received`'s, `connection_lost`'s, the timer's) raises."""
        if self.error is not None:
            raise self.error
        parser = self.kept  # (``parser`` is None once the connection is closed)
        return parser.complete or (stream and parser.headers is not None)

    def take_pieces(self) -> bytes:
        pieces, self.pieces = self.pieces, []
        self.buffered = 0
        if self.reading_paused and self.transport is not None:
            self.reading_paused = False
            self.transport.resume_reading()
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def finish(self) -> None:
        """The response ended; the pool decides what happens next. The timer stays: it lapses
        when it finds the connection idle, or serves the next request (one timer per busy
        connection and read-timeout period, not one per request)."""
        self.parser = None
        self.limiter = None

    # -- asyncio callbacks -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.readable = readability(transport.get_extra_info("socket"))

    def data_received(self, data: bytes) -> None:
        parser = self.parser
        if parser is None or self.error is not None:
            self.close()  # bytes nobody asked for: the connection's state is unknown
            return
        try:
            if parser.headers is None:
                piece = parser.feed(data)
                headers = parser.headers
                if headers is not None:
                    length = parser.length
                    # A body of a declared length within the limit, not encoded, needs no
                    # limiter (the usual response: no object made, no call per piece).
                    if length is None or length > self.max_bytes or "content-encoding" in headers:
                        self.limiter = Limiter(self.max_bytes, self.deadline_at)
                        self.limiter.head(headers, length)
            else:
                piece = parser.feed(data)
            limiter = self.limiter
            if piece:
                if limiter is not None:
                    piece = limiter.take(piece)
                self.pieces.append(piece)
                # Only a stream has a reader that drains `pieces` as they come; a whole response
                # is read to its end, bounded by the limiter's max_bytes (pausing it here would
                # leave nothing to resume reading: a hang). The deadline has its own timer.
                if self.streaming:
                    self.buffered += len(piece)
                    if self.buffered > STREAM_HIGH_WATER and not self.reading_paused:
                        self.reading_paused = True
                        assert self.transport is not None
                        self.transport.pause_reading()
            if parser.complete and limiter is not None and limiter.decoder is not None:
                self.pieces.append(limiter.finish())
        except (BadResponse, errors.LMClientError) as exc:
            self._fail(io_error(exc, "reading the response"))
            self.close()
            return
        if not parser.complete:  # (a complete response has no read timeout: `_on_timer`)
            self.last_read = time.monotonic()
            if not self.streaming:
                return
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._cancel_timer()
        parser = self.parser
        if parser is not None and not parser.complete and self.error is None:
            if not parser.started:
                self.error = StaleConnection("the server closed the connection without answering")
            elif parser.feed_eof():
                try:  # a body read until close has a limiter
                    if self.limiter is not None:
                        self.pieces.append(self.limiter.finish())
                except errors.LMClientError as error:  # (the limiter maps its own)
                    self.error = error
            else:
                self.error = errors.APIConnectionError(
                    "the server closed the connection before the response was complete"
                )
        self._wake()
        drain = self.drain
        if drain is not None and not drain.done():
            drain.set_result(None)

    def pause_writing(self) -> None:
        self.drain = self.loop.create_future()

    def resume_writing(self) -> None:
        drain, self.drain = self.drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)

    # -- internals -------------------------------------------------------------------------

    def _fail(self, exc: errors.LMClientError) -> None:
        if self.error is None:
            self.error = exc
        self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _due(self) -> float | None:
        """When the response in flight times out, as things stand: its read timeout after the
        last read, or the call's deadline, whichever comes first (None: neither applies). The
        loop's clock is time.monotonic(), as the core's deadline is."""
        due = self.deadline_at
        if not math.isinf(self.read_timeout):
            read_due = self.last_read + self.read_timeout
            if due is None or read_due < due:
                due = read_due
        return due

    def _on_timer(self) -> None:
        """End the call whose deadline or read timeout has passed; else wait on for the sooner.
        Past its deadline the call ends however the server trickles its bytes; a reader that
        paused reading is slow itself, which the read timeout does not count against the
        server. Ended, the connection's state is unknown, so it is closed."""
        self.timer = None
        parser = self.parser
        if parser is None or parser.complete:
            return  # idle, or its response read (it lapses: the next request re-arms it)
        # (A closed connection with a response in flight is timed all the same: its waiter
        # must wake whatever the connection's state.)
        now = time.monotonic()
        if self.deadline_at is not None and now >= self.deadline_at:
            self._fail(errors.APITimeoutError("the call's deadline expired during the response"))
            self.close()
            return
        if self.reading_paused:  # the reader is slow, not the server
            self.last_read = now
        due = self._due()
        if due is None:
            return  # neither applies to this call (an earlier call armed the timer): it lapses
        if now < due:
            self._arm_timer(due)
            return
        self._fail(errors.APITimeoutError("timed out waiting for the server (read timeout)"))
        self.close()

    def _arm_timer(self, when: float) -> None:
        self.timer = self.loop.call_at(when, self._on_timer)
        self.timer_at = when

    def _cancel_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


class AsyncBody:
    """`_SyncBody` for asyncio."""

    __slots__ = ("_conn", "_pool")

    def __init__(self, pool: Pool[AsyncConnection], conn: AsyncConnection) -> None:
        self._pool = pool
        self._conn: AsyncConnection | None = conn

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        while True:
            conn = self._conn
            if conn is None:
                raise StopAsyncIteration
            if conn.pieces:
                piece = conn.take_pieces()
                if piece:
                    return piece
                continue
            if conn.error is not None:
                self._conn = None
                self._pool.discard(conn)
                raise conn.error
            parser = conn.parser
            if parser is None:  # closed after the whole body had arrived (else: conn.error)
                self._conn = None
                self._pool.discard(conn)
                raise StopAsyncIteration
            if parser.complete:
                self._conn = None
                conn.finish()
                self._pool.release(conn, parser.keep_alive)
                raise StopAsyncIteration
            waiter = conn.waiter = conn.loop.create_future()  # woken by the next piece
            try:
                await waiter
            except BaseException:
                await self.aclose()
                raise

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self._pool.discard(conn)


async def connect(
    target: Target, timeout: float, uds: str | None, tls: ssl.SSLContext | None
) -> AsyncConnection:
    """`sockets.connect` for asyncio."""
    loop = asyncio.get_running_loop()

    def factory() -> AsyncConnection:
        return AsyncConnection(loop, target.origin)

    if uds is None:
        where = f"{target.host}:{target.port}"
        connecting = loop.create_connection(
            factory,
            target.host,
            target.port,
            ssl=tls,
            server_hostname=target.host if tls is not None else None,
        )
    else:  # (a Unix socket has no TLS here: refused when the client is made)
        where = f"the Unix socket {uds}"
        connecting = loop.create_unix_connection(factory, uds)
    try:
        _, conn = await asyncio.wait_for(connecting, or_none(timeout))
    except asyncio.TimeoutError:  # not a TimeoutError before Python 3.11
        raise errors.APITimeoutError(f"timed out connecting to {where}") from None
    except OSError as exc:
        raise io_error(exc, f"connecting to {where}") from exc
    return conn
