"""The instruction guard: a call's instructions against the stored baseline.

No change may raise the instructions of the call users make (``realsync``, ``realasync``) or of
the narrow call (``sync``, ``async``) by more than 5 % without saying why in its CHANGELOG entry.
``instructions.py --check`` counts those four and asks `check` here; ``--update-baseline``
accepts the counts as they are. Kept apart from ``instructions.py`` (which needs valgrind and a
server) so the decision is a pure function a fast test can hold.

The counts depend on the interpreter (its bytecode, its evaluation loop), so the baseline keeps
the Python version it was counted on, and a run on another version compares nothing rather
than fail on a difference no change made.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from pathlib import Path

GUARDED = ("realsync", "sync", "realasync", "async")
LIMIT_PERCENT = 5  # the largest growth accepted without a word in the CHANGELOG entry
BASELINE = Path(__file__).resolve().parent / "instructions-baseline.json"


@dataclass(frozen=True)
class Baseline:
    """Instructions per call as counted on one commit, with what the counts depend on."""

    python: str  # "3.11.7": the counts are only comparable on the same interpreter
    date: str
    commit: str
    counts: dict[str, int]


@dataclass(frozen=True)
class Growth:
    """One guarded call's count, then and now."""

    scenario: str
    before: int
    after: int

    @property
    def change(self) -> float:
        return self.after / self.before - 1

    @property
    def too_much(self) -> bool:
        """Above the limit, in integers: 105,000 against 100,000 is within, as a float says not."""
        return self.after * 100 > self.before * (100 + LIMIT_PERCENT)


class Outcome(enum.Enum):
    WITHIN = "within"  # every guarded call counted is at most LIMIT_PERCENT above the baseline
    GROWN = "grown"  # one or more grew by more: the change says why, or is reworked
    OTHER_PYTHON = "other python"  # not comparable: nothing was compared


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    compared: tuple[Growth, ...]
    message: str


def load(path: Path = BASELINE) -> Baseline:
    data = json.loads(path.read_text())
    counts = {name: int(count) for name, count in data["counts"].items()}
    if any(count <= 0 for count in counts.values()):
        raise ValueError(f"{path}: every count must be above 0, got {counts}")
    return Baseline(python=data["python"], date=data["date"], commit=data["commit"], counts=counts)


def dump(baseline: Baseline, path: Path = BASELINE) -> None:
    data = {
        "python": baseline.python,
        "date": baseline.date,
        "commit": baseline.commit,
        "counts": baseline.counts,
    }
    path.write_text(json.dumps(data, indent=2) + "\n")


def check(baseline: Baseline, counts: dict[str, int], python: str) -> Verdict:
    """Compare the guarded calls counted now (``counts``, on ``python``) with the baseline.

    A scenario missing on either side is not compared: ``--check`` counts all four, so a
    missing one means a partial run, which says nothing about the others."""
    if python != baseline.python:
        return Verdict(
            outcome=Outcome.OTHER_PYTHON,
            compared=(),
            message=(
                f"instruction guard not applied: the baseline was counted on Python "
                f"{baseline.python}, this is Python {python}, and the counts differ between "
                f"interpreters; run it with Python {baseline.python}, or count a baseline on "
                f"this one from the commit before your change (--update-baseline)"
            ),
        )
    compared = tuple(
        Growth(scenario=name, before=baseline.counts[name], after=counts[name])
        for name in GUARDED
        if name in counts and name in baseline.counts
    )
    grown = [g for g in compared if g.too_much]
    lines = [
        f"{g.scenario}: {g.before:,} -> {g.after:,} instructions per call ({g.change:+.1%})"
        for g in compared
    ]
    against = f"against the baseline of {baseline.commit} ({baseline.date}, Python {python})"
    if not grown:
        return Verdict(
            outcome=Outcome.WITHIN,
            compared=compared,
            message="\n".join([f"instruction guard: within {LIMIT_PERCENT} % {against}", *lines]),
        )
    names = ", ".join(f"{g.scenario} by {g.change:+.1%}" for g in grown)
    return Verdict(
        outcome=Outcome.GROWN,
        compared=compared,
        message="\n".join(
            [
                f"instruction guard: {names}, more than {LIMIT_PERCENT} % {against}",
                *lines,
                f"A change may raise these counts by more than {LIMIT_PERCENT} % only if its "
                "CHANGELOG entry says why. Once it does, accept the new counts: "
                "python benchmarks/instructions.py --update-baseline",
            ]
        ),
    )
