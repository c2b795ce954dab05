"""A small progress bar for long batches, drawn on stderr only when stderr is a terminal.

Pass it as ``on_result`` to `generate_many` (it counts values and failures)::

    with lmclient.Progress(len(prompts)) as progress:
        values = client.generate_many(prompts, Person, on_result=progress)
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

__all__ = ["Progress"]

_WIDTH = 30
_REDRAW_EVERY = 0.1  # seconds: fast enough to look alive, slow enough to cost nothing


class Progress:
    """Counts finished items; draws ``[####----]  37/100  2 failed  3.1/s`` on one line."""

    def __init__(self, total: int, *, label: str = "", stream: TextIO | None = None) -> None:
        self.total = total
        self.label = label
        self.done = 0
        self.failed = 0
        self._stream = sys.stderr if stream is None else stream
        self._live = self._stream.isatty()
        self._started = time.monotonic()
        self._drawn = 0.0

    def __call__(self, index: int, value: Any) -> None:
        self.done += 1
        self.failed += isinstance(value, BaseException)
        now = time.monotonic()
        if self._live and (now - self._drawn >= _REDRAW_EVERY or self.done == self.total):
            self._drawn = now
            self._stream.write("\r" + self.line(now))
            self._stream.flush()

    def line(self, now: float | None = None) -> str:
        elapsed = max((now or time.monotonic()) - self._started, 1e-9)
        filled = _WIDTH * self.done // max(self.total, 1)
        failed = f"  {self.failed} failed" if self.failed else ""
        label = f"{self.label} " if self.label else ""
        return (
            f"{label}[{'#' * filled}{'-' * (_WIDTH - filled)}] "
            f"{self.done}/{self.total}{failed}  {self.done / elapsed:.1f}/s"
        )

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._live and self.done:
            self._stream.write("\n")
            self._stream.flush()
