"""The examples run: against the fake server here (the demo also runs against the real model
in `make demo`, and its kinds are covered by tests/e2e)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_demo_against_the_fake() -> None:
    out = run("examples/demo.py", "--fake")
    assert "Person(name=" in out and "Pet(name=" in out and "all values validated" in out


def test_many_against_the_fake() -> None:
    out = run("examples/many.py", "--fake", "-n", "200")
    assert "196 reviews, 4 failed" in out
