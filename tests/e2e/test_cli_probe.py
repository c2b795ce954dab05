"""`lmclient probe --check` against a real llama.cpp server: what it reports must be what the
server really does with each constraint field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec

from scripts import llamacpp

SCRIPT = Path(sys.executable).with_name("lmclient")


def check(server: llamacpp.LlamaServer, *args: str) -> dict[str, Any]:
    result = subprocess.run(
        [str(SCRIPT), "probe", server.base_url, "--check", "--json", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = msgspec.json.decode(result.stdout)
    return report


def test_llamacpp_enforces_json_schema_and_gbnf(llama: llamacpp.LlamaServer) -> None:
    report = check(llama)
    assert (report["kind"], report["dialect"]) == ("llamacpp", "llamacpp")
    results = {row["constraint"]: row["result"] for row in report["check"]["results"]}
    assert results["json schema"] == results["grammar gbnf"] == "enforced"
    assert results["grammar lark"] == "unsupported"  # llama.cpp reads GBNF only


def test_fields_llamacpp_does_not_read_are_reported_ignored(llama: llamacpp.LlamaServer) -> None:
    """llama.cpp answers 200 to a body with vLLM's guided_* fields, and ignores them."""
    report = check(llama, "--dialect", "vllm-guided")
    results = {row["constraint"]: row["result"] for row in report["check"]["results"]}
    assert set(results.values()) == {"ignored"}
