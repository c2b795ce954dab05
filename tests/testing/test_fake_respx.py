"""FakeLLM.mock: the same answers through respx, for sync and async httpx clients."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import respx
from respx.models import AllMockedAssertionError

import lmclient.testing
from lmclient.testing import FakeLLM

MESSAGES = [{"role": "user", "content": "Hi"}]


def data_events(lines: list[str]) -> list[Any]:
    return [
        line[6:] if line == "data: [DONE]" else msgspec.json.decode(line[6:])
        for line in lines
        if line.startswith("data: ")
    ]


def test_any_url_is_answered() -> None:
    fake = FakeLLM()
    fake.reply("mocked", times=1)
    with fake.mock() as base_url:
        assert base_url == "http://fake-llm.test/v1"
        response = httpx.Client().post(
            "http://anything/v1/chat/completions", json={"messages": MESSAGES}
        )
        models = httpx.get(f"{base_url}/models")
    assert response.json()["choices"][0]["message"]["content"] == "mocked"
    assert models.json()["data"][0]["id"] == "fake-model"
    assert fake.last_request.headers["host"] == "fake-llm.test"


def test_same_bytes_as_the_handle_function() -> None:
    fake = FakeLLM()
    body = msgspec.json.encode({"messages": MESSAGES, "guided_json": {"type": "integer"}})
    with fake.mock() as base_url:
        mocked = httpx.post(f"{base_url}/chat/completions", content=body)
    direct = FakeLLM().handle("POST", "/v1/chat/completions", {}, body)
    assert mocked.content == direct.body


def test_streaming_is_lazy() -> None:
    order: list[str] = []
    fake = FakeLLM(default_text="abcdefgh", chunk_size=4, on_chunk=lambda i: order.append(f"s{i}"))
    body = {"messages": MESSAGES, "stream": True}
    with (
        fake.mock() as base_url,
        httpx.Client() as client,
        client.stream("POST", f"{base_url}/chat/completions", json=body) as response,
    ):
        assert response.headers["content-type"] == "text/event-stream"
        lines = []
        for line in response.iter_lines():
            if line:
                order.append("c")
                lines.append(line)
    assert order[:4] == ["s0", "c", "s1", "c"]
    payloads = data_events(lines)
    assert payloads[-1] == "[DONE]"
    assert "".join(p["choices"][0]["delta"].get("content", "") for p in payloads[:-1]) == "abcdefgh"


async def test_async_client_streaming() -> None:
    fake = FakeLLM(default_text="async text", chunk_size=3)
    body = {"prompt": "p", "stream": True, "stream_options": {"include_usage": True}}
    with fake.mock() as base_url:
        async with (
            httpx.AsyncClient() as client,
            client.stream("POST", f"{base_url}/completions", json=body) as response,
        ):
            lines = [line async for line in response.aiter_lines()]
    payloads = data_events(lines)
    assert payloads[-2]["usage"]["completion_tokens"] == 3
    assert "".join(p["choices"][0]["text"] for p in payloads[:-2]) == "async text"


def test_dropped_stream_is_a_transport_error() -> None:
    fake = FakeLLM(default_text="abcdefgh", chunk_size=2, drop_after=1)
    with (
        fake.mock() as base_url,
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream(
            "POST", f"{base_url}/chat/completions", json={"messages": MESSAGES, "stream": True}
        ) as r,
    ):
        r.read()


def test_error_replies() -> None:
    fake = FakeLLM()
    fake.reply_error(429, "slow down", headers={"retry-after": "1"})
    with fake.mock() as base_url:
        response = httpx.post(f"{base_url}/chat/completions", json={"messages": MESSAGES})
    assert response.status_code == 429
    assert response.headers["retry-after"] == "1"


def test_base_url_limits_the_route_to_its_origin() -> None:
    fake = FakeLLM(base_url="http://llm.internal:8000/v1")
    fake.add_route("GET", "/version", {"version": "0.11.0"})
    with fake.mock() as base_url:
        assert base_url == "http://llm.internal:8000/v1"
        assert httpx.get("http://llm.internal:8000/version").json() == {"version": "0.11.0"}
        with pytest.raises(AllMockedAssertionError):
            httpx.get("http://elsewhere/v1/models")


def test_user_router_gets_a_route_that_is_removed_on_exit() -> None:
    fake = FakeLLM(base_url="http://llm/v1")
    with respx.mock(assert_all_called=False) as router:
        router.get("http://other/health").respond(204)
        with fake.mock(router) as base_url:
            assert len(router.routes) == 2
            assert httpx.get(f"{base_url}/models").status_code == 200
            assert httpx.get("http://other/health").status_code == 204
        assert len(router.routes) == 1


def test_plain_router_with_mock_transport() -> None:
    router = respx.Router()
    fake = FakeLLM(default_text="via transport")
    with fake.mock(router) as base_url:
        client = httpx.Client(transport=httpx.MockTransport(router.handler))
        response = client.post(f"{base_url}/chat/completions", json={"messages": MESSAGES})
    assert response.json()["choices"][0]["message"]["content"] == "via transport"


def test_importing_the_package_does_not_import_respx_or_httpx() -> None:
    package_dir = Path(lmclient.testing.__file__).parent.parent
    script = f"""
import sys, types
parent = types.ModuleType("lmclient")
parent.__path__ = [{str(package_dir)!r}]
sys.modules["lmclient"] = parent  # skip lmclient/__init__.py: only the testing package counts
import lmclient.testing
loaded = {{name.split(".")[0] for name in sys.modules}}
print(sorted(loaded & {{"respx", "httpx", "httpcore", "http"}}))
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=True
    )
    assert result.stdout.strip() == "[]"


def test_base_url_is_the_mocked_url_while_mocked() -> None:
    fake = FakeLLM()
    assert fake.base_url is None
    with fake.mock() as base_url:
        assert fake.base_url == base_url == "http://fake-llm.test/v1"
    assert fake.base_url is None
    fake.base_url = "http://llm/v1"
    with fake.mock() as base_url:
        assert base_url == "http://llm/v1"


def test_delays_and_stalls_follow_the_read_timeout() -> None:
    fake = FakeLLM(default_text="abcdefgh")
    fake.delay(1.0)
    fake.stall(1.0)
    fake.stall(5.0)
    with fake.mock() as base_url, httpx.Client(timeout=2.0) as client:
        url = f"{base_url}/chat/completions"
        assert client.post(url, json={"messages": MESSAGES}).status_code == 200  # 1 s < 2 s
        assert client.post(url, json={"messages": MESSAGES}).status_code == 200
        with pytest.raises(httpx.ReadTimeout):
            client.post(url, json={"messages": MESSAGES})
        fake.delay(2.0)
        with pytest.raises(httpx.ReadTimeout):
            client.post(url, json={"messages": MESSAGES})
    with fake.mock() as base_url, httpx.Client(timeout=None) as patient:
        fake.delay(math.inf)
        response = patient.post(f"{base_url}/chat/completions", json={"messages": MESSAGES})
        assert response.status_code == 200  # no read timeout: nothing to time out
