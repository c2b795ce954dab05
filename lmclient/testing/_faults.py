"""Faults: scripted misbehaviour of the server, queued with the replies.

A fault applies to one generation request (chat or completions) and shapes the answer that
request would otherwise get: it delays it, pauses it, cuts it, corrupts it, or replaces it.
:data:`FAULTS` lists the kinds; the fault table of docs/testing.md is checked against it.
"""

from __future__ import annotations

import threading
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Literal

import msgspec

from ._recording import RecordedRequest
from ._runaway import RunawayKind
from ._script import When, matches
from ._wire import FakeResponse, Pause, StreamDropped, error_event

__all__ = [
    "FAULTS",
    "MARK",
    "STREAM_ONLY",
    "Fault",
    "FaultKind",
    "seconds_text",
    "shape",
    "status_body",
]

FaultKind = Literal[
    "status",
    "delay",
    "stall",
    "disconnect_start",
    "disconnect_headers",
    "disconnect_body",
    "disconnect_stream",
    "invalid_json",
    "invalid_utf8",
    "truncate",
    "stream_error",
    "endless",
    "oversize",
    "runaway",
]
FAULTS: tuple[FaultKind, ...] = typing.get_args(FaultKind)
"""Every fault kind, in the order of the fault table in docs/testing.md."""

# Kinds that only make sense on an SSE stream: they wait for a streaming request.
STREAM_ONLY: frozenset[FaultKind] = frozenset(
    {"disconnect_stream", "truncate", "stream_error", "endless"}
)

# A private-use character put into the answer text, then replaced in the encoded bytes: the
# way to place invalid UTF-8 or a huge padding exactly inside the text a client decodes.
MARK = "\ue000"
_MARK_BYTES = MARK.encode()
_PAD_PIECE = 64 * 1024


