"""A call that ends by any exception leaves no connection checked out: one raised from a signal
handler, ``KeyboardInterrupt``, ``GeneratorExit`` (a stream closed mid-iteration). Issue 26:
13 connections stayed checked out after 5,912 interruptions from a periodic ``SIGALRM``.

Two ways, both against the fake over real loopback sockets:

* every point of a call: a trace function counts the lines lmclient runs and, at line ``n``,
  sends this thread a signal whose handler raises; ``n`` goes from 1 to the call's last line,
  so the exception lands once at each step of the call (deterministic: the same call takes
  the same steps), for a whole response, a stream read to its end, and a stream left after
  its first delta (the generator closed: ``GeneratorExit``);
* where a call blocks: the server holds the answer (before its head, mid-body, mid-stream)
  and the signal comes while the call waits for it.

After each, the pool has no connection in use (after the cycle collector has run where the
connection was dropped inside a stream, which its generator keeps in a reference cycle), and
the client's next call succeeds."""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import pytest

import lmclient
from lmclient.testing import FakeLLM, RecordedRequest

pytestmark = pytest.mark.skipif(
    not hasattr(signal, "pthread_kill"), reason="signals to a thread: POSIX"
)

PACKAGE = os.path.dirname(lmclient.__file__)
FAKE = os.path.join(PACKAGE, "testing")
MAX_LINES = 5000  # a call runs far fewer lmclient lines; the sweep ends at its last one


class Interrupt(Exception):
    """What the signal's handler raises."""


@pytest.fixture
def handler() -> Iterator[type[BaseException]]:
    raised: list[type[BaseException]] = [Interrupt]

    def on_signal(signum: int, frame: FrameType | None) -> None:
        raise raised[0]

    previous = signal.signal(signal.SIGUSR1, on_signal)
    try:
        yield Interrupt
    finally:
        signal.signal(signal.SIGUSR1, previous)


def interrupt_main_thread() -> None:
    signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGUSR1)


def in_use(client: lmclient.Client) -> int:
    return len(client._transport._pool.in_use)


def at_line(n: int, call: Callable[[], object]) -> tuple[int, bool]:
    """Run ``call`` with the signal sent at its ``n``-th line of lmclient (the fake's own code
    aside); returns how many lines it ran and whether it was interrupted."""
    lines = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal lines
        if event == "line":
            lines += 1
            if lines == n:
                interrupt_main_thread()  # the handler raises here, in the traced frame
        return local

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        name = frame.f_code.co_filename
        if frame.f_code.co_name == "__del__":  # an exception there is ignored, by Python
            return None
        return local if name.startswith(PACKAGE) and not name.startswith(FAKE) else None

    interrupted = False
    previous = sys.gettrace()  # coverage's tracer, under `make test`: put back, not dropped
    sys.settrace(calls)
    try:
        try:
            call()
        finally:
            sys.settrace(previous)
    except Interrupt:
        interrupted = True
    return lines, interrupted


def sweep(client: lmclient.Client, call: Callable[[], object]) -> int:
    """Interrupt ``call`` at each of its lines in turn; returns how many times it was."""
    interruptions = 0
    for n in range(1, MAX_LINES):
        lines, interrupted = at_line(n, call)
        interruptions += interrupted
        if in_use(client):  # held by a reference cycle (a stream and its generator) until
            gc.collect()  # the cycle collector runs, which would close it later anyway
        assert in_use(client) == 0, f"a connection left checked out, interrupted at line {n}"
        if lines < n:
            return interruptions
    pytest.fail(f"a call ran more than {MAX_LINES} lines")


@pytest.fixture
def fake_url() -> Iterator[str]:
    with FakeLLM().serve() as url:
        yield url


def test_interrupted_at_every_line(handler: type[BaseException], fake_url: str) -> None:
    with lmclient.Client(fake_url, "m", dialect="vllm", max_retries=0) as client:
        assert client.generate("warm") == "This is a fake reply."

        def whole() -> None:
            client.generate("hi")

        def stream() -> None:
            with client.stream("hi") as deltas:
                for _ in deltas:
                    pass

        def first_delta() -> None:
            with client.stream("hello there") as deltas:
                for _ in deltas:
                    break  # closes the generator mid-stream: GeneratorExit inside it

        counts = [sweep(client, call) for call in (whole, stream, first_delta)]
        assert min(counts) >= 100, counts  # each call has that many steps at least
        assert client.generate("after") == "This is a fake reply."
        assert in_use(client) == 0


@pytest.mark.parametrize("raised", [Interrupt, KeyboardInterrupt])
@pytest.mark.parametrize("where", ["head", "body", "stream"])
def test_interrupted_while_waiting(
    handler: type[BaseException], where: str, raised: type[BaseException]
) -> None:
    """The server holds its answer (before its head, or mid-body, mid-stream); the signal is
    sent once the request has arrived, while the call waits for the answer. 50 times each.

    The signal is sent again every 10 ms until the call has ended: Python drops an exception
    raised in a finalizer (a `__del__`, a collected generator's close), so a handler that runs
    inside one, which a garbage collection may start at any line, raises into nothing. A late
    signal, once the call has ended, raises nothing (``calling`` is clear)."""
    arrived = threading.Event()
    ended = threading.Event()
    calling = threading.Event()

    def on_request(request: RecordedRequest) -> None:
        if calling.is_set() and request.endpoint == "chat":
            arrived.set()

    def pump() -> None:
        while not ended.is_set():
            if arrived.wait(0.01) and not ended.is_set():
                interrupt_main_thread()
                ended.wait(0.01)

    fake = FakeLLM(on_request=on_request)
    with fake.serve() as url, lmclient.Client(url, "m", dialect="vllm", max_retries=0) as client:
        assert client.generate("warm") == "This is a fake reply."
        previous = signal.getsignal(signal.SIGUSR1)

        def on_signal(signum: int, frame: FrameType | None) -> None:
            if calling.is_set():
                raise raised

        signal.signal(signal.SIGUSR1, on_signal)
        try:
            for _ in range(50):
                if where == "head":
                    fake.delay(float("inf"))
                else:
                    fake.stall(after=1)
                arrived.clear()
                ended.clear()
                pumping = threading.Thread(target=pump, name="interrupts")
                pumping.start()
                try:
                    with pytest.raises(raised):
                        calling.set()
                        try:
                            if where == "stream":
                                with client.stream("a stream of words to read") as deltas:
                                    for _ in deltas:
                                        pass
                            else:
                                client.generate("hi")
                        finally:
                            calling.clear()
                finally:
                    ended.set()
                    pumping.join(10)
                assert arrived.is_set()  # interrupted while waiting, not before it asked
                assert in_use(client) == 0
        finally:
            signal.signal(signal.SIGUSR1, previous)
        fake.reset()
        assert client.generate("after") == "This is a fake reply."
        assert in_use(client) == 0
