"""What a client is configured with, checked once when it is made: the base URL, the headers and
the API key. Every request a client sends carries them, so a value that would break the request
head fails here, as one `ConfigurationError`, instead of at the first call (or, on httpx's paths,
as httpx's or h11's own exception).

The rules, and why:

* The base URL is an ``http`` or ``https`` URL with a host and no query or fragment: lmclient
  appends ``/chat/completions`` and the like to it, which a query or fragment would swallow.
  Its trailing slashes are dropped (``/v1/`` is ``/v1``); an empty segment inside its path
  (``http://host//v1``) is refused, as no server routes it.
* A port, if the URL has one, is 1 to 65535 in ASCII digits. httpx reads ``:99999`` and ``:0``
  as given (a socket then connects to the number modulo 65536, or to port 80, and an asyncio
  one raises `OverflowError`) and ``:+80``, ``: 80``, ``:٣`` and ``host:`` as ports too, so the
  URL's own text is checked, once httpx has parsed it, and whichever transport then sends (its
  own, a user's httpx client, or a Unix socket's Host header) gets a port the URL says.
* Credentials in the URL (``http://user:pass@host/v1``) become ``Authorization: Basic`` as httpx
  sends them, and are removed from the URL that lmclient keeps, logs and shows. Given with an
  ``api_key`` argument as well, they are refused (which one was meant?); an API key from the
  environment gives way to them.
* A header name is an RFC 9110 token; a value holds no control character but horizontal tab
  (CR or LF would end the line and let the value inject headers or a whole request, NUL is
  refused by every HTTP/1.1 parser) and only Latin-1 characters (what an HTTP/1.1 head can carry
  byte for byte). The API key obeys the same rule, and no message quotes it; the
  ``Authorization`` value it makes is a `lmclient._secrets.Secret`, whose ``repr`` hides it.
* The headers that frame a message or manage its connection (``Host``, ``Content-Length``,
  ``Transfer-Encoding``, ``Connection`` and the other hop-by-hop ones) are lmclient's to set: one
  from the user would disagree with the body actually sent, or with the connection's reuse, and
  httpx and lmclient's own transport would each handle it differently.
* A Unix socket (``uds=``, as httpx's ``HTTPTransport(uds=...)``) replaces the TCP connection
  only: the base URL still gives the ``Host`` header and the paths, and defaults to
  ``http://localhost/v1`` (not to the environment's base URL, which names a TCP server). A
  ``unix://`` base URL is refused rather than guessed at: its path is the socket's, so the HTTP
  path (``/v1``) would have to be invented, and ``unix:///run/vllm.sock/v1`` is ambiguous. TLS
  over a socket is refused (no server here offers it); so is a path the kernel cannot hold
  (``sun_path``: 107 bytes on Linux, 103 on macOS and the BSDs), before any request.
"""

from __future__ import annotations

import base64
import os
import re
import socket
import sys
from collections.abc import Mapping

import httpx

from .__version__ import __version__
from ._secrets import Secret
from .errors import ConfigurationError

__all__ = [
    "UDS_BASE_URL",
    "ClientURL",
    "client_headers",
    "client_uds",
    "client_url",
    "header_problem",
]

UDS_BASE_URL = "http://localhost/v1"  # the base URL of a client given only uds=
_SUN_PATH = 108 if sys.platform == "linux" else 104  # sockaddr_un's path, with its NUL

_AUTHORITY_END = re.compile(r"[/?#]")
_PORT = re.compile(r"[0-9]{1,5}")  # (str.isdigit() would take other scripts' digits)
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(r"[^\t\x20-\x7e\x80-\xff]")
_LMCLIENT_SETS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
    }
)


class ClientURL:
    """A checked base URL: without credentials, and the ``Authorization`` value they make."""

    __slots__ = ("authorization", "base_url", "host")

    def __init__(self, base_url: str, host: str, authorization: str | None) -> None:
        self.base_url = base_url
        self.host = host
        self.authorization = authorization


def client_url(base_url: str) -> ClientURL:
    """Check ``base_url`` and take its credentials out of it (see the module's rules)."""
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL as exc:
        raise ConfigurationError(f"base_url is not a valid URL: {exc}") from None
    port_problem = _port_problem(base_url)
    if port_problem:
        raise ConfigurationError(port_problem)
    authorization = None
    if url.userinfo:
        credentials = f"{url.username}:{url.password}".encode()
        authorization = "Basic " + base64.b64encode(credentials).decode("ascii")
        url = url.copy_with(username=None, password=None)
    shown = str(url)  # without the credentials
    if url.scheme == "unix":
        raise ConfigurationError(
            f"base_url {shown!r}: pass the socket as uds='{url.path}' instead (base_url then "
            f"defaults to {UDS_BASE_URL!r}: the Host header and the API's path)"
        )
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigurationError(f"base_url must be an http(s) URL with a host, not {shown!r}")
    if url.query or url.fragment:
        raise ConfigurationError(
            f"base_url must have no query or fragment (lmclient appends paths to it): {shown!r}"
        )
    if "//" in url.path.rstrip("/"):
        raise ConfigurationError(
            f"base_url {shown!r} has an empty path segment ('//'), a path servers do not "
            "route: write it with single slashes (e.g. http://127.0.0.1:8000/v1)"
        )
    return ClientURL(shown.rstrip("/"), url.host, authorization)


