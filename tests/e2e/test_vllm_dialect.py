"""What a real vLLM 0.32 does with fields it accepts but does not read, and how lmclient keeps
them off the wire (issue 15): a forced ``vllm-guided`` dialect, ``extra_body`` fields vLLM
ignores, and ``extra_body`` merged into the objects lmclient itself sends."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import pytest

import lmclient
from scripts import vllm

pytestmark = pytest.mark.timeout(300, func_only=True)

YES_NO = Literal["yes", "no"]
QUESTION = "Is the sky blue? yes or no:"


class Person(msgspec.Struct):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=12)]
    age: Annotated[int, msgspec.Meta(ge=0, le=120)]


def test_vllm_ignores_guided_fields(vllm_server: vllm.VllmServer) -> None:
    """The ground for refusing ``vllm-guided`` below: this vLLM answers 200 to a guided_choice,
    unconstrained, and only its log says so."""
    offset = vllm_server.log_path.stat().st_size
    body = {
        "model": vllm_server.model,
        "messages": [{"role": "user", "content": QUESTION}],
        "max_tokens": 8,
        "temperature": 0.0,
        "guided_choice": ["yes", "no"],
    }
    request = urllib.request.Request(
        f"{vllm_server.base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as resp:
        answer = json.load(resp)
    assert answer["choices"][0]["message"]["content"] not in ("yes", "no")
    with vllm_server.log_path.open("rb") as fh:
        fh.seek(offset)
        assert b"output will NOT be constrained" in fh.read()


def test_forced_vllm_guided_is_refused_when_the_version_is_known(vllm_url: str) -> None:
    with (
        lmclient.Client(vllm_url, dialect="vllm-guided") as client,
        pytest.raises(lmclient.UnsupportedConstraintError, match="guided_choice"),
    ):
        client.generate(QUESTION, YES_NO, max_tokens=4)


def test_disable_any_whitespace_per_request_is_refused(vllm_url: str) -> None:
    """vLLM 0.32 accepts it and reads only the server's setting; the error says where to set it."""
    extra = {"structured_outputs": {"disable_any_whitespace": True}}
    with (
        lmclient.Client(vllm_url) as client,
        pytest.raises(ValueError, match="structured-outputs-config"),
    ):
        client.generate(QUESTION, YES_NO, max_tokens=4, extra_body=extra)


def test_chat_user_field_is_refused(vllm_url: str) -> None:
    with lmclient.Client(vllm_url) as client, pytest.raises(ValueError, match="'user'"):
        client.generate(QUESTION, YES_NO, max_tokens=4, extra_body={"user": "user-42"})


def test_extra_body_cannot_replace_the_types_constraint(vllm_url: str) -> None:
    other = {"structured_outputs": {"json": {"type": "object"}}}
    with lmclient.Client(vllm_url) as client, pytest.raises(ValueError, match="json"):
        client.generate("Invent a person.", Person, max_tokens=48, extra_body=other)


def test_extra_body_merges_into_lmclient_objects(vllm_url: str) -> None:
    """lmclient asks for a stream's usage (``stream_options.include_usage``); an extra
    ``stream_options`` key joins it instead of replacing it (vLLM then sends no usage)."""
    extra = {"stream_options": {"continuous_usage_stats": True}}
    with (
        lmclient.Client(vllm_url) as client,
        client.stream(QUESTION, YES_NO, max_tokens=4, extra_body=extra) as s,
    ):
        assert s.value in ("yes", "no")
    assert s.usage is not None and s.usage.completion_tokens


def test_the_server_setting_keeps_json_compact(vllm_url: str) -> None:
    """``disable_any_whitespace`` in the server's --structured-outputs-config (scripts/vllm.py
    starts it so): xgrammar's JSON then allows no whitespace between tokens, where by default
    a small model may pad until max_tokens."""
    Digits = Annotated[list[Annotated[int, msgspec.Meta(ge=0, le=9)]], msgspec.Meta(max_length=3)]
    with lmclient.Client(vllm_url) as client:
        response = client.create("Three digits as a JSON list:", Digits, max_tokens=16)
    assert response.finish_reason == "stop"
    assert not any(c.isspace() for c in response.text), response.text


def probe_check(server: vllm.VllmServer, *args: str) -> dict[str, str]:
    """`lmclient probe --check`: one tiny request per constraint kind, through the console
    script; its verdict for each."""
    script = Path(sys.executable).with_name("lmclient")
    result = subprocess.run(
        [str(script), "probe", server.base_url, "--check", "--json", *args],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = msgspec.json.decode(result.stdout)
    assert (report["kind"], report["version"]) == ("vllm", vllm.VLLM_VERSION)
    return {row["constraint"]: row["result"] for row in report["check"]["results"]}


def test_probe_check_finds_every_constraint_enforced(vllm_server: vllm.VllmServer) -> None:
    """Every constraint is enforced; and a constrained answer with thinking asked for holds (the
    server's Gemma has no reasoning parser: the answer comes in the content, valid)."""
    results = probe_check(vllm_server)
    assert results.pop("after reasoning") == "holds"
    assert set(results.values()) == {"enforced"}


def test_probe_check_does_not_send_guided_fields(vllm_server: vllm.VllmServer) -> None:
    assert set(probe_check(vllm_server, "--dialect", "vllm-guided").values()) == {"refused"}


def test_serving_fields_are_read(vllm_server: vllm.VllmServer) -> None:
    """The request id becomes the answer's id (``X-Request-Id`` wins over the body's); the
    cache salt is read (an invalid one is a 400, where an ignored field would be a 200); and
    vLLM 0.32, scheduling first come first served (no ``--scheduling-policy priority``),
    accepts a nonzero priority with 200: it orders by it only under that policy."""
    trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    with lmclient.Client(vllm_server.base_url) as client:
        chat = client.create(
            QUESTION,
            YES_NO,
            max_tokens=4,
            model=vllm_server.model,
            request_id="lmclient-e2e-1",
            cache_salt="tenant-a",
            priority=5,
            traceparent=trace,
        )
        assert (chat.id, chat.value in ("yes", "no")) == ("chatcmpl-lmclient-e2e-1", True)
        completion = client.create(QUESTION, YES_NO, endpoint="completions", request_id="e2e-2")
        assert completion.id == "cmpl-e2e-2"
        with pytest.raises(lmclient.BadRequestError, match="cache_salt"):
            client.generate(QUESTION, YES_NO, max_tokens=4, cache_salt="a/b")
