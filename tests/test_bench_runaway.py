"""The runaway benchmark's verdicts (`benchmarks/runaway.py`, `make bench-runaway`): the summary
and the issue's targets read from recorded calls. The calls themselves need a real server and
are not run here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    path = ROOT / "benchmarks" / "runaway.py"
    spec = importlib.util.spec_from_file_location("bench_runaway", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def call(bench: ModuleType, client: str, ended: str, tokens: int, seconds: float) -> Any:
    outcome = bench.Outcome(ended, tokens, seconds=seconds, cpu=0.002)
    return bench.Call(client, "ticket", 0, 0.0, outcome)


def test_a_run_that_meets_the_targets(bench: ModuleType) -> None:
    calls = [
        call(bench, "lmclient", "valid", 40, 1.0),
        call(bench, "lmclient", "RunawayError", 300, 8.0),
        call(bench, "lmclient-off", "valid", 40, 1.0),
        call(bench, "lmclient-off", "TruncatedError", 2048, 50.0),
    ]
    verdicts = bench.targets(calls)
    assert all(line.endswith("met") for line in verdicts), verdicts
    row = bench.summary_row("lmclient", [c for c in calls if c.client == "lmclient"])
    assert row == "| lmclient | 1/2 | 1 | 0 | 8.0 / 4.5 | 300 | 300 | 340 | 2.0 |"


def test_a_run_that_misses_them_says_which(bench: ModuleType) -> None:
    calls = [
        call(bench, "lmclient", "cut", 2048, 50.0),  # text cut at max_tokens: not valid
        call(bench, "lmclient", "RunawayError", 600, 20.0),
        call(bench, "lmclient-off", "TruncatedError", 2048, 50.0),
    ]
    every, tokens, slowest = bench.targets(calls)
    assert every.endswith("**missed**: cut")
    assert "600: **missed**" in tokens
    assert "1.00" in slowest and slowest.endswith("**missed**")


def test_text_cut_at_max_tokens_is_not_counted_valid(bench: ModuleType) -> None:
    """lmclient returns text whatever the finish reason: the bench counts a cut one apart."""
    assert bench.text_outcome("Say hi\n" * 300, "length", 2048).ended == "cut"
    assert bench.text_outcome("Hi!", "stop", 3).ended == "valid"