def _port_problem(base_url: str) -> str | None:
    """What is wrong with the port in ``base_url``'s authority (``None``: nothing, or no port),
    read from the text itself: httpx accepts ports out of range and normalises malformed ones
    away. The credentials are cut off first (a password may hold a colon) and never quoted."""
    scheme, sep, rest = base_url.partition("://")
    if not sep:
        return None  # not a URL with an authority: httpx's parse and the scheme check say why
    authority = _AUTHORITY_END.split(rest, 1)[0].rpartition("@")[2]
    host_end = authority.rfind("]") + 1  # after an IPv6 literal's brackets, if any
    host, colon, port = authority[host_end:].partition(":")
    if not colon:
        return None
    shown = f"{scheme}://{authority[:host_end]}{host}"
    if not _PORT.fullmatch(port):
        return f"base_url {shown}:{port!r}: a port is 1 to 5 ASCII digits"
    if not 1 <= int(port) <= 65535:
        return f"base_url {shown}:{port}: a port is 1 to 65535, not {int(port)}"
    return None


def client_uds(uds: str | os.PathLike[str], url: ClientURL) -> str:
    """The checked path of ``uds=`` (see the module's rules)."""
    try:
        path = os.fspath(uds)
    except TypeError:
        path = None
    if not isinstance(path, str):
        raise ConfigurationError(f"uds must be a str or os.PathLike path, not {uds!r}")
    if not hasattr(socket, "AF_UNIX"):
        raise ConfigurationError("uds=: Unix sockets are not available on this platform")
    if not path or "\0" in path:
        raise ConfigurationError(f"uds must be a socket's path, not {path!r}")
    size = len(os.fsencode(path))
    if size >= _SUN_PATH:
        raise ConfigurationError(
            f"uds={path!r} is {size} bytes long; a Unix socket's path holds at most "
            f"{_SUN_PATH - 1} here: use a shorter one (a relative path, or a symlink to the "
            "socket's directory)"
        )
    if url.base_url.startswith("https:"):
        raise ConfigurationError(
            f"uds= with an https base_url ({url.base_url!r}): lmclient speaks plain HTTP over a "
            "Unix socket; use an http:// base_url"
        )
    return path


def client_headers(
    headers: Mapping[str, str] | None,
    *,
    api_key: str | None,
    api_key_given: bool,
    url: ClientURL,
) -> dict[str, str]:
    """The checked headers every request of the client carries (lower-cased names), with its
    credentials: ``api_key`` (``api_key_given`` when the caller passed it rather than the
    environment) or those of the URL."""
    out = {"accept": "application/json", "user-agent": f"lmclient/{__version__}"}
    for name, value in (headers or {}).items():
        problem = header_problem(name, value)
        if problem:
            raise ConfigurationError(problem)
        out[name.lower()] = value
    if url.authorization is not None:
        if api_key and api_key_given:
            raise ConfigurationError(
                "base_url carries credentials and api_key= was given too: pass only one"
            )
        out["authorization"] = Secret(url.authorization)
    elif api_key:
        if _BAD_VALUE.search(api_key):
            raise ConfigurationError(
                "api_key holds a character that cannot go in an HTTP header (a control "
                "character such as CR, LF or NUL, or one outside Latin-1)"
            )
        out["authorization"] = Secret(f"Bearer {api_key}")
    return out


def header_problem(name: object, value: object) -> str | None:
    """What is wrong with one header a user gives (``None``: nothing), by the module's rules:
    the client's headers and a call's ``headers=`` are held to the same ones."""
    if not isinstance(name, str) or not _TOKEN.fullmatch(name):
        return f"header name {name!r} is not an HTTP token"
    if name.lower() in _LMCLIENT_SETS:
        return (
            f"header {name!r} is set by lmclient (it frames the request or manages the "
            "connection); leave it out of headers="
        )
    if not isinstance(value, str) or _BAD_VALUE.search(value):
        return (
            f"the value of header {name!r} must be a str of Latin-1 characters without "
            "control characters (CR, LF and NUL would break the request head)"
        )
    return None