@dataclass(frozen=True)
class Fault:
    """A scripted fault, as queued by :meth:`FakeLLM.fail`, :meth:`FakeLLM.stall`, ...

    Only the fields of its ``kind`` are used: ``status``/``headers``/``body`` (status),
    ``seconds`` (delay, stall), ``after`` (the ``data:`` events sent before a stream fault),
    ``size``/``chunked`` (oversize), ``every`` and ``keepalive`` (endless), ``message``
    (stream_error, whose event code is ``status``), ``runaway`` and ``span`` (runaway).

    ``abandoned`` is set when a client leaves one of its runaway streams before the stream
    ended (or the server stops): the fake then stopped generating for it, as vLLM and
    llama.cpp abort a request whose client disconnects. A test waits on it.
    """

    kind: FaultKind
    times: int | None = 1
    when: When = None
    status: int = 500
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    seconds: float = 0.0
    after: int = 2
    size: int = 0
    chunked: bool = False
    every: float = 0.0
    keepalive: bool = False
    message: str = "fake mid-stream error"
    runaway: RunawayKind = "repeat"
    span: str | None = None
    abandoned: threading.Event = field(default_factory=threading.Event, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in FAULTS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {FAULTS}")
        if self.seconds < 0 or self.every < 0 or self.after < 0 or self.size < 0:
            raise ValueError("seconds, every, after and size cannot be negative")

    def matches(self, request: RecordedRequest) -> bool:
        """``when`` holds, and a stream-only fault waits for a streaming request."""
        if self.kind in STREAM_ONLY and not request.stream:
            return False
        return matches(self.when, request)

    def response(self) -> FakeResponse:
        """The answer of a ``status`` fault."""
        return FakeResponse(self.status, list(self.headers), self.body)


def shape(fault: Fault, response: FakeResponse) -> FakeResponse:
    """The answer ``response`` disturbed by ``fault`` (not ``status`` nor ``endless``, which
    replace the answer). For ``invalid_utf8`` and ``oversize`` the answer's first text starts
    with (oversize: is) :data:`MARK`."""
    kind = fault.kind
    if kind == "delay":
        return replace(response, delay=fault.seconds)
    if kind == "disconnect_start":
        return replace(response, cut="start")
    if kind == "disconnect_headers":
        return replace(response, cut="headers")
    if response.chunks is not None:
        return replace(response, chunks=_disturb_stream(fault, response.chunks))
    body = response.body
    half = len(body) // 2
    if kind == "stall":
        return _raw(response, [body[:half], Pause(fault.seconds), body[half:]], len(body))
    if kind == "disconnect_body":
        return _raw(response, _then_drop([body[:half]]), len(body))
    if kind == "invalid_json":
        return replace(response, body=body[:-1])
    if kind == "invalid_utf8":
        return replace(response, body=body.replace(_MARK_BYTES, b"\xff", 1))
    if kind == "oversize":
        prefix, suffix = body.split(_MARK_BYTES, 1)
        padding = max(0, fault.size - len(prefix) - len(suffix))
        chunks = _padded(prefix, padding, suffix)
        return _raw(
            response, chunks, None if fault.chunked else len(prefix) + padding + len(suffix)
        )
    raise AssertionError(f"shape() does not take {kind!r} faults")  # pragma: no cover


def _raw(
    response: FakeResponse, chunks: typing.Iterable[bytes | Pause], length: int | None
) -> FakeResponse:
    return replace(response, body=b"", chunks=iter(chunks), length=length)


def _then_drop(chunks: list[bytes]) -> Iterator[bytes]:
    yield from chunks
    raise StreamDropped


def _padded(prefix: bytes, padding: int, suffix: bytes) -> Iterator[bytes]:
    """``prefix``, ``padding`` bytes of ``x`` in 64 KiB pieces, ``suffix``: never all in memory."""
    yield prefix
    piece = b"x" * _PAD_PIECE
    for start in range(0, padding, _PAD_PIECE):
        yield piece[: min(_PAD_PIECE, padding - start)]
    yield suffix


def _disturb_stream(fault: Fault, chunks: Iterator[bytes | Pause]) -> Iterator[bytes | Pause]:
    """The SSE chunks with the fault applied after ``fault.after`` ``data:`` events, or before
    ``[DONE]`` if the stream is shorter, so the fault always happens."""
    kind = fault.kind
    sent = 0
    done = False
    try:
        for chunk in chunks:
            if isinstance(chunk, Pause):
                yield chunk
                continue
            if kind == "invalid_utf8":
                chunk = chunk.replace(_MARK_BYTES, b"\xff")
            elif kind == "oversize" and _MARK_BYTES in chunk:
                yield from _oversized_events(chunk, fault.size)
                continue
            is_data = chunk.startswith(b"data: ")
            if is_data and not done and (sent == fault.after or chunk == b"data: [DONE]\n\n"):
                done = True
                if kind == "stall":
                    yield Pause(fault.seconds)
                elif kind == "truncate":
                    return
                elif kind == "stream_error":
                    yield b"data: " + error_event(fault.message, fault.status) + b"\n\n"
                    yield b"data: [DONE]\n\n"
                    return
                elif kind == "disconnect_stream":
                    raise StreamDropped
                elif kind == "disconnect_body":
                    yield chunk[: len(chunk) // 2]
                    raise StreamDropped
                elif kind == "invalid_json":
                    chunk = chunk.removesuffix(b"\n\n")[:-1] + b"\n\n"
            yield chunk
            sent += is_data
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()


def _oversized_events(event: bytes, size: int) -> Iterator[bytes]:
    """Copies of ``event`` with its :data:`MARK` text replaced by 64 KiB of ``x``, until the
    events add up to ``size`` bytes."""
    prefix, suffix = event.split(_MARK_BYTES, 1)
    sent = 0
    while sent < size:
        piece = prefix + b"x" * _PAD_PIECE + suffix
        sent += len(piece)
        yield piece


def status_body(status: int, message: str | None) -> bytes:
    """A vLLM-style error envelope for ``status``."""
    text = message or f"FakeLLM fault: HTTP {status}"
    return msgspec.json.encode(
        {"error": {"message": text, "type": "error", "param": None, "code": status}}
    )


def seconds_text(seconds: float) -> str:
    """Seconds as a ``Retry-After`` header writes them: ``2``, not ``2.0``."""
    return str(int(seconds)) if float(seconds).is_integer() else str(seconds)
