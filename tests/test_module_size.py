"""No lmclient module over 700 lines: a module a reader can hold in mind has one job, and a
longer one is split by job (as `_output/gbnf*.py`, `_output/jsonschema*.py`,
`testing/_answers.py` were)."""

from __future__ import annotations

from pathlib import Path

import lmclient

PACKAGE = Path(lmclient.__file__).parent
MAX_LINES = 700


def test_no_module_over_700_lines() -> None:
    sizes = {
        path.relative_to(PACKAGE).as_posix(): len(path.read_text().splitlines())
        for path in PACKAGE.rglob("*.py")
    }
    over = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert not over, over
