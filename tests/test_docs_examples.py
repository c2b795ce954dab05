"""The guides' examples run: the testing guide's respx example as a user's test file would (the
python block of docs/testing.md's "respx, as with the openai SDK" section, written out and run
by pytest in a fresh interpreter), and the streaming guide's `partials()` example against the
fake."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import lmclient
from lmclient.testing import FakeLLM

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


def test_the_partials_example_of_the_streaming_guide_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """docs/streaming.md's "Partial objects" block, against the fake: the summary grows."""
    summary = "A careful paper, with one weak section."
    fake = FakeLLM()
    fake.reply({"title": "On streams", "score": 4, "summary": summary}, chunk_size=6)
    with fake.serve() as url, lmclient.Client(url) as client:
        scope: dict[str, Any] = {"client": client, "__name__": "example"}
        exec(_block("streaming.md", "Partial objects"), scope)  # our own docs, run as written
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].strip() == summary
    growing = [line.removesuffix(" …") for line in lines if line.endswith(" …")]
    prefixes = [g for g in dict.fromkeys(growing) if g]  # before the summary began: ""
    assert len(prefixes) >= 3 and all(summary.startswith(g) for g in prefixes)
    assert scope["report"].summary == summary
