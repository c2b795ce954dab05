"""Which proxy the environment sets for a server, read as httpx reads it (``trust_env``).

lmclient's own transports speak HTTP/1.1 straight to the server and cannot go through a proxy,
so a client whose server is behind one (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, not
excluded by ``NO_PROXY``) sends through httpx's transport instead, as httpx and the openai SDK
would: quietly going direct would fail, or worse, reach a different network. The rules are
httpx's (``get_environment_proxies``, ``URLPattern``): lowercase names win over uppercase,
``{scheme}_proxy`` over ``all_proxy``, a proxy without a scheme is ``http://``; a ``NO_PROXY``
entry is ``*`` (nothing is proxied), a URL (``http://host:port``), an IP address or
``localhost`` (that host exactly), ``.example.com`` (its subdomains) or ``example.com`` (it and
its subdomains), each optionally with ``:port``. Where httpx is quirky this is not: an entry's
port matches a URL that leaves it implicit (``h:80`` covers ``http://h``), an IP address never
matches as a domain suffix, and ``[::1]:8000`` is read.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

__all__ = ["environment_proxy", "proxied"]

T = TypeVar("T")

_DEFAULT_PORTS = {"http": 80, "https": 443}


def environment_proxy(url: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """The proxy URL the environment sets for requests to ``url``, or ``None`` (go direct)."""
    found: dict[str, str] = {}
    for key, value in environ.items():
        name = key.lower()
        if name.endswith("_proxy") and value and (key == name or name not in found):
            found[name] = value.strip()
    if not found:
        return None  # the common case, decided without parsing anything
    target = urlsplit(url)
    scheme = target.scheme.lower()
    proxy = found.get(f"{scheme}_proxy") or found.get("all_proxy")
    if not proxy or scheme not in _DEFAULT_PORTS:
        return None
    host = (target.hostname or "").lower()
    port = target.port or _DEFAULT_PORTS.get(scheme)
    for entry in found.get("no_proxy", "").split(","):
        entry = entry.strip().lower()
        if entry == "*" or (entry and _excludes(entry, scheme, host, port)):
            return None
    return proxy if "://" in proxy else f"http://{proxy}"


def proxied(transport: Callable[..., T], proxy: str, **options: Any) -> T:
    """``transport(proxy=proxy, **options)``, made when the client is: a proxy httpx cannot use
    (an unknown scheme, SOCKS without ``socksio``) fails there, naming the variables to fix (and
    not the proxy URL, which may hold a password)."""
    try:
        return transport(proxy=proxy, **options)
    except (ValueError, ImportError) as exc:
        raise ValueError(
            "the proxy that HTTP_PROXY, HTTPS_PROXY or ALL_PROXY sets for this server cannot be "
            f"used ({type(exc).__name__}: {exc}); fix it, or list the host in NO_PROXY"
        ) from None


def _excludes(entry: str, scheme: str, host: str, port: int | None) -> bool:
    """Whether one ``NO_PROXY`` entry covers ``scheme://host:port`` (a malformed one covers
    nothing)."""
    try:
        if "://" in entry:
            pattern = urlsplit(entry)
            if pattern.scheme != scheme:
                return False
            entry_host, entry_port = (pattern.hostname or ""), pattern.port
        else:
            entry_host, entry_port = _host_and_port(entry)
    except ValueError:
        return False
    if entry_port is not None and entry_port != port:
        return False
    if not entry_host or entry_host == host:
        return True
    if entry_host.startswith("."):  # subdomains only
        return host.endswith(entry_host)
    if entry_host == "localhost" or _is_ip(entry_host) or "://" in entry:
        return False  # those name one host exactly
    return host.endswith("." + entry_host)


def _host_and_port(entry: str) -> tuple[str, int | None]:
    """``host``, ``host:port``, ``[v6]:port`` or a bare IPv6 address (whose colons are not a
    port)."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    if entry.count(":") == 1:
        host, _, port = entry.partition(":")
        if port.isdigit():
            return host, int(port)
    return entry, None


def _is_ip(host: str) -> bool:
    return ":" in host or host.replace(".", "").isdigit()
