"""The order in which requests consume scripted replies and faults.

Replies and faults share one queue. Counted entries (``times=k``) are consumed first, oldest
first, so a scripted sequence plays out in the order it was written; sticky entries
(``times=None``) answer every request no counted entry takes, and the newest matching one wins,
so a later ``reply(...)`` replaces an earlier default.
"""

from __future__ import annotations

import threading

from ._faults import Fault
from ._recording import RecordedRequest
from ._script import Reply

__all__ = ["Script"]


class Script:
    """The thread-safe queue of replies and faults (see the module docstring for the order)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counted: list[tuple[Reply | Fault, list[int]]] = []  # entry, [remaining uses]
        self._sticky: list[Reply | Fault] = []

    def add(self, entry: Reply | Fault) -> None:
        if entry.times is not None and entry.times < 1:
            raise ValueError("times must be None (every request) or at least 1")
        with self._lock:
            if entry.times is None:
                self._sticky.append(entry)
            else:
                self._counted.append((entry, [entry.times]))

    def take(self, request: RecordedRequest) -> Reply | Fault | None:
        """The entry that answers ``request``, reply or fault; a counted one is used up."""
        return self._find(request, replies_only=False, consume=True)

    def reply_for(self, request: RecordedRequest, *, consume: bool = True) -> Reply | None:
        """The reply that answers ``request``, faults skipped; ``consume=False`` only looks."""
        found = self._find(request, replies_only=True, consume=consume)
        assert found is None or isinstance(found, Reply)
        return found

    def _find(
        self, request: RecordedRequest, *, replies_only: bool, consume: bool
    ) -> Reply | Fault | None:
        with self._lock:
            for index, (entry, remaining) in enumerate(self._counted):
                if (isinstance(entry, Reply) or not replies_only) and entry.matches(request):
                    if consume:
                        remaining[0] -= 1
                        if remaining[0] == 0:
                            del self._counted[index]
                    return entry
            for entry in reversed(self._sticky):
                if (isinstance(entry, Reply) or not replies_only) and entry.matches(request):
                    return entry
        return None

    @property
    def pending(self) -> int:
        """Uses left of the counted entries (sticky ones never run out)."""
        with self._lock:
            return sum(remaining[0] for _, remaining in self._counted)

    def clear(self) -> None:
        with self._lock:
            self._counted.clear()
            self._sticky.clear()
