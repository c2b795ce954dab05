"""`UsageTotal`: the usage of many calls, summed as they finish (``generate_many(usage=...)``),
and token budgets: `check_budget`, and `Many`, one batch's outcomes and the budgets it keeps.

A budget counts what the server reports (prompt and completion tokens), checked before each
re-ask and each new batch item, never inside an answer: no server can be told to stop at a
count summed over several requests, so the answer in flight when a budget runs out is counted
whole, and the error says by how much it passed. An answer without usage leaves the budget
uncountable: it is taken as spent (fail closed), never as free; so is a call one of whose
answers had none (`Response.unmetered`), and an answer that could not be read (a
`ProtocolError`: a count below 0 is one, which would otherwise take tokens off the budget).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from . import errors
from ._response import Response
from ._wire.protocol import Usage, add_usage

__all__ = ["Many", "UsageTotal", "check_budget", "counted"]


def counted(usage: Usage | None) -> int | None:
    """The tokens a budget counts of ``usage``: prompt and completion; ``None`` unless the
    server stated both."""
    if usage is None or usage.prompt_tokens is None or usage.completion_tokens is None:
        return None
    return usage.prompt_tokens + usage.completion_tokens


def check_budget(budget: int, usage: Usage | None, what: str, *, unmetered: bool = False) -> None:
    """Raise `TokenBudgetExceeded` if ``usage`` (``None``: nothing spent yet) reached ``budget``,
    or cannot be counted: an answer reported no usage (``unmetered``), or only part of it."""
    spent = None if unmetered else 0 if usage is None else counted(usage)
    if spent is None or spent >= budget:
        raise errors.TokenBudgetExceeded(budget=budget, spent=spent, usage=usage, what=what)


_COUNTS = (
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "cached_tokens",
    "reasoning_tokens",
)


def check_counts(where: str, usage: Usage) -> None:
    """Refuse a `Usage` built by hand whose counts are no counts: a decoded one was checked by
    msgspec (`protocol.Count`), but a count below 0 given to `UsageTotal` would take tokens
    off its total, and its budget would fail open. (No upper bound: a sum of decoded counts
    may pass `protocol.MAX_COUNT`, and a count too large only spends a budget.)"""
    for name in _COUNTS:
        value = getattr(usage, name)
        if value is None or (type(value) is int and value >= 0):
            continue
        raise ValueError(
            f"{where}: {name}={value!r} is no count: counts of tokens are ints >= 0; pass "
            "the counts the server reported (Response.usage)"
        )


def budget_problem(value: object) -> str | None:
    """Why ``value`` cannot be a ``token_budget``, if it cannot."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return None
    return f"token_budget must be a positive int or None, not {value!r}"


class UsageTotal:
    """A running sum of the tokens many calls used, and optionally a budget for them.

    Pass one as ``usage=`` to `Client.generate_many` / `complete_many` (or their async twins):
    each item is added as it finishes (by the worker thread that ran it, one at a time, or in
    the event loop), failed items included — a `ValidationError` (an invalid answer after the
    last re-ask, a truncated one) carries the usage of its answers. One object may gather
    several batches; `add` also takes a `Response` of any other call. Not locked: add from one
    thread at a time.

    ``usage`` is the sum (``None`` until an item reported some; each count summed over the
    items that state it, see `Usage`), ``calls`` the items added, ``unreported`` those among
    them that reported none (a server that sends no usage, an error status): their tokens are
    not in the sum; ``unmetered`` the calls among them an answer of which reported none, or
    only part of it (`Response.unmetered`), or could not be read (`ProtocolError`); an error
    status is no answer.

    With ``token_budget``, every batch given this total starts no item, and asks no item
    again, once its prompt and completion tokens reached the budget (`TokenBudgetExceeded`);
    `check` does the same for calls of your own. An unmetered answer spends the budget.
    """

    __slots__ = ("calls", "token_budget", "unmetered", "unreported", "usage")

    def __init__(self, token_budget: int | None = None) -> None:
        problem = budget_problem(token_budget)
        if problem:
            raise ValueError(f"UsageTotal(): {problem}")
        self.token_budget = token_budget
        self.usage: Usage | None = None
        self.calls = 0
        self.unreported = 0
        self.unmetered = 0

    @property
    def spent(self) -> int | None:
        """The prompt and completion tokens added so far; ``None`` once an answer reported no
        usage (or only part of it), as its tokens cannot be known."""
        if self.unmetered:
            return None
        usage = self.usage
        return 0 if usage is None else counted(usage)

    def add(self, outcome: Any) -> None:
        """Add one call's outcome: a `Response` (its ``total_usage``), an exception (its
        ``total_usage``, if it has one), a `Usage`, or ``None`` (a call that reported none)."""
        if isinstance(outcome, (Response, BaseException)):
            spent = getattr(outcome, "total_usage", None)
            # A call a budget stopped before a re-ask: its last answer is the error's cause.
            answer: Any = outcome
            if isinstance(outcome, errors.TokenBudgetExceeded):
                answer = outcome.__cause__
            if isinstance(answer, (Response, errors.ValidationError)):
                # `unmetered` counts the call's answers; an error raised outside a call (a
                # stream's item) has only its own usage.
                self.unmetered += answer.unmetered > 0 or counted(answer.usage) is None
            elif isinstance(answer, errors.ProtocolError):
                self.unmetered += 1  # an answer, maybe paid for, whose usage cannot be read
        elif outcome is None or isinstance(outcome, Usage):
            if outcome is not None:
                check_counts("UsageTotal.add()", outcome)
            spent = outcome
            self.unmetered += outcome is None
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

    def check(
        self, spent: Usage | None = None, *, unmetered: bool = False, what: str = "usage total"
    ) -> None:
        """Raise `TokenBudgetExceeded` if the budget is spent, counting ``spent`` too (a call's
        answers not added yet; ``unmetered``: one of them reported no usage); nothing without
        a budget."""
        if spent is not None:
            check_counts("UsageTotal.check()", spent)
        budget = self.token_budget
        if budget is not None:
            usage = add_usage(self.usage, spent)
            check_budget(budget, usage, what, unmetered=unmetered or self.unmetered > 0)

    def __repr__(self) -> str:
        budget = "" if self.token_budget is None else f", token_budget={self.token_budget}"
        return (
            f"UsageTotal(usage={self.usage!r}, calls={self.calls}, "
            f"unreported={self.unreported}{budget})"
        )


