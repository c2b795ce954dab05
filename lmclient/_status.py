"""An error response, read: its status and body become the typed exception of `errors`, its
headers the delay the server asked for.

Servers disagree on the shape of an error body, so every known envelope is read here (see
`error_info`); a body in none of them still yields an error with its text, never a crash.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping
from typing import Any

import msgspec

from . import errors
from ._output.depth import body_decoder

__all__ = ["ErrorInfo", "api_error", "error_info", "retry_after"]

_STATUS_ERRORS: dict[int, type[errors.APIStatusError]] = {
    400: errors.BadRequestError,
    422: errors.BadRequestError,
    401: errors.AuthenticationError,
    403: errors.PermissionDeniedError,
    404: errors.NotFoundError,
    429: errors.RateLimitError,
    424: errors.ServerError,  # TGI: generation error
}


def api_error(status: int, headers: Mapping[str, str], body: bytes) -> errors.APIStatusError:
    """The typed error for an error response, from any server's envelope; ``headers`` has
    lower-case names (a transport's), kept for `APIStatusError.headers`."""
    try:
        decoded: Any = _error_body(body)
    except errors.ProtocolError:  # not JSON, or nested too deep: read as text
        decoded = body.decode("utf-8", "replace")
    info = error_info(decoded)
    if info is not None:
        message, kind, code, param = info.message, info.type, info.code, info.param
    else:
        text = decoded.strip() if isinstance(decoded, str) else ""
        message = _shown_text(text, headers) or f"HTTP {status}"
        kind = code = param = None
    cls = _STATUS_ERRORS.get(status) or (
        errors.ServerError if status >= 500 else errors.APIStatusError
    )
    fields: dict[str, Any] = {}
    if cls is errors.BadRequestError:
        numbers = context_numbers(message, kind, code, decoded)
        if numbers is not None:
            cls = errors.ContextLengthError
            names = ("context_length", "prompt_tokens", "requested_tokens")
            fields = dict(zip(names, numbers, strict=True))
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
        headers=headers,
        **fields,
    )


def _shown_text(text: str, headers: Mapping[str, str]) -> str:
    """What an error's message shows of a body in no error envelope: an HTML page (a proxy's
    or a gateway's 502, a web server's 404) by its title (else its words, without tags) and
    its size, any text cut at
    `SHOWN_CHARS`. A message is read in logs and tracebacks; the whole body stays on the
    exception (``body``)."""
    html = "html" in headers.get("content-type", "").lower() or bool(_HTML.match(text))
    if html:  # its title, else its words
        title = _TITLE.search(text)
        words = " ".join(_TAG.sub(" ", title[1] if title else text).split())
        shown = words[:SHOWN_CHARS] + ("..." if len(words) > SHOWN_CHARS else "")
        return (
            f"{shown or 'an empty page'} (an HTML page of {len(text)} characters, whole in the "
            "error's body: a proxy, a gateway or a web server answered, not the API)"
        )
    if len(text) <= SHOWN_CHARS:
        return text
    return (
        f"{text[:SHOWN_CHARS]}... ({len(text) - SHOWN_CHARS} more characters: the whole text is "
        "the error's body)"
    )


SHOWN_CHARS = 500  # of a body in no envelope, in a message
_error_body = body_decoder(Any, "error")  # its refusal is caught: the body is then read as text
_HTML = re.compile(r"<(?:!doctype html|html|head|body|title)\b", re.IGNORECASE)
_TITLE = re.compile(r"<title[^>]*>(.*?)</title", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")


# What says that a prompt does not fit the context, per server. Read in the source: vLLM 0.5
# "This model's maximum context length is N tokens. However, you requested T tokens (P in the
# messages, M in the completion)" or "... you requested P tokens in the messages"; vLLM 0.32
# "... However, your prompt contains [at least] P input tokens" (or "C characters"),
# "max_tokens=M cannot be greater than max_model_len=N", "Input length (P) exceeds model's
# maximum context length (N)"; SGLang "The input (P tokens) is longer than the model's context
# length (N tokens)" and "Requested token count exceeds the model's maximum context length of N
# tokens. You requested a total of T tokens: P tokens from the input messages and M tokens for
# the completion"; llama.cpp "request (P tokens) exceeds the available context size (N tokens)"
# (type `exceed_context_size_error`, fields `n_prompt_tokens` and `n_ctx`). As users quote
# them: vLLM between those, "... However, your request has P input tokens", "'max_tokens' or
# 'max_completion_tokens' is too large: M. This model's maximum context length is N tokens and
# your request has P input tokens", "... you requested M output tokens and your prompt contains
# P input tokens"; OpenAI, code `context_length_exceeded`, "... However, your messages
# resulted in P tokens" (completions: "you requested T tokens (P in your prompt; M for the
# completion)"). Recorded answers: tests/fixtures.
_CONTEXT_SAYS = re.compile(
    r"maximum context length|context length \(|exceeds the available context size"
    r"|max_(?:completion_)?tokens=\d+ cannot be greater than max_model_len",
    re.IGNORECASE,
)
_CONTEXT = re.compile(
    r"maximum context length (?:is |of |\()(\d+)|context length \((\d+)|max_model_len=(\d+)"
    r"|context size \((\d+) tokens",
    re.IGNORECASE,
)
_PROMPT = re.compile(
    r"(\d+) in the messages|requested (\d+) tokens in the messages|request has (\d+) input"
    r"|prompt contains (?:at least )?(\d+) input|Input length \((\d+)\)|input \((\d+) tokens\)"
    r"|(\d+) tokens from the input|request \((\d+) tokens\)|messages resulted in (\d+) tokens"
    r"|(\d+) in your prompt",
    re.IGNORECASE,
)
_REQUESTED = re.compile(
    r"(\d+) in the completion|is too large: (\d+)|max_(?:completion_)?tokens=(\d+) cannot"
    r"|(\d+) tokens for the completion|requested (\d+) output tokens|(\d+) for the completion",
    re.IGNORECASE,
)


def context_numbers(
    message: str, kind: str | None, code: str | int | None, body: Any
) -> tuple[int | None, int | None, int | None] | None:
    """(context length, prompt tokens, requested tokens) if a 400 says the prompt does not fit
    the model's context (each ``None`` where the server did not state it), else ``None``."""
    if not (
        kind == "exceed_context_size_error"
        or code == "context_length_exceeded"
        or _CONTEXT_SAYS.search(message)
    ):
        return None
    numbers = [_first(pattern, message) for pattern in (_CONTEXT, _PROMPT, _REQUESTED)]
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):  # llama.cpp states them as fields too
        for at, field in ((0, "n_ctx"), (1, "n_prompt_tokens")):
            value = err.get(field)
            if isinstance(value, int) and not isinstance(value, bool):
                numbers[at] = value
    return numbers[0], numbers[1], numbers[2]


def _first(pattern: re.Pattern[str], message: str) -> int | None:
    found = pattern.search(message)
    if found is None:
        return None
    return int(next(group for group in found.groups() if group is not None))


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
