"""An error response, read: its status and body become the typed exception of `errors`, its
headers the delay the server asked for.

Servers disagree on the shape of an error body, so every known envelope is read here (see
`error_info`); a body in none of them still yields an error with its text, never a crash.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from typing import Any

import msgspec

from . import errors
from ._types import DECODE_ERRORS

__all__ = ["ErrorInfo", "api_error", "error_info", "retry_after"]

_STATUS_ERRORS: dict[int, type[errors.APIError]] = {
    400: errors.BadRequestError,
    422: errors.BadRequestError,
    401: errors.AuthenticationError,
    403: errors.PermissionDeniedError,
    404: errors.NotFoundError,
    429: errors.RateLimitError,
    424: errors.ServerError,  # TGI: generation error
}


def api_error(status: int, headers: Mapping[str, str], body: bytes) -> errors.APIError:
    """The typed error for an error response, from any server's envelope."""
    try:
        decoded: Any = msgspec.json.decode(body)
    except DECODE_ERRORS:
        decoded = body.decode("utf-8", "replace")
    info = error_info(decoded)
    if info is not None:
        message, kind, code, param = info.message, info.type, info.code, info.param
    else:
        text = decoded.strip() if isinstance(decoded, str) else ""
        message = text[:500] or f"HTTP {status}"
        kind = code = param = None
    cls = _STATUS_ERRORS.get(status) or (errors.ServerError if status >= 500 else errors.APIError)
    return cls(
        message,
        status_code=status,
        type=kind,
        code=code,
        param=param,
        body=decoded,
        request_id=headers.get("x-request-id"),
        retry_after=retry_after(headers),
        should_retry={"true": True, "false": False}.get(headers.get("x-should-retry", "")),
    )


def retry_after(headers: Mapping[str, str]) -> float | None:
    """The delay a server asked for: ``retry-after-ms``, then ``Retry-After`` (seconds or date)."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(float(ms) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


class ErrorInfo(msgspec.Struct):
    """The parts of any server's error envelope lmclient reports."""

    message: str
    type: str | None = None
    code: str | int | None = None
    param: str | None = None


def error_info(body: Any) -> ErrorInfo | None:
    """Read every known envelope: ``{"error": {...}}`` (OpenAI, vLLM ≥ 0.10.1, llama.cpp),
    ``{"error": "text", "error_type"?}`` (TGI, LM Studio, vLLM 401), flat ``{"message": …}``
    (SGLang, old vLLM) and FastAPI's ``{"detail": …}``."""
    if not isinstance(body, dict):
        return None
    err = body.get("error")
    if isinstance(err, dict) and err.get("message") is not None:
        return _info(err)
    if isinstance(err, str):
        return ErrorInfo(err, _str(body.get("error_type")))
    if body.get("message") is not None:
        return _info(body)
    detail = body.get("detail")
    if detail is not None:
        text = detail if isinstance(detail, str) else msgspec.json.encode(detail).decode()
        return ErrorInfo(text)
    return None


def _info(obj: dict[str, Any]) -> ErrorInfo:
    code = obj.get("code")
    return ErrorInfo(
        str(obj["message"]),
        _str(obj.get("type")),
        code if isinstance(code, (str, int)) and not isinstance(code, bool) else None,
        _str(obj.get("param")),
    )


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
