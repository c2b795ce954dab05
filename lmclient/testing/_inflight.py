"""How many requests a served fake is handling at once, and the most it has handled.

A request counts from the moment its body has been read until its response is complete on the
wire — not until the handler's thread gets round to returning. A client that sends its next
request as soon as it has read a response (``concurrency=1``) may otherwise meet a server that
still counts the previous one, and a test asserting one request at a time fails at random under
load. So the server ends the count itself, just before the write that completes a response
(`Counted.end`); leaving the scope ends it too, for the answers that never complete (cut,
dropped)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Counted", "InFlight"]


class Counted:
    """One request's place in the count: `end` removes it, once."""

    __slots__ = ("_ended", "_in_flight")

    def __init__(self, in_flight: InFlight) -> None:
        self._in_flight = in_flight
        self._ended = False

    def end(self) -> None:
        with self._in_flight.lock:
            if not self._ended:
                self._ended = True
                self._in_flight.now -= 1


class InFlight:
    """The count of requests being handled (`now`) and its peak since the last `reset`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0

    @contextmanager
    def scope(self) -> Iterator[Counted]:
        """Count one request while the block runs, or until it ends the count itself."""
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        counted = Counted(self)
        try:
            yield counted
        finally:
            counted.end()

    def reset(self) -> None:
        """Start a new peak from the requests being handled now."""
        with self.lock:
            self.peak = self.now
