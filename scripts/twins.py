#!/usr/bin/env python3
"""Keep each sync module in step with its async twin by a check, not by care (after httpcore's
``scripts/unasync.py --check``): `Client` with `AsyncClient`, `SyncTransport` with
`AsyncTransport`.

The async module is the source: its text is rewritten the way a sync twin would read (``async
def`` → ``def``, ``await`` dropped, ``AsyncStream`` → ``Stream``, ...), formatted by ruff, and
compared with the sync module. Where the two differ on purpose (a thread pool against asyncio
tasks, a blocking socket against an asyncio protocol), the difference is written down in the
pair's diff file (``scripts/twins.diff``, ``scripts/twins-transports.diff``); any other
difference — a change made to one twin and not the other — fails the check.

    python scripts/twins.py            # check (make lint)
    python scripts/twins.py --write    # accept the current differences, after reading them
"""

from __future__ import annotations

import difflib
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
UNASYNC = [
    (r"\basync def\b", "def"),
    (r"\bawait ", ""),
    (r"\basync with\b", "with"),
    (r"\basync for\b", "for"),
    (r"\bAsyncClient\b", "Client"),
    (r"\bAsyncStream\b", "Stream"),
    (r"\bAsyncOpened\b", "Opened"),
    (r"\bAsyncTransport\b", "SyncTransport"),
    (r"\bAsyncIterator\b", "Iterator"),
    (r"\baclose\b", "close"),
    (r"\baread\b", "read"),
    (r"__aenter__", "__enter__"),
    (r"__aexit__", "__exit__"),
    (r"\basyncio\.sleep\b", "time.sleep"),
    (r"\basync_client\b", "client"),
    (r"\b_transports\.aio\b", "_transports.sync"),
    (r"\bAsyncScoring\b", "Scoring"),
    (r"\b_scoring_client_async\b", "_scoring_client"),
]
# The transports' own names, on top of the clients'.
UNASYNC_TRANSPORTS = [
    *UNASYNC,
    (r"\b_ASYNC_", "_SYNC_"),
    (r"\b_transports\.protocol\b", "_transports.sockets"),
    (r"\bAsyncConnection\b", "SyncConnection"),
    (r"\bAsyncBody\b", "SyncBody"),
    (r"\b_ClosedAsyncTransport\b", "_ClosedSyncTransport"),
    (r"\bAsyncStreamResponse\b", "StreamResponse"),
    (r"\bAsyncHTTPTransport\b", "HTTPTransport"),
    (r"\baraw_chunks\b", "raw_chunks"),
    (r"\brespx_watches\(True\)", "respx_watches(False)"),
    (r"\bStopAsyncIteration\b", "StopIteration"),
    (r"__aiter__", "__iter__"),
    (r"__anext__", "__next__"),
]


class Pair(NamedTuple):
    source: str  # the async module
    twin: str  # the sync module
    expected: str  # the deliberate differences, as a unified diff
    rules: list[tuple[str, str]]  # async name → sync name


PAIRS = [
    Pair("lmclient/_async_client.py", "lmclient/_client.py", "scripts/twins.diff", UNASYNC),
    Pair(
        "lmclient/_scoring_client_async.py",
        "lmclient/_scoring_client.py",
        "scripts/twins-scoring.diff",
        UNASYNC,
    ),
    Pair(
        "lmclient/_transports/aio.py",
        "lmclient/_transports/sync.py",
        "scripts/twins-transports.diff",
        UNASYNC_TRANSPORTS,
    ),
]


def formatted(source: str) -> str:
    """``source`` as ruff formats it (the rewrite leaves lines a formatter would join)."""
    ruff = Path(sys.executable).parent / "ruff"
    done = subprocess.run(
        [str(ruff), "format", "--stdin-filename", "twin.py", "-"],
        input=source,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return done.stdout


def unasync(source: str, rules: list[tuple[str, str]] = UNASYNC) -> str:
    for pattern, replacement in rules:
        source = re.sub(pattern, replacement, source)
    source = re.sub(r"\((self\.\w+\([^()]*\))\)", r"\1", source)  # `(await x()).y` → `x().y`
    return formatted(source)


def difference(pair: Pair, root: Path = ROOT) -> str:
    """How the sync twin differs from the async source rewritten: what the diff file holds."""
    expected = unasync((root / pair.source).read_text(), pair.rules).splitlines(keepends=True)
    actual = formatted((root / pair.twin).read_text()).splitlines(keepends=True)
    return "".join(
        difflib.unified_diff(expected, actual, f"{pair.source} (unasync)", pair.twin, n=1)
    )


def _unnumbered(diff: str) -> list[str]:
    """A diff without its hunks' line numbers: an edit elsewhere in the twins (an import added to
    both) moves the hunks without changing what differs."""
    return [re.sub(r"^@@ .* @@", "@@", line) for line in diff.splitlines(keepends=True)]


def drifted(root: Path = ROOT) -> list[tuple[Pair, str]]:
    """The pairs whose difference is not their diff file's, each with how it changed."""
    out = []
    for pair in PAIRS:
        now = _unnumbered(difference(pair, root))
        recorded = _unnumbered((root / pair.expected).read_text())
        if now != recorded:
            change = difflib.unified_diff(recorded, now, str(pair.expected), "now", n=2)
            out.append((pair, "".join(change)))
    return out


def main() -> int:
    if "--write" in sys.argv[1:]:
        for pair in PAIRS:
            diff = difference(pair)
            (ROOT / pair.expected).write_text(diff)
            print(f"twins: wrote {pair.expected} ({diff.count(chr(10))} lines)")
        return 0
    apart = drifted()
    if not apart:
        print("twins: each sync module differs from its async twin only where its diff file says")
        return 0
    for pair, diff in apart:
        print(
            f"twins: {pair.twin} and {pair.source} have drifted apart. "
            "How their difference changed:\n"
        )
        print(diff)
    print(
        "If every difference above is deliberate, accept it with "
        "`python scripts/twins.py --write`; otherwise make the same change in both twins."
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
