"""Environment proxies: the rules, then a real forward proxy on 127.0.0.1 in front of the fake."""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest

import lmclient
from lmclient._proxies import environment_proxy
from lmclient.testing import FakeLLM

WAIT = 10.0
MODEL = "fake-model"  # what FakeLLM serves
PROXY = "http://proxy:3128"


@pytest.mark.parametrize(
    ("environ", "url", "expected"),
    [
        ({}, "http://h/v1", None),
        ({"HTTP_PROXY": PROXY}, "http://h/v1", PROXY),
        ({"HTTP_PROXY": PROXY}, "https://h/v1", None),  # no HTTPS_PROXY
        ({"HTTPS_PROXY": PROXY}, "https://h/v1", PROXY),
        ({"ALL_PROXY": PROXY}, "https://h/v1", PROXY),
        ({"all_proxy": PROXY, "http_proxy": "http://p2:1"}, "http://h/v1", "http://p2:1"),
        ({"HTTP_PROXY": "http://upper:1", "http_proxy": PROXY}, "http://h/v1", PROXY),
        ({"HTTP_PROXY": "proxy:3128"}, "http://h/v1", PROXY),  # no scheme: http://
        ({"HTTP_PROXY": ""}, "http://h/v1", None),
        ({"HTTP_PROXY": PROXY, "NO_PROXY": "*"}, "http://h/v1", None),
        ({"HTTP_PROXY": PROXY, "NO_PROXY": "a, h ,b"}, "http://h/v1", None),
        ({"HTTP_PROXY": PROXY, "NO_PROXY": "example.com"}, "http://example.com/v1", None),
        ({"HTTP_PROXY": PROXY, "NO_PROXY": "example.com"}, "http://gpu.example.com/v1", None),
        ({"HTTP_PROXY": PROXY, "NO_PROXY": "example.com"}, "http://badexample.com/v1", PROXY),
        ({"HTTP_PROXY": PROXY, "NO_PROXY": ".example.com"}, "http://gpu.example.com/v1", None),
        ({"HTTP_PROXY": PROXY, "NO_PROXY": ".example.com"}, "http://example.com/v1", PROXY),
        ({"HTTP_PROXY": PROXY, "NO_PROXY": "h:8000"}, "http://h:8000/v1", None),
        ({"HTTP_PROXY": PROXY, "NO_PROXY": "h:8000"}, "http://h:9000/v1", PROXY),
        ({"HTTP_PROXY": PROXY, "NO_PROXY": "h:80"}, "http://h/v1", None),  # the default port
        ({"HTTP_PROXY": PROXY, "NO_PROXY": "10.0.0.5"}, "http://10.0.0.5:8000/v1", None),
        ({"HTTP_PROXY": PROXY, "NO_PROXY": "0.0.5"}, "http://10.0.0.5/v1", PROXY),  # IPs: exact
        ({"HTTP_PROXY": PROXY, "NO_PROXY": "::1"}, "http://[::1]:8000/v1", None),
        ({"HTTP_PROXY": PROXY, "NO_PROXY": "[::1]:8000"}, "http://[::1]:8000/v1", None),
        ({"HTTP_PROXY": PROXY, "NO_PROXY": "localhost"}, "http://LOCALHOST:8000/v1", None),
        ({"HTTP_PROXY": PROXY, "NO_PROXY": "http://h"}, "http://h:8000/v1", None),
        ({"ALL_PROXY": PROXY, "NO_PROXY": "http://h"}, "https://h/v1", PROXY),  # other scheme
        ({"HTTP_PROXY": PROXY, "NO_PROXY": "http://h:99999"}, "http://h/v1", PROXY),  # malformed
        ({"ALL_PROXY": PROXY}, "/v1", None),  # not a URL a proxy can serve
    ],
)
def test_which_proxy_the_environment_sets(
    environ: dict[str, str], url: str, expected: str | None
) -> None:
    assert environment_proxy(url, {"PATH": "/bin", **environ}) == expected


