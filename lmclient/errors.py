"""
The exception hierarchy. Every failure a caller can see is one of these:

* LMClientError
  x APIError                     the server answered with an error status (or an error event)
    + BadRequestError            400, 422
      + ContextLengthError       the prompt (with max_tokens) does not fit the model's context
    + AuthenticationError        401
    + PermissionDeniedError      403
    + NotFoundError              404 (unknown model or route)
    + RateLimitError             429
    + ServerError                5xx, TGI 424, SGLang "abort", error events in a 200 stream
  x APIConnectionError           cannot reach the server, or the connection broke
    + APITimeoutError            a timeout or the call's deadline
  x ValidationError              the output does not match the output type
    + TruncatedError             finish_reason == "length"
    + ConstraintIgnoredError     the answer shows the constraint fields never reached the decoder
    + RefusalError               message.refusal or finish_reason == "content_filter"
  x UnsupportedConstraintError   the dialect cannot express the constraint (raised before sending)
  x ConfigurationError           the client cannot be made as asked: URL, header, API key, limit
  x ProtocolError                the server's bytes are not the protocol (bad JSON/SSE, too big)

Messages never contain the API key: lmclient never puts request headers into an exception.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "APIConnectionError",
    "APIError",
    "APITimeoutError",
    "AuthenticationError",
    "BadRequestError",
    "ConfigurationError",
    "ConstraintIgnoredError",
    "ContextLengthError",
    "LMClientError",
    "NotFoundError",
    "PermissionDeniedError",
    "ProtocolError",
    "RateLimitError",
    "RefusalError",
    "ServerError",
    "TruncatedError",
    "UnsupportedConstraintError",
    "ValidationError",
]

_PREVIEW = 200  # characters of received text shown in a message; the full text is an attribute


def _preview(text: str | bytes) -> str:
    shown = text[:_PREVIEW]
    suffix = "…" if len(text) > _PREVIEW else ""
    return f"{shown!r}{suffix}"


class LMClientError(Exception):
    """Base class of every exception lmclient raises."""


class APIError(LMClientError):
    """The server answered with an error; carries its status and the decoded envelope."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        type: str | None = None,
        code: str | int | None = None,
        param: str | None = None,
        body: Any = None,
        request_id: str | None = None,
        retry_after: float | None = None,
        should_retry: bool | None = None,
    ) -> None:
        super().__init__(f"{status_code}: {message}" if status_code else message)
        self.message = message
        self.status_code = status_code
        self.type = type
        self.code = code
        self.param = param
        self.body = body
        self.request_id = request_id
        self.retry_after = retry_after  # seconds the server asked to wait (Retry-After headers)
        self.should_retry = should_retry  # the server's `x-should-retry`, when it sent one


class BadRequestError(APIError):
    """400 or 422: the server rejected the request (schema, grammar, context length...)."""


