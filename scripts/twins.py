#!/usr/bin/env python3
"""Keep `AsyncClient` and `Client` in step by a check, not by care (after httpcore's
``scripts/unasync.py --check``).

The async shell is the source: its text is rewritten the way a sync twin would read (``async
def`` → ``def``, ``await`` dropped, ``AsyncStream`` → ``Stream``, ...), formatted by ruff, and
compared with the sync shell. Where the two differ on purpose (a thread pool against asyncio
tasks, a lock against an asyncio lock), the difference is written down in ``scripts/twins.diff``;
any other difference — a change made to one twin and not the other — fails the check.

    python scripts/twins.py            # check (make lint)
    python scripts/twins.py --write    # accept the current differences, after reading them
"""

from __future__ import annotations

import difflib
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXPECTED = ROOT / "scripts" / "twins.diff"
PAIRS = [("lmclient/_async_client.py", "lmclient/_client.py")]
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


def unasync(source: str) -> str:
    for pattern, replacement in UNASYNC:
        source = re.sub(pattern, replacement, source)
    source = re.sub(r"\((self\.\w+\([^()]*\))\)", r"\1", source)  # `(await x()).y` → `x().y`
    return formatted(source)


def difference() -> str:
    out: list[str] = []
    for source, twin in PAIRS:
        expected = unasync((ROOT / source).read_text()).splitlines(keepends=True)
        actual = formatted((ROOT / twin).read_text()).splitlines(keepends=True)
        out += difflib.unified_diff(expected, actual, f"{source} (unasync)", twin, n=1)
    return "".join(out)


def main() -> int:
    diff = difference()
    if "--write" in sys.argv[1:]:
        EXPECTED.write_text(diff)
        print(f"twins: wrote {EXPECTED.relative_to(ROOT)} ({diff.count(chr(10))} lines)")
        return 0
    if diff == EXPECTED.read_text():
        print("twins: Client and AsyncClient differ only where scripts/twins.diff says")
        return 0
    print("twins: Client and AsyncClient have drifted apart. The difference now:\n")
    print(diff)
    print(
        "If every difference above is deliberate, accept it with "
        "`python scripts/twins.py --write`; otherwise make the same change in both twins."
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
