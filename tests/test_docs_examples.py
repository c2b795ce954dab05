"""What the guides' examples show, beyond running (every block runs in tests/test_docs_blocks.py):
the streaming guide's `partials()` example, against the fake, shows the summary grow."""

from __future__ import annotations

import re
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