class _Proxy(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        super().__init__(("127.0.0.1", 0), _ForwardHandler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _ForwardHandler(BaseHTTPRequestHandler):
    """An HTTP forward proxy: takes the absolute-form request line, asks the origin, and answers
    with the whole response (SSE streams end, so they fit)."""

    protocol_version = "HTTP/1.1"
    server: _Proxy

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def _forward(self) -> None:
        self.server.seen.append((self.command, self.path))
        target = urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        hop_by_hop = {"connection", "proxy-connection", "keep-alive", "host"}
        headers = {k: v for k, v in self.headers.items() if k.lower() not in hop_by_hop}
        origin = http.client.HTTPConnection(target.hostname or "", target.port, timeout=WAIT)
        try:
            origin.request(self.command, target.path, body, headers)
            answer = origin.getresponse()
            data = answer.read()
        finally:
            origin.close()
        self.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in ("transfer-encoding", "content-length", "connection"):
                self.send_header(key, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _forward


@pytest.fixture
def proxy() -> Iterator[_Proxy]:
    server = _Proxy()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(WAIT)


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No proxy variable from the machine running the tests: each test sets its own."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    return monkeypatch


def test_a_server_behind_the_environments_proxy_is_reached_through_it(
    fake: FakeLLM, url: str, proxy: _Proxy, environment: pytest.MonkeyPatch
) -> None:
    fake.reply("yes", times=1)
    environment.setenv("HTTP_PROXY", proxy.url)
    with lmclient.Client(url, model=MODEL, dialect="vllm", api_key="k") as client:
        assert client.generate("Q", lmclient.Choice(["yes", "no"])) == "yes"
        with client.stream("Q") as stream:
            text = "".join(stream)
    assert text == fake.default_text
    assert proxy.seen == [("POST", f"{url}/chat/completions")] * 2
    assert fake.calls[0].headers["authorization"] == "Bearer k"


async def test_async_a_server_behind_the_environments_proxy_is_reached_through_it(
    fake: FakeLLM, url: str, proxy: _Proxy, environment: pytest.MonkeyPatch
) -> None:
    fake.reply("yes", times=1)
    environment.setenv("http_proxy", proxy.url)
    async with lmclient.AsyncClient(url, model=MODEL, dialect="vllm") as client:
        assert await client.generate("Q", lmclient.Choice(["yes", "no"])) == "yes"
        async with client.stream("Q") as stream:
            text = "".join([delta async for delta in stream])
    assert text == fake.default_text
    assert proxy.seen == [("POST", f"{url}/chat/completions")] * 2


@pytest.mark.parametrize("client_class", [lmclient.Client, lmclient.AsyncClient])
async def test_no_proxy_keeps_the_direct_transport(
    client_class: Any, fake: FakeLLM, url: str, proxy: _Proxy, environment: pytest.MonkeyPatch
) -> None:
    environment.setenv("HTTP_PROXY", proxy.url)
    environment.setenv("NO_PROXY", "localhost,127.0.0.1")
    client = client_class(url, model=MODEL, dialect="vllm")
    value = client.generate("Q")
    if client_class is lmclient.AsyncClient:
        value = await value
        await client.aclose()
    else:
        client.close()
    assert value == fake.default_text
    assert proxy.seen == []


@pytest.mark.parametrize("client_class", [lmclient.Client, lmclient.AsyncClient])
async def test_an_unreachable_proxy_is_a_connection_error(
    client_class: Any, url: str, environment: pytest.MonkeyPatch
) -> None:
    """The server itself is up: going direct would answer."""
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    environment.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
    client = client_class(url, model=MODEL, dialect="vllm")
    with pytest.raises(lmclient.APIConnectionError):
        if client_class is lmclient.AsyncClient:
            try:
                await client.generate("Q", max_retries=0)
            finally:
                await client.aclose()
        else:
            with client:
                client.generate("Q", max_retries=0)


@pytest.mark.parametrize("proxy_url", ["ftp://proxy:21", "socks5://user:secret@proxy:1080"])
def test_a_proxy_httpx_cannot_use_fails_when_the_client_is_made(
    proxy_url: str, environment: pytest.MonkeyPatch
) -> None:
    environment.setenv("ALL_PROXY", proxy_url)
    for client_class in (lmclient.Client, lmclient.AsyncClient):
        with pytest.raises(ValueError, match="HTTP_PROXY, HTTPS_PROXY or ALL_PROXY") as caught:
            client_class("http://h/v1", model="m")
        assert "secret" not in str(caught.value)


def test_a_users_http_client_decides_for_itself(
    fake: FakeLLM, url: str, proxy: _Proxy, environment: pytest.MonkeyPatch
) -> None:
    import httpx

    environment.setenv("HTTP_PROXY", "ftp://not-usable")  # would fail if lmclient read it
    http_client = httpx.Client(trust_env=False)
    with http_client, lmclient.Client(url, model=MODEL, http_client=http_client) as client:
        assert client.generate("Q") == fake.default_text
    assert proxy.seen == []
