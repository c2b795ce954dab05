"""``session_id=`` reaches the real vLLM (0.32): its request model declares and checks the
field on both endpoints, so a value of the wrong type is a 400 where an ignored field would be a
200 (0.32 logs the fields it ignores at DEBUG only), and lmclient's calls that carry one are
answered."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Literal

import lmclient
from scripts import vllm

QUESTION = "Is the sky blue? yes or no:"


def post(server: vllm.VllmServer, path: str, body: dict[str, object]) -> int:
    request = urllib.request.Request(
        f"{server.base_url}/{path}",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_session_id_is_read(vllm_server: vllm.VllmServer) -> None:
    chat = {
        "model": vllm_server.model,
        "messages": [{"role": "user", "content": QUESTION}],
        "max_tokens": 2,
    }
    completion = {"model": vllm_server.model, "prompt": QUESTION, "max_tokens": 2}
    assert post(vllm_server, "chat/completions", {**chat, "session_idx": 7}) == 200  # ignored
    assert post(vllm_server, "chat/completions", {**chat, "session_id": 7}) == 400  # read
    assert post(vllm_server, "completions", {**completion, "session_id": [7]}) == 400
    with lmclient.Client(vllm_server.base_url) as client:
        answer = client.generate(
            QUESTION, Literal["yes", "no"], session_id="agent-7", model=vllm_server.model
        )
        text = client.create(QUESTION, endpoint="completions", session_id="agent-7", max_tokens=2)
    assert answer in ("yes", "no") and text.text is not None
