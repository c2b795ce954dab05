"""Unix domain sockets (``uds=``) on lmclient's own transports, sync and async.

Against a real uvicorn process listening with ``--uds`` (the stacks' app and helpers,
`tests.stacks.servers`): calls, streams, one connection for many calls. Against a socket server
in this process, to see the bytes: the request head says what the base URL says, and a silent
server times out. And the refusals, before any request.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import respx

import lmclient
from lmclient.testing import FakeLLM
from tests.helpers import chat_body, retries_logged
from tests.stacks.app import MODEL, stream_items
from tests.stacks.helpers import Echo, expected_text
from tests.stacks.servers import Stack, Stacks

LINUX = pytest.mark.skipif(sys.platform != "linux", reason="sun_path: 108 bytes on Linux")
TIMEOUT = 20.0
HANG = 10.0  # an async call that has not returned by then is reported as hung


@pytest.fixture(scope="module")
def server() -> Iterator[Stack]:
    """uvicorn (httptools) on a Unix socket in a temporary directory, stopped by PID."""
    stacks = Stacks()
    try:
        yield stacks.get("uvicorn-uds")
    finally:
        stacks.close()


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory in /tmp (whatever TMPDIR says), so a socket's path stays short."""
    with tempfile.TemporaryDirectory(prefix="lmc-uds-", dir="/tmp") as name:
        yield Path(name)


def sync_client(uds: str | Path, **options: Any) -> lmclient.Client:
    options = {"dialect": "vllm", "max_retries": 0, "timeout": TIMEOUT, **options}
    return lmclient.Client(model=options.pop("model", MODEL), uds=uds, **options)


def async_client(uds: str | Path, **options: Any) -> lmclient.AsyncClient:
    options = {"dialect": "vllm", "max_retries": 0, "timeout": TIMEOUT, **options}
    return lmclient.AsyncClient(model=options.pop("model", MODEL), uds=uds, **options)


# -- a real server on a socket -------------------------------------------------------------------


@pytest.mark.slow  # a uvicorn process
def test_generate_stream_and_one_connection(server: Stack) -> None:
    """Calls and streams go over the socket (nothing listens on localhost:80), all on one
    connection; the probes of dialect="auto" too."""
    assert server.uds is not None
    connections = set()
    # (runaway="off": the stacks' app answers a request with "stream" by its list, and the
    # auto-detected generic dialect would read an Echo call as a stream to watch it)
    with sync_client(server.uds, dialect="auto", model=None, runaway="off") as client:
        for i in range(3):
            prompt = f"sync {i}"
            echo = client.generate(prompt, Echo)
            assert echo.prompt == prompt
            connections.add(echo.port)
            with client.stream(f"stream {i}", list[str]) as stream:
                assert [*stream.items()] == stream_items(f"stream {i}")
                assert stream.text == expected_text(f"stream {i}")
            connections.add(client.complete(f"complete {i}", Echo).port)
        assert client.model == MODEL  # the probes and the model list answered over the socket
    assert len(connections) == 1 and 0 not in connections, connections


@pytest.mark.slow  # a uvicorn process
async def test_generate_stream_and_one_connection_async(server: Stack) -> None:
    assert server.uds is not None
    connections = set()
    async with async_client(server.uds, dialect="auto", model=None, runaway="off") as client:
        for i in range(3):
            prompt = f"async {i}"
            echo = await asyncio.wait_for(client.generate(prompt, Echo), HANG)
            assert echo.prompt == prompt
            connections.add(echo.port)
            async with client.stream(f"stream {i}", list[str]) as stream:
                assert [item async for item in stream.items()] == stream_items(f"stream {i}")
                assert stream.text == expected_text(f"stream {i}")
            connections.add((await client.complete(f"complete {i}", Echo)).port)
        assert client.model == MODEL
    assert len(connections) == 1 and 0 not in connections, connections


