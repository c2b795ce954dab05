"""Is `Stream.items()` linear in the size of the streamed array (issue 3), and in the length of
one element (issue 37)?

Streams JSON arrays of 256 KiB to 4 MiB through a real `Stream` (SSE decoding, delta
accumulation, the array splitter, per-item validation, final validation), fed from memory in
16-character deltas as a server would send them, and prints time per size: first arrays of many
small records, then arrays of one string of that size (an element that stays open for the whole
stream: the splitter once copied it at every delta, 48 s for 2 MiB). Linear means each doubling
of the bytes roughly doubles the time: the ratio column stays near 2, not 4.

    .venv/bin/python benchmarks/items_linear.py
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from lmclient import _core, _stream_state
from lmclient._stream import Stream
from lmclient._transports.common import StreamResponse


class Record(msgspec.Struct):
    id: int
    name: str
    email: str
    score: float
    active: bool
    tags: list[str]


def records(size: int) -> list[dict[str, Any]]:
    """Many small records, ``size`` characters of JSON in all."""
    record = {
        "id": 1,
        "name": "Ada Lovelace",
        "email": "ada@example.com",
        "score": 0.5,
        "active": True,
        "tags": ["a", "b"],
    }
    one = len(json.dumps(record)) + 2
    return [dict(record, id=i) for i in range(max(1, size // one))]


def one_string(size: int) -> list[str]:
    """One element of ``size`` characters."""
    return ["x" * size]


def sse_bytes(items: list[Any], delta_chars: int = 16) -> bytes:
    text = json.dumps(items)
    head = b'data: {"choices":[{"index":0,"delta":{"content":'
    tail = b'},"finish_reason":null}]}\n\n'
    events = [
        head + json.dumps(text[i : i + delta_chars]).encode() + tail
        for i in range(0, len(text), delta_chars)
    ]
    events.append(
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    )
    return b"".join(events)


def _nothing() -> None:
    pass


def consume(raw: bytes, output_type: Any, expected: int) -> float:
    base = _core.ClientCore("http://bench/v1", "m", dialect="vllm", max_response_bytes=1 << 30)
    call = base.prepare("stream", "Q", output_type, "chat", {}, reading="stream")

    def chunks() -> Iterator[bytes]:  # the network's 16 KiB reads
        for i in range(0, len(raw), 16384):
            yield raw[i : i + 16384]

    stream: Stream[Any] = Stream(
        lambda: (_stream_state.StreamState(call), StreamResponse(200, {}, chunks(), _nothing))
    )
    start = time.perf_counter()
    with stream:
        count = sum(1 for _ in stream.items())
    elapsed = time.perf_counter() - start
    assert count == expected == len(stream.value)
    return elapsed


CASES: list[tuple[str, Callable[[int], list[Any]], Any]] = [
    ("many records", records, list[Record]),
    ("one string", one_string, list[str]),
]


def main() -> None:
    for name, build, output_type in CASES:
        print(f"{name}:")
        print(f"{'array':>8} {'SSE bytes':>10} {'items':>7} {'seconds':>8} {'ratio':>6}")
        previous = None
        for kib in (256, 512, 1024, 2048, 4096):
            items = build(kib * 1024)
            raw = sse_bytes(items)
            best = min(consume(raw, output_type, len(items)) for _ in range(3))
            ratio = "" if previous is None else f"{best / previous:.2f}"
            print(f"{kib:>5} KiB {len(raw):>10} {len(items):>7} {best:>8.3f} {ratio:>6}")
            previous = best


if __name__ == "__main__":
    main()