class ContextLengthError(BadRequestError):
    """The server refused a prompt that, with the tokens asked for, does not fit the model's
    context. The numbers are the server's, where its message states them (``None`` where it
    does not): ``context_length`` (the model's window), ``prompt_tokens`` (the prompt's
    tokens, or a lower bound when the server stopped counting: vLLM's "at least"),
    ``requested_tokens`` (the completion tokens asked for)."""

    def __init__(
        self,
        message: str,
        *,
        context_length: int | None = None,
        prompt_tokens: int | None = None,
        requested_tokens: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(message, **kwargs)
        self.context_length = context_length
        self.prompt_tokens = prompt_tokens
        self.requested_tokens = requested_tokens


class AuthenticationError(APIError):
    """401: missing or wrong API key."""


class PermissionDeniedError(APIError):
    """403."""


class NotFoundError(APIError):
    """404: unknown model or route."""


class RateLimitError(APIError):
    """429: too many requests; ``retry_after`` is the delay the server asked for, if any."""


class ServerError(APIError):
    """5xx, TGI's 424, SGLang's ``abort`` finish, or an error event inside a 200 stream."""


class APIConnectionError(LMClientError):
    """The server could not be reached, or the connection broke mid-response."""


class APITimeoutError(APIConnectionError):
    """A per-phase timeout or the call's total deadline expired."""


class ValidationError(LMClientError):
    """The model's output does not match the requested output type.

    ``text`` is what the model produced, ``detail`` the decoder's message with its path
    (e.g. ``Expected `int`, got `str` - at `$.age```), ``attempts`` the texts of every try.
    ``output_type`` is ``None`` for a tool call that does not keep to the call's tools or
    ``tool_choice``. ``usage`` is the usage the answer reported, ``total_usage`` the sum over
    every answer of the call (the re-asked ones too), as `Response.total_usage`; both ``None``
    when the error did not come from an answer or the server reported none.
    """

    usage: Any = None
    total_usage: Any = None

    def __init__(
        self,
        detail: str,
        *,
        text: str,
        output_type: Any,
        attempts: list[str] | None = None,
    ) -> None:
        # No output type: a tool call's arguments or tool choice, whose detail names the tool.
        what = "" if output_type is None else f"output does not match {_type_name(output_type)}: "
        super().__init__(f"{what}{detail}; got {_preview(text)}")
        self.detail = detail
        self.text = text
        self.output_type = output_type
        self.attempts = attempts if attempts is not None else [text]


class TruncatedError(ValidationError):
    """The model stopped at ``max_tokens`` (finish_reason ``length``) before the value ended."""

    def __init__(self, *, text: str, output_type: Any, usage: Any = None) -> None:
        super().__init__(
            "the output was cut at max_tokens (finish_reason 'length'); raise max_tokens",
            text=text,
            output_type=output_type,
        )
        self.usage = usage


class ConstraintIgnoredError(ValidationError):
    """The answer could not have come out of the constraint lmclient sent (prose where a JSON
    object must begin, a first character no option of a `Literal` has): the server, or a
    gateway or proxy in front of it, accepted the constraint ``fields`` and ignored them. Said
    instead of truncation or a decoding error, whatever the finish reason, since raising
    ``max_tokens`` cannot help: the dialect (or the gateway's mode) must change. A re-ask
    (``max_reasks``) may still get a valid value from the model's own compliance."""

    def __init__(
        self, *, text: str, output_type: Any, fields: list[str], dialect: str, why: str
    ) -> None:
        names = ", ".join(fields)
        super().__init__(
            f"the server, or a gateway or proxy in front of it, ignored the constraint "
            f"field(s) {names} of dialect {dialect!r}: {why} (not a max_tokens cut); pass "
            "the dialect of the server that reads them "
            "(dialect=...; 'generic' sends only response_format), or behind the SGLang Model "
            "Gateway use dialect='auto', which detects it and its --backend mode",
            text=text,
            output_type=output_type,
        )
        self.fields = fields
        self.dialect = dialect


class RefusalError(ValidationError):
    """The model refused (``message.refusal``) or the server filtered the output."""

    def __init__(self, refusal: str, *, text: str, output_type: Any) -> None:
        super().__init__(f"the model refused: {refusal}", text=text, output_type=output_type)
        self.refusal = refusal


class UnsupportedConstraintError(LMClientError, ValueError):
    """The server's dialect cannot express this output type; raised before anything is sent."""


class ConfigurationError(LMClientError, ValueError):
    """The client's configuration cannot be sent as given (a base URL that is not http(s), a
    header or API key that would break or inject into the request head, a framing header that
    lmclient sets itself); raised when the client is made, before any request."""


class ProtocolError(LMClientError):
    """The server's bytes are not the protocol; ``body`` holds what was received (or its start)."""

    def __init__(self, message: str, *, body: bytes | str = b"") -> None:
        super().__init__(f"{message}; received {_preview(body)}" if body else message)
        self.body = body


def _type_name(tp: Any) -> str:
    name = getattr(tp, "__name__", None)
    return name if isinstance(name, str) and not getattr(tp, "__args__", None) else repr(tp)