@pytest.mark.slow  # a uvicorn process
async def test_concurrent_calls_async(server: Stack) -> None:
    """Concurrent calls open a connection each, then share them; every answer its own."""
    assert server.uds is not None
    async with async_client(server.uds) as client:
        prompts = [f"many {i}" for i in range(12)]
        first = await asyncio.wait_for(client.generate_many(prompts, Echo, concurrency=4), HANG)
        again = await asyncio.wait_for(client.generate_many(prompts, Echo, concurrency=4), HANG)
    assert [e.prompt for e in first] == prompts and [e.prompt for e in again] == prompts
    assert 1 <= len({e.port for e in first + again}) <= 4


@pytest.mark.slow  # a uvicorn process
def test_path_and_host_from_base_url(server: Stack) -> None:
    """The base URL still gives the paths (``/close/`` answers with connection: close), and its
    host needs no resolving: the socket is the server."""
    assert server.uds is not None
    with sync_client(server.uds, base_url="http://gpu.invalid:8000/close/v1") as client:
        ports = [client.generate(f"close {i}", Echo).port for i in range(3)]
    assert len(set(ports)) == 3, ports  # each answer closed its connection


@pytest.mark.slow  # a uvicorn process
def test_environment_proxy_never_applies(server: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy the environment sets for the base URL's host is not used: the socket is local."""
    assert server.uds is not None
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # the discard port: nothing answers
    with sync_client(server.uds, base_url="http://gpu.invalid/v1") as client:
        assert client.generate("direct", Echo).prompt == "direct"


@pytest.mark.slow  # a uvicorn process
async def test_environment_proxy_never_applies_async(
    server: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert server.uds is not None
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    async with async_client(server.uds, base_url="http://gpu.invalid/v1") as client:
        assert (await asyncio.wait_for(client.generate("direct", Echo), HANG)).prompt == "direct"


@pytest.mark.slow  # a uvicorn process
def test_path_like_uds(server: Stack) -> None:
    assert server.uds is not None
    with sync_client(Path(server.uds)) as client:
        assert client.generate("pathlib", Echo).prompt == "pathlib"


# -- no server: missing socket, refused connection ---------------------------------------------


@pytest.mark.parametrize("state", ["missing", "refused"])
def test_no_server_is_a_retried_connection_error(
    state: str, short_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No socket file, or one nobody listens on: `APIConnectionError`, retried as a refused TCP
    connect is."""
    path = short_dir / "server.sock"
    if state == "refused":
        with socket.socket(socket.AF_UNIX) as bound:
            bound.bind(str(path))  # the file stays; nobody accepts
    caplog.set_level(logging.WARNING, logger="lmclient")
    with (
        sync_client(path, max_retries=1) as client,
        pytest.raises(lmclient.APIConnectionError) as caught,
    ):
        client.generate("hi")
    assert not isinstance(caught.value, lmclient.APITimeoutError)
    error = "FileNotFoundError" if state == "missing" else "ConnectionRefusedError"
    assert error in str(caught.value) and str(path) in str(caught.value)
    assert retries_logged(caplog) == 1


@pytest.mark.parametrize("state", ["missing", "refused"])
async def test_no_server_is_a_retried_connection_error_async(
    state: str, short_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = short_dir / "server.sock"
    if state == "refused":
        with socket.socket(socket.AF_UNIX) as bound:
            bound.bind(str(path))
    caplog.set_level(logging.WARNING, logger="lmclient")
    async with async_client(path, max_retries=1) as client:
        with pytest.raises(lmclient.APIConnectionError) as caught:
            await asyncio.wait_for(client.generate("hi"), HANG)
    assert not isinstance(caught.value, lmclient.APITimeoutError)
    error = "FileNotFoundError" if state == "missing" else "ConnectionRefusedError"
    assert error in str(caught.value) and str(path) in str(caught.value)
    assert retries_logged(caplog) == 1


# -- the bytes, from a socket server in this process --------------------------------------------


class HeadServer:
    """Accepts on a Unix socket and records each request's head; answers a chat completion, or
    with ``silent`` nothing at all, until `stop`."""

    def __init__(self, path: Path, *, silent: bool = False) -> None:
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(str(path))
        self.listener.listen()
        self.silent = silent
        self.heads: list[bytes] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        body = msgspec.json.encode(chat_body("hi"))
        answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return  # stopped before any client came
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                piece = conn.recv(65536)
                if not piece:
                    return
                data += piece
            self.heads.append(data.partition(b"\r\n\r\n")[0])
            if self.silent:
                self.stopping.wait(HANG)  # hold the connection open, answering nothing
                return
            conn.sendall(answer % len(body) + body)
            self.stopping.wait(HANG)

    def stop(self) -> None:
        self.stopping.set()
        self.listener.close()
        self.thread.join(HANG)


@pytest.fixture
def head_server(short_dir: Path) -> Iterator[HeadServer]:
    served = HeadServer(short_dir / "head.sock")
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture
def silent_server(short_dir: Path) -> Iterator[HeadServer]:
    served = HeadServer(short_dir / "silent.sock", silent=True)
    try:
        yield served
    finally:
        served.stop()


def socket_path(served: HeadServer) -> str:
    name: str = served.listener.getsockname()
    return name


@pytest.mark.parametrize(
    ("base_url", "request_line", "host"),
    [
        (None, b"POST /v1/chat/completions HTTP/1.1", b"host: localhost"),
        ("http://gpu.invalid:8000/api/v1", b"POST /api/v1/chat/completions HTTP/1.1",
         b"host: gpu.invalid:8000"),
    ],
)  # fmt: skip
def test_request_head_is_the_base_urls(
    head_server: HeadServer, base_url: str | None, request_line: bytes, host: bytes
) -> None:
    with sync_client(socket_path(head_server), base_url=base_url) as client:
        assert client.generate("hi") == "hi"
    [head] = head_server.heads
    lines = head.split(b"\r\n")
    assert lines[0] == request_line
    assert host in [line.lower() for line in lines[1:]]


async def test_request_head_is_the_base_urls_async(head_server: HeadServer) -> None:
    base_url = "http://gpu.invalid:8000/api/v1"
    async with async_client(socket_path(head_server), base_url=base_url) as client:
        assert await asyncio.wait_for(client.generate("hi"), HANG) == "hi"
    [head] = head_server.heads
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /api/v1/chat/completions HTTP/1.1"
    assert b"host: gpu.invalid:8000" in [line.lower() for line in lines[1:]]


def test_read_timeout(silent_server: HeadServer) -> None:
    """The read timeout holds on a socket as on TCP."""
    client = sync_client(socket_path(silent_server), timeout=0.3)
    with client, pytest.raises(lmclient.APITimeoutError):
        client.generate("hi")
    assert len(silent_server.heads) == 1


async def test_read_timeout_async(silent_server: HeadServer) -> None:
    async with async_client(socket_path(silent_server), timeout=0.3) as client:
        with pytest.raises(lmclient.APITimeoutError):
            await asyncio.wait_for(client.generate("hi"), HANG)
    assert len(silent_server.heads) == 1


def test_respx_mock_answers_a_uds_client() -> None:
    """Under a respx mock the request goes through httpx (with the socket), which respx
    intercepts as for a TCP client."""
    with respx.mock:
        respx.post("http://localhost/v1/chat/completions").respond(json=chat_body("mocked"))
        with sync_client("/nonexistent/lmclient.sock") as client:
            assert client.generate("hi") == "mocked"


# -- refusals, before any request ----------------------------------------------------------------


@pytest.mark.parametrize("make", [sync_client, async_client])
def test_base_url_defaults_and_ignores_the_environment(
    make: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With uds=, base_url is http://localhost/v1 unless given: the environment's base URL names
    a TCP server, not the one behind the socket."""
    monkeypatch.setenv("LMCLIENT_BASE_URL", "https://api.example.com/v1")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://api.example.com/v1")
    client = make("/run/vllm.sock")
    assert client._core.base_url == "http://localhost/v1"
    assert "uds='/run/vllm.sock'" in repr(client)
    given = make("/run/vllm.sock", base_url="http://vllm:8000/v1")
    assert given._core.base_url == "http://vllm:8000/v1"


def test_refused_together_with_http_client() -> None:
    message = r"HTTPTransport\(uds="
    with httpx.Client() as http_client, pytest.raises(lmclient.ConfigurationError, match=message):
        lmclient.Client(uds="/run/vllm.sock", http_client=http_client)


async def test_refused_together_with_http_client_async() -> None:
    async with httpx.AsyncClient() as http_client:
        with pytest.raises(lmclient.ConfigurationError, match=r"HTTPTransport\(uds="):
            lmclient.AsyncClient(uds="/run/vllm.sock", http_client=http_client)


@pytest.mark.parametrize(
    ("uds", "base_url", "message"),
    [
        ("/run/vllm.sock", "https://localhost/v1", "https base_url"),
        pytest.param(
            "/tmp/" + "a" * 103,
            None,
            "108 bytes long; a Unix socket's path holds at most 107",
            marks=LINUX,
        ),
        ("", None, "a socket's path"),
        ("/run/a\0b.sock", None, "a socket's path"),
        (b"/run/vllm.sock", None, "str or os.PathLike"),
        (8000, None, "str or os.PathLike"),
    ],
)
@pytest.mark.parametrize("cls", [lmclient.Client, lmclient.AsyncClient])
def test_refused_uds(cls: Any, uds: Any, base_url: str | None, message: str) -> None:
    with pytest.raises(lmclient.ConfigurationError, match=message.replace("(", r"\(")):
        cls(base_url, uds=uds)


@LINUX
def test_longest_path_is_accepted() -> None:
    path = "/tmp/" + "a" * 102  # 107 bytes: the most sun_path holds with its NUL (Linux)
    lmclient.Client(uds=path).close()


@pytest.mark.parametrize("cls", [lmclient.Client, lmclient.AsyncClient])
def test_unix_base_url_names_the_fix(cls: Any) -> None:
    with pytest.raises(lmclient.ConfigurationError, match=r"uds='/run/vllm.sock' instead"):
        cls("unix:///run/vllm.sock")


# -- the command line ------------------------------------------------------------------------------


@pytest.mark.slow  # a uvicorn process
def test_cli_uds(server: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    """``--uds PATH`` on the commands: the URL defaults to the socket's."""
    from lmclient._cli import main

    assert server.uds is not None
    assert main(["models", "--uds", server.uds]) == 0
    assert capsys.readouterr().out.split() == [MODEL]
    assert main(["generate", "cli", "--uds", server.uds, "--dialect", "vllm"]) == 0
    assert msgspec.json.decode(capsys.readouterr().out)["prompt"] == "cli"
    assert main(["probe", "--uds", server.uds]) == 0
    assert f"http://localhost/v1 over {server.uds}" in capsys.readouterr().out


# -- the project's fake on a socket ----------------------------------------------------------------


def test_fake_llm_serves_a_socket(short_dir: Path) -> None:
    """``FakeLLM().serve(uds=path)``: scripted replies, streams and auto-detection over the
    socket, the Host the client's base URL names; the socket file is gone afterwards."""
    path = short_dir / "fake.sock"
    fake = FakeLLM()
    fake.reply("scripted")
    with fake.serve(uds=path) as url:
        assert url == "http://localhost/v1" and path.is_socket()
        with lmclient.Client(uds=path) as client:  # model=None, dialect="auto"
            assert client.generate("hi") == "scripted"
            assert client.dialect == "vllm"
            opened = len(client._transport._pool.connections())  # the probes' (concurrent)
            with client.stream("again") as stream:
                assert "".join(stream) == "scripted" == stream.value
            assert client.generate("hi") == "scripted"
            assert len(client._transport._pool.connections()) == opened  # reused
    assert not path.exists()
    assert {r.headers["host"] for r in fake.requests} == {"localhost"}


async def test_fake_llm_serves_a_socket_async(short_dir: Path) -> None:
    path = short_dir / "fake.sock"
    fake = FakeLLM()
    with fake.serve(uds=str(path)):
        async with lmclient.AsyncClient(uds=path, dialect="vllm") as client:
            values = await asyncio.wait_for(client.generate_many(["a", "b", "c"], int), HANG)
            async with client.stream("count", list[int]) as stream:
                assert [item async for item in stream.items()] == stream.value
    assert all(isinstance(v, int) for v in values)
    assert not path.exists()
