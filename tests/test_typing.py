"""Static typing is part of the API: mypy --strict and pyright strict must accept
tests/typing/usage.py, tests/typing/partials.py and tests/typing/tools.py as they are (every
``assert_type`` exact, every misspelt parameter and every value that is not a type an error the
file expects)."""

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
            "tests/typing/partials.py",
            "tests/typing/tools.py",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow  # a Node.js process: ~10 s
def test_usage_type_checks_under_pyright_strict() -> None:
    """The same file under pyright strict (basedpyright, which bundles Node.js; its settings in
    pyproject.toml: every ``pyright: ignore`` must be needed)."""
    result = subprocess.run(
        # this interpreter's packages, not whichever venv pyright would find on its own
        [str(Path(sys.executable).with_name("basedpyright")), "--pythonpath", sys.executable],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
