"""Static typing is part of the API: mypy --strict must accept tests/typing/usage.py as it is
(every ``assert_type`` exact, every misspelt parameter an error the file expects)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # a mypy process: ~4 s
def test_usage_type_checks() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--warn-unused-ignores",
            "--no-incremental",
            "tests/typing/usage.py",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
