"""One connection of `SyncTransport`: a blocking socket, the phases of an exchange on it
(sending the request, reading the head, reading the body) and a streamed body; the design is in
`lmclient._transports`. Each phase maps what its socket and parser raise (`io_error`)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING

from lmclient import errors
from lmclient._transports.common import (
    READ_SIZE,
    Limiter,
    Pool,
    RawResponse,
    StaleConnection,
    Target,
    io_error,
    or_none,
    raw_response,
    readability,
    remaining,
)
from lmclient._wire.http11 import BadResponse, ResponseParser

if TYPE_CHECKING:
    import ssl

__all__ = ["SyncBody", "SyncConnection", "connect", "read_body", "read_rest"]


class SyncConnection:
    """A socket and what the pool needs to know about it.

    Every wait is bounded by the socket's own timeout (Python's, `socket.settimeout`: one for
    both directions, set only when it changes), which CPython keeps as a deadline: it polls
    before each send and receive and, when a signal interrupts the wait, polls again for what
    is left (PEP 475), so a process with a periodic signal (a profiler, ``setitimer``, a
    watchdog) cannot stretch a wait; and ``sendall`` is bounded as a whole, however slowly the
    server reads. The kernel's timeouts (SO_RCVTIMEO, SO_SNDTIMEO) would save that poll, but a
    signal restarts them whole, and a send's with each piece the server takes: a 1 s deadline
    outlived a server answering after 6 s under a 0.2 s SIGALRM, and an 8 MiB prompt to a slow
    reader ran 54 s past a 2 s one."""

    __slots__ = (
        "__weakref__",  # (the pool's set of open connections is weak: `Pool`)
        "idle_since",
        "origin",
        "parser",
        "sock",
        "stale",
        "timeout",
    )

    def __init__(self, sock: socket.socket, origin: tuple[str, str, int], timeout: float) -> None:
        self.sock = sock
        self.origin = origin
        self.timeout = timeout  # the socket's, as set (math.inf: none)
        self.idle_since = 0.0
        self.stale = readability(sock)
        self.parser = ResponseParser()  # begun anew by each response (`receive_head`)

    def set_timeout(self, timeout: float) -> None:
        self.sock.settimeout(or_none(timeout))
        self.timeout = timeout

    def pace(self, read_timeout: float, deadline_at: float, doing: str) -> None:
        """Before a read: wait no longer than the read timeout, nor past the deadline (so a
        server trickling bytes cannot keep a call alive after it)."""
        timeout = min(read_timeout, remaining(deadline_at, doing))
        if timeout != self.timeout:
            self.set_timeout(timeout)

    # -- the phases of an exchange (httpcore's `_send_request_*`, `_receive_response_*`) ----

    def send_request(self, payload: bytes, timeout: float) -> OSError | None:
        """Write the request within ``timeout`` (a timeout raises); the send's error if the
        server broke it, else None. A server may answer early (413, 401) and close before
        reading the whole body, which breaks the send: its answer is what the caller needs, so
        the head is read all the same (`receive_head`; httpcore does the same)."""
        if timeout != self.timeout:  # (the call's deadline capped it)
            self.set_timeout(timeout)
        try:
            self.sock.sendall(payload)
        except TimeoutError as exc:
            raise io_error(exc, "sending the request") from exc
        except OSError as exc:
            return exc
        return None

    def receive_head(
        self, read_timeout: float, deadline_at: float | None, broken: OSError | None
    ) -> bytes:
        """Read until the response's head has arrived (`parser` then holds it); the body bytes
        that came with it. ``broken``: the send's error, which stands if no answer comes. A
        connection lost before any byte of the answer is a `StaleConnection`."""
        if broken is None:
            doing = "waiting for the response"
        else:
            doing = f"sending the request ({type(broken).__name__}: {broken})"
        if deadline_at is None and read_timeout != self.timeout:
            self.set_timeout(read_timeout)  # (with a deadline: `pace`, each read)
        parser = self.parser  # its last response was read to its end: `start` begins anew
        sock = self.sock
        received = False  # any byte of the response
        try:
            while True:
                if deadline_at is not None:
                    self.pace(read_timeout, deadline_at, doing)
                data = sock.recv(READ_SIZE)
                if not data:
                    if received:
                        raise errors.APIConnectionError(
                            "the server closed the connection in the response head"
                        )
                    raise StaleConnection("the server closed the connection without answering")
                if received:
                    first = parser.feed(data)
                else:
                    received = True
                    first = parser.start(data)
                if parser.headers is not None:
                    break
        except (OSError, BadResponse) as exc:
            raise io_error(exc, doing, answered=received) from exc
        if broken is not None:
            parser.keep_alive = False  # the server stopped reading the request mid-body
        return first

    def close(self) -> None:
        self.sock.close()

    def __del__(self) -> None:
        # Nothing holds the connection any more: its call ended by an exception raised between
        # two of its steps (see `Pool`), or a stream was dropped unread. Close it as the call
        # would have (no ResourceWarning: it is not the user's socket to close).
        sock = getattr(self, "sock", None)  # (None: the interrupt came before it was set)
        if sock is not None:
            sock.close()


def read_body(
    conn: SyncConnection, parser: ResponseParser, read_timeout: float, deadline_at: float | None
) -> bytes:
    """The body's phase: one read's worth of body (possibly none); `parser.complete` tells
    when the body has ended, also when it ends with the connection; a close before that end
    raises."""
    if deadline_at is not None:
        conn.pace(read_timeout, deadline_at, "reading the response")
    try:
        data = conn.sock.recv(READ_SIZE)
        if data:
            return parser.feed(data)
    except (OSError, BadResponse) as exc:
        raise io_error(exc, "reading the response") from exc
    if not parser.feed_eof():
        raise errors.APIConnectionError(
            "the server closed the connection before the response was complete"
        )
    return b""


def read_rest(
    pool: Pool[SyncConnection],
    conn: SyncConnection,
    first: bytes,
    max_bytes: int,
    read_timeout: float,
    deadline_at: float | None,
) -> RawResponse:
    """The whole response whose head has arrived with ``first``, the body bytes that came with
    it: the rest of the body read (`read_body`), counted and decoded (`Limiter`); the
    connection released, or closed if anything fails."""
    parser = conn.parser
    headers = parser.headers
    assert headers is not None
    limiter = Limiter(max_bytes, deadline_at)
    try:
        limiter.head(headers, parser.length)
        parts = [limiter.take(first)] if first else []
        while not parser.complete:
            piece = read_body(conn, parser, read_timeout, deadline_at)
            if piece:
                parts.append(limiter.take(piece))
        if limiter.decoder is not None:
            parts.append(limiter.finish())
    except BaseException:  # (lmclient's errors: the phase and the limiter map theirs)
        pool.discard(conn)
        raise
    status = parser.status
    pool.release(conn, parser.keep_alive)
    body = parts[0] if len(parts) == 1 else b"".join(parts)
    return raw_response((status, headers, body))


class SyncBody:
    """A streamed response's body: iterate for its checked chunks; `close` releases the
    connection (back to the pool once the body has ended, else closed). Made once the head
    has arrived, with the body bytes that came with it; a head the limits refuse closes the
    connection and raises."""

    __slots__ = ("_conn", "_first", "_limiter", "_parser", "_pool", "_read_timeout")

    def __init__(
        self,
        pool: Pool[SyncConnection],
        conn: SyncConnection,
        first: bytes,
        max_bytes: int,
        read_timeout: float,
        deadline_at: float | None,
    ) -> None:
        parser = conn.parser
        assert parser.headers is not None
        limiter = Limiter(max_bytes, deadline_at)
        try:
            limiter.head(parser.headers, parser.length)
        except BaseException:
            pool.discard(conn)
            raise
        self._pool = pool
        self._conn: SyncConnection | None = conn
        self._parser = parser
        self._limiter = limiter
        self._first = first
        self._read_timeout = read_timeout

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        conn = self._conn
        if conn is None:
            raise StopIteration
        try:
            if self._first:
                piece, self._first = self._limiter.take(self._first), b""
                if piece:
                    return piece
            parser = self._parser
            deadline_at = self._limiter.deadline_at
            while not parser.complete:
                piece = read_body(conn, parser, self._read_timeout, deadline_at)
                if piece:
                    piece = self._limiter.take(piece)
                    if piece:
                        return piece
            tail = self._limiter.finish()
        except BaseException:  # (lmclient's errors: the phase and the limiter map theirs)
            self.close()
            raise
        self._conn = None
        self._pool.release(conn, parser.keep_alive)
        if tail:
            return tail
        raise StopIteration

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self._pool.discard(conn)


def connect(
    target: Target, timeout: float, uds: str | None, tls: ssl.SSLContext | None
) -> SyncConnection:
    """A new connection to ``target``'s host, or to the Unix socket ``uds``; with TLS when
    ``tls`` is given."""
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
            if tls is not None:
                sock = tls.wrap_socket(sock, server_hostname=target.host)
            return SyncConnection(sock, target.origin, timeout)
        except BaseException:
            sock.close()
            raise
    except OSError as exc:
        where = f"{target.host}:{target.port}" if uds is None else f"the Unix socket {uds}"
        raise io_error(exc, f"connecting to {where}") from exc