class Many:
    """One `generate_many`'s outcomes, in input order, and the budgets it keeps: its own
    ``token_budget`` and its `UsageTotal`'s. The shells start each item through `check` (in
    `ClientCore.prepare`), which a spent budget fails before anything is sent, and record each
    outcome with `finish`; a call's re-asks `check` it with the call's answers added.

    The sync client runs its items through `run`, which spends each outcome in the thread that
    ran it; the async client spends and finishes each in its event loop, in one step.

    A budget error never cancels the items in flight, which are paid for already: it is kept
    in the item's place (``return_exceptions=True``), or raised by `end` once they finished,
    carrying the results (``results``: each finished value in its place, ``None`` elsewhere).
    Any other failure without ``return_exceptions`` is raised at once, as it always was."""

    __slots__ = (
        "lock",
        "on_result",
        "own",
        "params",
        "results",
        "return_exceptions",
        "stopped",
        "usage",
        "whole",
    )

    def __init__(
        self,
        where: str,
        params: Mapping[str, Any],
        *,
        usage: UsageTotal | None,
        return_exceptions: bool,
        on_result: Callable[[int, Any], object] | None,
    ) -> None:
        token_budget = params.get("token_budget")
        problem = budget_problem(token_budget)
        if problem:
            raise ValueError(f"{where}(): {problem}")
        # The batch's budget, not each item's: its calls get the other parameters.
        self.params = {k: v for k, v in params.items() if k != "token_budget"}
        self.own = UsageTotal(token_budget)
        self.usage = usage
        self.return_exceptions = return_exceptions
        self.on_result = on_result
        self.results: list[Any] = []  # each item's place, sized once the items are known
        self.whole = False  # each item's `Response` in its place, not its value
        self.stopped: errors.TokenBudgetExceeded | None = None
        self.lock = threading.Lock()  # the sync client's workers `spend` at once

    @property
    def budgeted(self) -> bool:
        """Whether a budget applies: else the calls need not check it before their re-asks."""
        usage = self.usage
        return self.own.token_budget is not None or (
            usage is not None and usage.token_budget is not None
        )

    def check(self, spent: Usage | None = None, *, unmetered: bool = False) -> None:
        """Raise `TokenBudgetExceeded` if the batch's budget or its total's is spent, counting
        ``spent`` too (the answers of a call about to ask again; ``unmetered``: one of them
        reported no usage)."""
        for total, what in ((self.own, "batch"), (self.usage, "usage total")):
            if total is not None:
                total.check(spent, unmetered=unmetered, what=what)

    def run(self, create: Callable[..., Response[Any, Any]], *args: Any) -> Response[Any, Any]:
        """``create(*args, self)``, one item in a worker thread, its outcome spent (`spend`) as
        soon as it ends: the next item's `check` must see it, whenever the caller's thread
        gets to `finish` it."""
        try:
            response = create(*args, self)
        except Exception as exc:
            self.spend(exc)
            raise
        self.spend(response)
        return response

    def spend(self, outcome: Any) -> None:
        """Add an item's outcome to the batch's total and its `UsageTotal`, one at a time."""
        # An item a budget kept from starting (an error with no cause) was no call.
        if isinstance(outcome, errors.TokenBudgetExceeded) and outcome.__cause__ is None:
            return
        with self.lock:
            self.own.add(outcome)
            if self.usage is not None:
                self.usage.add(outcome)

    def finish(self, index: int, outcome: Any) -> None:
        """Put item ``index``'s outcome, a `Response` or an exception, in its place; raise the
        exception if it ends the batch."""
        if isinstance(outcome, Response):
            value: Any = outcome if self.whole else outcome.values[0]
        elif isinstance(outcome, errors.LMClientError) and self.return_exceptions:
            value = outcome
        elif isinstance(outcome, errors.TokenBudgetExceeded):
            self.stopped = self.stopped or outcome
            return
        else:
            raise outcome
        self.results[index] = value
        if self.on_result is not None:
            self.on_result(index, value)

    def end(self) -> list[Any]:
        """The results, or the first budget error, carrying them, if a budget stopped items."""
        stopped = self.stopped
        if stopped is not None:
            stopped.results = self.results
            raise stopped
        return self.results
