"""A ``base_url`` port outside 1–65535, or not written as one, is refused when the client is
made (`ConfigurationError`), whichever way the client would send: its own transport, a user's
httpx client, a Unix socket (whose URL still names the Host), or a URL from the environment.
Before, ``:99999`` reached port 34463 (99999 - 65536) with the key, ``:0`` port 80, and the
async client raised a bare `OverflowError` at the first call."""

from __future__ import annotations

import sys
from typing import Any

import httpx
import pytest

import lmclient
from lmclient.errors import ConfigurationError

BAD = [
    ("http://127.0.0.1:99999/v1", "1 to 65535, not 99999"),
    ("http://127.0.0.1:65536/v1", "1 to 65535, not 65536"),
    ("http://127.0.0.1:0/v1", "1 to 65535, not 0"),
    ("http://127.0.0.1:00000/v1", "1 to 65535, not 0"),
    ("http://[::1]:70000/v1", "1 to 65535, not 70000"),
    ("http://127.0.0.1:/v1", "1 to 5 ASCII digits"),
    ("http://127.0.0.1:", "1 to 5 ASCII digits"),
    ("http://127.0.0.1:abc/v1", "port"),  # httpx's own refusal: "Invalid port"
    ("http://127.0.0.1:-1/v1", "1 to 5 ASCII digits"),
    ("http://127.0.0.1:+80/v1", "1 to 5 ASCII digits"),
    ("http://127.0.0.1: 80/v1", "1 to 5 ASCII digits"),
    ("http://127.0.0.1:1e3/v1", "port"),
    ("http://127.0.0.1:٣/v1", "1 to 5 ASCII digits"),  # an Arabic-Indic digit: int() reads 3
    ("http://127.0.0.1:123456/v1", "1 to 5 ASCII digits"),
    ("http://127.0.0.1:80:81/v1", "port"),
    ("http://user:secret@127.0.0.1:99999/v1", "1 to 65535, not 99999"),
]
GOOD = [
    "http://127.0.0.1:1/v1",
    "http://127.0.0.1:65535/v1",
    "http://127.0.0.1:08000/v1",  # leading zeros are digits (RFC 3986)
    "http://[::1]:8000/v1",
    "http://[::1]/v1",
    "http://user:pa:ss@127.0.0.1/v1",  # a colon in the password is not a port
    "https://example.com/v1",
]
CLIENTS = [lmclient.Client, lmclient.AsyncClient]


def _http_client(cls: Any) -> httpx.Client | httpx.AsyncClient:
    return httpx.Client() if cls is lmclient.Client else httpx.AsyncClient()


@pytest.mark.parametrize(("url", "message"), BAD)
@pytest.mark.parametrize("cls", CLIENTS)
def test_refused_on_the_own_transport(cls: Any, url: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as caught:
        cls(url, "m", api_key="sk-port-test")
    assert "secret" not in str(caught.value) and "sk-port-test" not in str(caught.value)


@pytest.mark.parametrize(("url", "message"), BAD)
@pytest.mark.parametrize("cls", CLIENTS)
async def test_refused_with_a_users_httpx_client(cls: Any, url: str, message: str) -> None:
    http_client = _http_client(cls)
    try:
        with pytest.raises(ConfigurationError, match=message):
            cls(url, "m", http_client=http_client)
    finally:
        if isinstance(http_client, httpx.AsyncClient):
            await http_client.aclose()
        else:
            http_client.close()


@pytest.mark.skipif(sys.platform == "win32", reason="Unix sockets")
@pytest.mark.parametrize(("url", "message"), BAD)
@pytest.mark.parametrize("cls", CLIENTS)
def test_refused_beside_a_unix_socket(cls: Any, url: str, message: str) -> None:
    """Over a socket the port is never dialled, but the URL still gives the Host header."""
    with pytest.raises(ConfigurationError, match=message):
        cls(url, "m", uds="/tmp/lmclient-no-such.sock")


@pytest.mark.parametrize("cls", CLIENTS)
def test_refused_from_the_environment(cls: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LMCLIENT_BASE_URL", "http://127.0.0.1:99999/v1")
    with pytest.raises(ConfigurationError, match="not 99999"):
        cls(model="m")


@pytest.mark.parametrize("url", GOOD)
@pytest.mark.parametrize("cls", CLIENTS)
def test_valid_ports_are_kept(cls: Any, url: str) -> None:
    client = cls(url, "m")
    assert "base_url=" in repr(client)
