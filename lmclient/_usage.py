"""`UsageTotal`: the usage of many calls, summed as they finish (``generate_many(usage=...)``)."""

from __future__ import annotations

from typing import Any

from ._response import Response
from ._wire.protocol import Usage, add_usage

__all__ = ["UsageTotal"]


class UsageTotal:
    """A running sum of the tokens many calls used.

    Pass one as ``usage=`` to `Client.generate_many` / `complete_many` (or their async twins):
    each item is added as it finishes, in the caller's thread or event loop, failed items
    included — a `ValidationError` (an invalid answer after the last re-ask, a truncated
    one) carries the usage of its answers. One object may gather several batches; `add` also
    takes a `Response` of any other call. Not locked: add from one thread at a time.

    ``usage`` is the sum (``None`` until an item reported some; each count summed over the
    items that state it, see `Usage`), ``calls`` the items added, ``unreported`` those among
    them that reported none (a server that sends no usage, an error status): their tokens are
    not in the sum.
    """

    __slots__ = ("calls", "unreported", "usage")

    def __init__(self) -> None:
        self.usage: Usage | None = None
        self.calls = 0
        self.unreported = 0

    def add(self, outcome: Any) -> None:
        """Add one call's outcome: a `Response` (its ``total_usage``), an exception (its
        ``total_usage``, if it has one), a `Usage`, or ``None`` (a call that reported none)."""
        if isinstance(outcome, (Response, BaseException)):
            spent = getattr(outcome, "total_usage", None)
        elif outcome is None or isinstance(outcome, Usage):
            spent = outcome
        else:
            raise TypeError(
                f"UsageTotal.add() takes a Response, an exception, a Usage or None, not "
                f"{type(outcome).__name__}"
            )
        self.calls += 1
        if spent is None:
            self.unreported += 1
        else:
            self.usage = add_usage(self.usage, spent)

    def __repr__(self) -> str:
        return f"UsageTotal(usage={self.usage!r}, calls={self.calls}, unreported={self.unreported})"
