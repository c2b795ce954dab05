"""The client's credentials kept out of what lmclient shows: reprs, exceptions, log lines.

lmclient never puts a request header into a message, but a server may: one that echoes the
``Authorization`` header in an error body (a debugging proxy, a misconfigured gateway) would put
the key into ``str(exception)``, ``APIError.body`` and the WARNING line of a retry. And error
trackers that record every frame's locals record the ``repr`` of what a call holds (its `Call`,
its `PreparedRequest`, their header lists). So:

* the ``Authorization`` value is a `Secret`: a ``str`` that goes on the wire as it is, and
  whose ``repr`` is ``'<redacted>'`` (a list, tuple or struct that holds it shows that);
* `scrub` takes the client's credentials (the whole value, the token after its scheme, a Basic
  pair's password) out of an exception's message and of the server's text it carries, in place,
  before the exception is logged or raised. It runs only on the error path.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from typing import Any

__all__ = ["REDACTED", "Secret", "scrub", "scrub_text", "secrets_of"]

REDACTED = "<redacted>"
_SHORTEST = 4  # a shorter "secret" would blank ordinary text; no real key is that short
_ATTRIBUTES = ("message", "body", "text", "detail", "refusal", "attempts", "request_id")


class Secret(str):
    """A credential: sent as it is, shown as ``'<redacted>'``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return repr(REDACTED)


def secrets_of(headers: Iterable[tuple[str, str]]) -> list[str]:
    """What of ``headers`` must not be shown, longest first (a value before its token)."""
    found: list[str] = []
    for _, value in headers:
        if not isinstance(value, Secret):
            continue
        found.append(str(value))
        scheme, _, token = value.partition(" ")
        found.append(token)
        if scheme.lower() == "basic":
            try:
                pair = base64.b64decode(token, validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                continue
            found.append(pair)
            found.append(pair.partition(":")[2])
    return sorted({s for s in found if len(s) >= _SHORTEST}, key=len, reverse=True)


def scrub_text(value: Any, secrets: list[str]) -> Any:
    """``value`` (text, bytes, or JSON-like containers of them) without ``secrets``."""
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, bytes):
        for secret in secrets:
            encoded = secret.encode("latin-1")
            if encoded in value:
                value = value.replace(encoded, REDACTED.encode())
        return value
    if isinstance(value, list):
        return [scrub_text(v, secrets) for v in value]
    if isinstance(value, tuple):
        return tuple(scrub_text(v, secrets) for v in value)
    if isinstance(value, dict):
        return {scrub_text(k, secrets): scrub_text(v, secrets) for k, v in value.items()}
    return value


def scrub(exc: BaseException, headers: Iterable[tuple[str, str]]) -> None:
    """Take the credentials among ``headers`` out of ``exc``'s message and the server's text
    it carries (in place: the exception is the one about to be logged or raised)."""
    secrets = secrets_of(headers)
    if not secrets:
        return
    exc.args = scrub_text(exc.args, secrets)
    for name in _ATTRIBUTES:
        value = getattr(exc, name, None)
        if value is not None:
            setattr(exc, name, scrub_text(value, secrets))
