"""The progress bar draws only on a terminal and counts failures."""

from __future__ import annotations

import io

import lmclient


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_draws_on_a_terminal_and_counts_failures() -> None:
    screen = FakeTerminal()
    with lmclient.Progress(4, label="people", stream=screen) as progress:
        for i, value in enumerate(["a", lmclient.LMClientError("x"), "b", "c"]):
            progress(i, value)
    assert (progress.done, progress.failed) == (4, 1)
    last = screen.getvalue().rstrip("\n").split("\r")[-1]
    assert last.startswith("people [" + "#" * 30 + "] 4/4  1 failed")
    assert screen.getvalue().endswith("\n")


def test_silent_when_not_a_terminal() -> None:
    pipe = io.StringIO()
    with lmclient.Progress(2, stream=pipe) as progress:
        progress(0, "a")
        progress(1, "b")
    assert pipe.getvalue() == "" and progress.done == 2
