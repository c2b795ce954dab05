"""Run the same calls in a parent and its forked child at once, and collect what each got.

`calls_after_fork` forks the calling process, opens a gate that starts both sides together,
runs ``side(label)`` in each, and returns ``(parent's result, child's result)``: each a list of
what went wrong (an answer to another prompt, or an error), which the tests require empty. The
child reports through a pipe and leaves with ``os._exit`` (no pytest teardown in it); a child
that does not report within `CHILD_WITHIN` is killed by its PID and reported as hung."""

from __future__ import annotations

import os
import select
import signal
import time
import warnings
from collections.abc import Callable

import msgspec

CHILD_WITHIN = 120.0  # seconds: a generous bound that catches a hang


def calls_after_fork(side: Callable[[str], list[str]]) -> tuple[list[str], list[str]]:
    gate_r, gate_w = os.pipe()
    out_r, out_w = os.pipe()
    with warnings.catch_warnings():  # 3.12+ warns of forking a process with threads
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            os.close(gate_w)
            os.close(out_r)
            os.read(gate_r, 1)
            report = side("child")
            code = 0
        except BaseException as exc:  # reported, never raised into pytest's copy
            report = [f"the child raised {type(exc).__name__}: {exc}"]
        finally:
            try:
                data = msgspec.json.encode(report)
                view = memoryview(data)
                while view:
                    view = view[os.write(out_w, view) :]
            finally:
                os._exit(code)
    os.close(gate_r)
    os.close(out_w)
    try:
        os.write(gate_w, b"g")
        parent = side("parent")
        child = _read_report(out_r, pid)
    finally:
        os.close(gate_w)
        os.close(out_r)
        _reap(pid)
    return parent, child


def _read_report(fd: int, pid: int) -> list[str]:
    chunks = []
    until = time.monotonic() + CHILD_WITHIN
    while True:
        left = until - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            os.kill(pid, signal.SIGKILL)
            return [f"the child did not report within {CHILD_WITHIN} s"]
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    if not chunks:
        return ["the child died without a report"]
    return list(msgspec.json.decode(b"".join(chunks)))


def _reap(pid: int) -> None:
    until = time.monotonic() + CHILD_WITHIN
    while time.monotonic() < until:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return
        select.select([], [], [], 0.05)  # polling a child's exit, not synchronising with it
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
