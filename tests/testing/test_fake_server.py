"""FakeLLM.serve over real sockets, with httpx.Client and httpx.AsyncClient."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pytest

from lmclient.testing import FakeLLM, RecordedRequest
from lmclient.testing import _server as server_module
from lmclient.testing._script import StreamStyle

MESSAGES = [{"role": "user", "content": "Hi"}]
WAIT = 5.0  # bound on every wait on the server thread; never reached when things work


@pytest.fixture
def fake() -> FakeLLM:
    return FakeLLM(default_text="Hello from the fake server.", chunk_size=4)


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=WAIT) as c:
        yield c


def data_events(lines: Iterator[str]) -> list[Any]:
    out: list[Any] = []
    for line in lines:
        if line.startswith("data: "):
            data = line[len("data: ") :]
            out.append(data if data == "[DONE]" else msgspec.json.decode(data))
    return out


def local_port(response: httpx.Response) -> int:
    """The client-side port of the connection a response came on (same port: reused)."""
    port: int = response.extensions["network_stream"].get_extra_info("client_addr")[1]
    return port


def test_base_url_and_chat(url: str, client: httpx.Client) -> None:
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
    response = client.post(
        f"{url}/chat/completions", json={"model": "fake-model", "messages": MESSAGES}
    )
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert int(response.headers["content-length"]) == len(response.content)
    assert response.json()["choices"][0]["message"]["content"] == "Hello from the fake server."


def test_completions_models_and_errors(url: str, client: httpx.Client, fake: FakeLLM) -> None:
    completion = client.post(f"{url}/completions", json={"prompt": "p", "max_tokens": 2})
    assert completion.json()["choices"][0] == {
        "index": 0,
        "text": "Hello fr",
        "logprobs": None,
        "finish_reason": "length",
    }
    assert client.get(f"{url}/models").json()["data"][0]["id"] == "fake-model"
    missing = client.get(f"{url}/missing")
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "not_found_error"
    named = client.post(f"{url}/chat/completions", json={"model": "m", "messages": MESSAGES})
    assert (named.status_code, named.json()["model"]) == (200, "m")  # any name, unless models=
    bad_json = client.post(
        f"{url}/chat/completions", content=b"{nope", headers={"content-type": "application/json"}
    )
    assert bad_json.status_code == 400
    assert [r.endpoint for r in fake.requests] == ["completions", "models", "other", "chat", "chat"]
    assert fake.last_request.raw_body == b"{nope"


def test_n_choices(url: str, client: httpx.Client) -> None:
    body = {"messages": MESSAGES, "n": 3, "structured_outputs": {"choice": ["a", "b", "c", "d"]}}
    choices = client.post(f"{url}/chat/completions", json=body).json()["choices"]
    assert [c["index"] for c in choices] == [0, 1, 2]
    assert all(c["message"]["content"] in "abcd" for c in choices)


def test_keep_alive_reuses_the_connection(url: str, client: httpx.Client) -> None:
    first = client.post(f"{url}/chat/completions", json={"messages": MESSAGES})
    with client.stream(
        "POST", f"{url}/chat/completions", json={"messages": MESSAGES, "stream": True}
    ) as streamed:
        streamed.read()
    third = client.get(f"{url}/models")
    assert local_port(first) == local_port(streamed) == local_port(third)


def test_streaming(url: str, client: httpx.Client, fake: FakeLLM) -> None:
    body = {"messages": MESSAGES, "stream": True, "stream_options": {"include_usage": True}}
    with client.stream("POST", f"{url}/chat/completions", json=body) as response:
        assert response.headers["content-type"] == "text/event-stream"
        assert response.headers["transfer-encoding"] == "chunked"
        payloads = data_events(response.iter_lines())
    assert payloads[-1] == "[DONE]"
    assert payloads[-2]["usage"]["completion_tokens"] > 0
    text = "".join(p["choices"][0]["delta"].get("content", "") for p in payloads[:-2])
    assert text == "Hello from the fake server."
    assert payloads[-3]["choices"][0]["finish_reason"] == "stop"
    assert fake.last_request.stream


def test_keepalive_comments(url: str, client: httpx.Client, fake: FakeLLM) -> None:
    fake.style = StreamStyle(chunk_size=100, keepalive=True)
    body = {"prompt": "p", "stream": True}
    with client.stream("POST", f"{url}/completions", json=body) as response:
        raw = response.read().decode()
    assert raw.count(": keep-alive\n\n") == 2  # between the 3 events: text, finish, [DONE]
    assert raw.endswith("data: [DONE]\n\n")


def test_mid_stream_error(url: str, client: httpx.Client, fake: FakeLLM) -> None:
    fake.reply("abcdefgh", chunk_size=2, error_after=2)
    body = {"messages": MESSAGES, "stream": True}
    with client.stream("POST", f"{url}/chat/completions", json=body) as response:
        assert response.status_code == 200
        payloads = data_events(response.iter_lines())
    assert payloads[-2]["error"]["code"] == 500
    assert payloads[-1] == "[DONE]"
    assert client.get(f"{url}/models").status_code == 200


def test_close_after_ends_the_body_cleanly(url: str, client: httpx.Client, fake: FakeLLM) -> None:
    fake.reply("abcdefgh", chunk_size=2, close_after=1, times=1)
    body = {"messages": MESSAGES, "stream": True}
    with client.stream("POST", f"{url}/chat/completions", json=body) as response:
        payloads = data_events(response.iter_lines())
    assert len(payloads) == 2
    assert "[DONE]" not in payloads
    again = client.post(f"{url}/chat/completions", json={"messages": MESSAGES})
    assert local_port(again) == local_port(response)


def test_drop_after_breaks_the_connection(url: str, client: httpx.Client, fake: FakeLLM) -> None:
    fake.reply("abcdefgh", chunk_size=2, drop_after=2, times=1)
    body = {"messages": MESSAGES, "stream": True}
    received: list[str] = []
    with (
        pytest.raises(httpx.RemoteProtocolError),
        client.stream("POST", f"{url}/chat/completions", json=body) as response,
    ):
        received.extend(response.iter_lines())
    assert client.get(f"{url}/models").status_code == 200  # a new connection is opened


def test_on_chunk_gate_paces_the_stream(url: str, client: httpx.Client, fake: FakeLLM) -> None:
    gate, blocked = threading.Event(), threading.Event()

    def on_chunk(index: int) -> None:
        if index == 2:
            blocked.set()
            assert gate.wait(WAIT)

    fake.on_chunk = on_chunk
    body = {"messages": MESSAGES, "stream": True}
    with client.stream("POST", f"{url}/chat/completions", json=body) as response:
        lines = (line for line in response.iter_lines() if line)
        early = [next(lines), next(lines)]
        assert blocked.wait(WAIT)
        assert len(data_events(iter(early))) == 2  # two events arrived while the third is held
        gate.set()
        rest = data_events(lines)
    assert rest[-1] == "[DONE]"


def test_client_disconnect_mid_stream_is_quiet(
    fake: FakeLLM, capfd: pytest.CaptureFixture[str]
) -> None:
    gate = threading.Event()
    fake.default_text = "x" * 4000
    fake.on_chunk = lambda index: index == 1 and gate.wait(WAIT)
    with fake.serve() as base_url, httpx.Client(timeout=WAIT) as client:
        body = {"messages": MESSAGES, "stream": True}
        with client.stream("POST", f"{base_url}/chat/completions", json=body) as response:
            next(response.iter_lines())
        gate.set()  # the server now writes ~1000 events to a closed connection
    assert capfd.readouterr().err == ""


def test_chunked_request_body(url: str, client: httpx.Client, fake: FakeLLM) -> None:
    parts = [b'{"messages": ', msgspec.json.encode(MESSAGES), b"}"]
    response = client.post(f"{url}/chat/completions", content=iter(parts))
    assert response.status_code == 200
    assert fake.last_request.body == {"messages": MESSAGES}
    assert fake.last_request.headers["transfer-encoding"] == "chunked"


def test_hook_failure_answers_500(url: str, client: httpx.Client, fake: FakeLLM) -> None:
    def explode(request: RecordedRequest) -> None:
        raise RuntimeError("boom")

    fake.on_request = explode
    response = client.get(f"{url}/models")
    assert response.status_code == 500
    assert "boom" in response.json()["error"]["message"]


def test_exit_with_idle_keep_alive_connection_is_prompt(fake: FakeLLM) -> None:
    with httpx.Client(timeout=WAIT) as client:
        with fake.serve() as base_url:
            assert client.get(f"{base_url}/models").status_code == 200
            started = time.monotonic()
        assert time.monotonic() - started < 2.5  # well under the 5 s bound on joins
        with pytest.raises(httpx.TransportError):
            client.get(f"{base_url}/models")


async def test_async_client(url: str, fake: FakeLLM) -> None:
    fake.reply({"answer": 42}, times=1)
    async with httpx.AsyncClient(timeout=WAIT) as client:
        response = await client.post(f"{url}/chat/completions", json={"messages": MESSAGES})
        assert response.json()["choices"][0]["message"]["content"] == '{"answer":42}'
        body = {"prompt": "p", "stream": True}
        async with client.stream("POST", f"{url}/completions", json=body) as streamed:
            lines = [line async for line in streamed.aiter_lines()]
    payloads = data_events(iter(lines))
    assert payloads[-1] == "[DONE]"
    assert "".join(p["choices"][0]["text"] for p in payloads[:-1]) == fake.default_text


async def test_max_in_flight(fake: FakeLLM) -> None:
    barrier = threading.Barrier(4, timeout=WAIT)
    fake.on_request = lambda request: barrier.wait()
    with fake.serve() as url:
        async with httpx.AsyncClient(timeout=WAIT) as client:
            calls = [
                client.post(f"{url}/chat/completions", json={"messages": MESSAGES})
                for _ in range(4)
            ]
            responses = await asyncio.gather(*calls)
    # Each request left the count before its answer's last byte was written: nothing is in
    # flight once the answers are read.
    assert [r.status_code for r in responses] == [200] * 4
    assert fake.max_in_flight == 4
    fake.reset()
    assert fake.max_in_flight == 0


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_request_leaves_the_count_before_its_answer_completes(
    monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    """A client may send its next request the moment it has read an answer: the server must
    not count the previous one then (`max_in_flight` of a one-at-a-time client is 1)."""
    fake = FakeLLM()
    counts: list[int] = []  # the count at each write of the server, in order
    original = server_module._Handler.setup

    def setup(handler: Any) -> None:
        original(handler)
        write = handler.wfile.write

        def counting(data: bytes) -> int:
            counts.append(fake._in_flight.now)
            result: int = write(data)
            return result

        handler.wfile.write = counting

    monkeypatch.setattr(server_module._Handler, "setup", setup)
    with fake.serve() as url, httpx.Client(timeout=WAIT) as client:
        body: dict[str, Any] = {"messages": MESSAGES, "stream": stream}
        response = client.post(f"{url}/chat/completions", json=body)
    assert response.status_code == 200
    if stream:
        assert counts[0] == 1  # its head is written while it counts
    assert counts[-1] == 0  # the write that completes the answer: no longer in flight


def test_base_url_is_the_served_url_while_serving() -> None:
    fake = FakeLLM(base_url="http://llm.internal/v1")
    assert fake.base_url == "http://llm.internal/v1"
    with fake.serve() as outer:
        assert fake.base_url == outer
        with fake.serve() as inner:
            assert fake.base_url == inner != outer
            assert httpx.get(f"{outer}/models", timeout=WAIT).status_code == 200
        assert fake.base_url == outer
    assert fake.base_url == "http://llm.internal/v1"


def test_a_burst_of_new_connections_waits_in_the_listen_backlog(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While the accept loop is held, 128 new connections still complete their handshakes and
    are answered once it resumes. socketserver's default backlog of 5 drops the SYNs past it,
    and clients resend them after 1, 3, 7… s: a slow, seemingly hung server under a burst."""
    from lmclient.testing._server import _Server

    gate = threading.Event()
    accept = _Server.process_request

    def held(self: _Server, request: Any, address: Any) -> None:
        gate.wait(WAIT)
        accept(self, request, address)

    monkeypatch.setattr(_Server, "process_request", held)
    with FakeLLM().serve() as url:
        port = httpx.URL(url).port or 0
        connections: list[socket.socket] = []
        try:
            connections.extend(  # each connect returns once its handshake is done
                socket.create_connection(("127.0.0.1", port), timeout=WAIT) for _ in range(128)
            )
        finally:
            gate.set()
        try:
            for conn in connections:
                conn.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert [conn.recv(12) for conn in connections] == [b"HTTP/1.1 200"] * 128
        finally:
            for conn in connections:
                conn.close()
