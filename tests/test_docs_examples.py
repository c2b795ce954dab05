"""The testing guide's respx example runs as a user's test file would: the python block of
docs/testing.md's "respx, as with the openai SDK" section, written out and run by pytest in a
fresh interpreter."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _block(page: str, heading: str) -> str:
    text = (ROOT / "docs" / page).read_text()
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found is not None, f"no python block under {heading!r} in {page}"
    return found.group(1)


def test_the_respx_example_of_the_testing_guide_passes(tmp_path: Path) -> None:
    (tmp_path / "test_guide.py").write_text(_block("testing.md", "respx, as with the openai SDK"))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_guide.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout
