"""``session_id=`` reaches the real vLLM (0.32): its request model reads the field (a field it
does not declare is logged as "present in the request but ignored", the control below), and
its value is checked (not a str is a 400), as on both endpoints."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Literal

import lmclient
from scripts import vllm

IGNORED = "were present in the request but ignored"
QUESTION = "Is the sky blue? yes or no:"


def log_since(path: Path, offset: int) -> str:
    with path.open("rb") as fh:
        fh.seek(offset)
        return fh.read().decode("utf-8", errors="replace")


def post(server: vllm.VllmServer, body: dict[str, object]) -> int:
    request = urllib.request.Request(
        f"{server.base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_session_id_is_read(vllm_server: vllm.VllmServer) -> None:
    body = {
        "model": vllm_server.model,
        "messages": [{"role": "user", "content": QUESTION}],
        "max_tokens": 2,
    }
    offset = vllm_server.log_path.stat().st_size
    assert post(vllm_server, {**body, "session_idx": "agent-7"}) == 200  # the control
    assert "session_idx" in log_since(vllm_server.log_path, offset)
    assert post(vllm_server, {**body, "session_id": 7}) == 400  # a field it reads and checks
    offset = vllm_server.log_path.stat().st_size
    with lmclient.Client(vllm_server.base_url) as client:
        answer = client.generate(
            QUESTION, Literal["yes", "no"], session_id="agent-7", model=vllm_server.model
        )
        completion = client.create(
            QUESTION, endpoint="completions", session_id="agent-7", max_tokens=2
        )
    assert answer in ("yes", "no") and completion.text is not None
    assert IGNORED not in log_since(vllm_server.log_path, offset)
