"""The client's configuration, checked once when it is made (`lmclient._config`): the base URL,
the Unix socket's path, the headers and the API key, each refused with a `ConfigurationError`
that says why (the rules are the module's docstring). Through the clients and on the wire:
test_ports.py, tests/transports/test_transport_safety.py and tests/transports/test_uds.py."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import pytest

from lmclient import __version__
from lmclient._config import (
    UDS_BASE_URL,
    ClientURL,
    client_headers,
    client_uds,
    client_url,
    header_problem,
)
from lmclient._secrets import Secret
from lmclient.errors import ConfigurationError

# -- the base URL ---------------------------------------------------------------------------------


def test_a_plain_url_is_kept_without_its_trailing_slash() -> None:
    url = client_url("http://127.0.0.1:8000/v1/")
    assert (url.base_url, url.host, url.authorization) == (
        "http://127.0.0.1:8000/v1",
        "127.0.0.1",
        None,
    )


def test_credentials_leave_the_url_and_become_basic_authorization() -> None:
    url = client_url("https://user:p%40ss:word@llm.example/v1")
    assert url.base_url == "https://llm.example/v1"
    assert url.authorization is not None and url.authorization.startswith("Basic ")
    assert base64.b64decode(url.authorization[6:]) == b"user:p@ss:word"


@pytest.mark.parametrize(
    ("base_url", "says"),
    [
        ("ftp://host/v1", "must be an http(s) URL with a host"),
        ("/v1", "must be an http(s) URL with a host"),
        ("http://host/v1?key=1", "must have no query or fragment"),
        ("http://host/v1#top", "must have no query or fragment"),
        ("unix:///run/vllm.sock", "pass the socket as uds='/run/vllm.sock' instead"),
        ("http://[::1/v1", "is not a valid URL"),
        ("http://host:99999/v1", "a port is 1 to 65535, not 99999"),
        ("http://host:0/v1", "a port is 1 to 65535, not 0"),
        ("http://host:+80/v1", "a port is 1 to 5 ASCII digits"),
        ("http://host:/v1", "a port is 1 to 5 ASCII digits"),
        ("http://host:\u0663/v1", "a port is 1 to 5 ASCII digits"),  # an Arabic-Indic 3
        ("http://[::1]:70000/v1", "base_url http://[::1]:70000"),
    ],
)
def test_a_bad_base_url_is_refused_saying_why(base_url: str, says: str) -> None:
    with pytest.raises(ConfigurationError, match="base_url") as info:
        client_url(base_url)
    assert says in str(info.value)


def test_an_ipv6_host_with_a_port_is_read_past_its_brackets() -> None:
    url = client_url("http://[::1]:8080/v1")
    assert (url.base_url, url.host) == ("http://[::1]:8080/v1", "::1")


def test_a_bad_port_is_shown_without_the_credentials() -> None:
    """A password may hold a colon: the port is read after the ``@``, and never quoted with it."""
    with pytest.raises(ConfigurationError) as info:
        client_url("http://user:pa:ss@host:99999/v1")
    assert "pa:ss" not in str(info.value) and "user" not in str(info.value)


# -- uds= -----------------------------------------------------------------------------------------

PLAIN = ClientURL(UDS_BASE_URL, "localhost", None)


def test_a_socket_path_is_taken_as_str_or_path_like() -> None:
    assert client_uds("/run/llm.sock", PLAIN) == "/run/llm.sock"
    assert client_uds(Path("/run/llm.sock"), PLAIN) == "/run/llm.sock"


@pytest.mark.parametrize(
    ("uds", "says"),
    [
        (3, "uds must be a str or os.PathLike path, not 3"),
        (b"/run/llm.sock", "uds must be a str or os.PathLike path"),
        ("", "uds must be a socket's path"),
        ("/run/a\0b", "uds must be a socket's path"),
        ("/" + "s" * 200, "a Unix socket's path holds at most"),
    ],
)
def test_a_bad_socket_path_is_refused(uds: object, says: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        client_uds(uds, PLAIN)  # type: ignore[arg-type]
    assert says in str(info.value)


def test_the_longest_path_the_kernel_holds_is_taken_and_one_more_is_refused() -> None:
    room = 107 if sys.platform == "linux" else 103  # sun_path, less its NUL
    assert client_uds("/" + "s" * (room - 1), PLAIN) == "/" + "s" * (room - 1)
    with pytest.raises(ConfigurationError, match=f"is {room + 1} bytes long; .* at most {room}"):
        client_uds("/" + "s" * room, PLAIN)


def test_tls_over_a_socket_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="use an http:// base_url"):
        client_uds("/run/llm.sock", client_url("https://localhost/v1"))


# -- the headers and the key ----------------------------------------------------------------------


def test_every_request_says_what_it_accepts_and_who_sends_it() -> None:
    assert client_headers(None, api_key=None, api_key_given=False, url=PLAIN) == {
        "accept": "application/json",
        "user-agent": f"lmclient/{__version__}",
    }


def test_the_user_s_headers_are_kept_under_lower_case_names_and_may_replace_the_defaults() -> None:
    headers = client_headers(
        {"X-Team": "a", "User-Agent": "mine/1"}, api_key=None, api_key_given=False, url=PLAIN
    )
    assert headers == {"accept": "application/json", "user-agent": "mine/1", "x-team": "a"}


def test_the_api_key_is_a_bearer_secret() -> None:
    headers = client_headers(None, api_key="sk-1", api_key_given=True, url=PLAIN)
    assert headers["authorization"] == "Bearer sk-1"
    assert isinstance(headers["authorization"], Secret)
    assert "sk-1" not in repr(headers)


def test_the_url_s_credentials_win_over_a_key_from_the_environment() -> None:
    url = client_url("http://u:p@host/v1")
    headers = client_headers(None, api_key="sk-env", api_key_given=False, url=url)
    assert headers["authorization"] == url.authorization
    assert isinstance(headers["authorization"], Secret)


def test_credentials_in_the_url_and_a_key_given_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="pass only one"):
        client_headers(None, api_key="sk-1", api_key_given=True, url=client_url("http://u:p@h/v1"))


@pytest.mark.parametrize("key", ["sk-1\r\nx-injected: 1", "sk\0", "sk-€"])
def test_a_key_that_cannot_go_in_a_header_is_refused_without_quoting_it(key: str) -> None:
    with pytest.raises(ConfigurationError, match="api_key holds a character") as info:
        client_headers(None, api_key=key, api_key_given=True, url=PLAIN)
    assert key not in str(info.value)


def test_a_bad_header_is_refused_when_the_client_is_made() -> None:
    with pytest.raises(ConfigurationError, match="is not an HTTP token"):
        client_headers({"bad name": "v"}, api_key=None, api_key_given=False, url=PLAIN)


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("bad name", "v", "header name 'bad name' is not an HTTP token"),
        ("", "v", "is not an HTTP token"),
        (3, "v", "header name 3 is not an HTTP token"),
        ("Content-Length", "1", "header 'Content-Length' is set by lmclient"),
        ("host", "h", "is set by lmclient"),
        ("Transfer-Encoding", "chunked", "is set by lmclient"),
        ("x-a", "b\r\nx-b: c", "the value of header 'x-a' must be a str of Latin-1"),
        ("x-a", "b\0", "must be a str of Latin-1"),
        ("x-a", "snow ☃", "must be a str of Latin-1"),
        ("x-a", 1, "must be a str of Latin-1"),
    ],
)
def test_header_problem_says_what_is_wrong(name: object, value: object, says: str) -> None:
    problem = header_problem(name, value)
    assert problem is not None and says in problem


@pytest.mark.parametrize(
    ("name", "value"),
    [("x-a", ""), ("X-Tab", "a\tb"), ("x-latin", "café"), ("!#$%&'*+-.^_`|~09Az", "v")],
)
def test_header_problem_lets_valid_headers_through(name: str, value: str) -> None:
    assert header_problem(name, value) is None
