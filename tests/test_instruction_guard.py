"""The instruction guard's decision (`benchmarks/guard.py`, which `make bench` runs through
``benchmarks/instructions.py --check``): a guarded call more than 5 % above the baseline fails,
naming the call, its growth and the way to accept it; another Python compares nothing.
The counting itself needs valgrind and is not run here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def guard() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_guard", ROOT / "benchmarks" / "guard.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def baseline(guard: ModuleType) -> object:
    return guard.Baseline(
        python="3.11.7",
        date="2026-12-06",
        commit="abc1234",
        counts={"realsync": 100_000, "sync": 90_000, "realasync": 150_000, "async": 130_000},
    )


def test_within_the_limit_passes(guard: ModuleType) -> None:
    counts = {"realsync": 105_000, "sync": 85_000, "realasync": 150_000, "async": 130_000}
    verdict = guard.check(baseline(guard), counts, "3.11.7")
    assert verdict.outcome is guard.Outcome.WITHIN
    assert [g.scenario for g in verdict.compared] == ["realsync", "sync", "realasync", "async"]
    assert "realsync: 100,000 -> 105,000 instructions per call (+5.0%)" in verdict.message


def test_growth_above_the_limit_fails_naming_the_call_and_the_way_out(guard: ModuleType) -> None:
    counts = {"realsync": 100_000, "sync": 90_000, "realasync": 157_600, "async": 130_000}
    verdict = guard.check(baseline(guard), counts, "3.11.7")
    assert verdict.outcome is guard.Outcome.GROWN
    first = verdict.message.splitlines()[0]
    assert "realasync by +5.1%" in first
    assert "realsync" not in first and "abc1234" in first
    assert "CHANGELOG" in verdict.message
    assert "--update-baseline" in verdict.message


def test_another_python_compares_nothing(guard: ModuleType) -> None:
    counts = {"realsync": 500_000, "sync": 500_000, "realasync": 500_000, "async": 500_000}
    verdict = guard.check(baseline(guard), counts, "3.12.1")
    assert verdict.outcome is guard.Outcome.OTHER_PYTHON
    assert verdict.compared == ()
    assert "3.11.7" in verdict.message and "3.12.1" in verdict.message


def test_a_partial_run_compares_what_it_counted(guard: ModuleType) -> None:
    verdict = guard.check(baseline(guard), {"sync": 99_001}, "3.11.7")
    assert verdict.outcome is guard.Outcome.GROWN
    assert [g.scenario for g in verdict.compared] == ["sync"]


def test_the_stored_baseline_round_trips_and_guards_all_four(
    guard: ModuleType, tmp_path: Path
) -> None:
    stored = guard.load()
    assert set(stored.counts) == set(guard.GUARDED)
    path = tmp_path / "baseline.json"
    guard.dump(stored, path)
    assert guard.load(path) == stored


def test_a_baseline_count_of_zero_is_refused(guard: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    path.write_text('{"python": "3.11.7", "date": "d", "commit": "c", "counts": {"sync": 0}}')
    with pytest.raises(ValueError, match="above 0"):
        guard.load(path)
