"""
The exception hierarchy. Every failure a caller can see is one of these:

* LMClientError
  x APIError                     any failure of the API: `except APIError` catches all of these
    + APIStatusError             the server answered with an error status (or an error event)
      + BadRequestError          400, 422
        + ContextLengthError     the prompt (with max_tokens) does not fit the model's context
      + AuthenticationError      401
      + PermissionDeniedError    403
      + NotFoundError            404 (unknown model or route)
      + RateLimitError           429
      + ServerError              5xx, TGI 424, SGLang "abort", error events in a 200 stream
    + APIConnectionError         cannot reach the server, or the connection broke
      + APITimeoutError          a timeout or the call's deadline
    + ProtocolError              the server's bytes are not the protocol (bad JSON/SSE, too big)
  x ValidationError              the output does not match the output type
    + TruncatedError             finish_reason == "length"
      + RunawayError             the answer looped: stopped there (raising max_tokens cannot help)
    + ConstraintIgnoredError     the answer shows the constraint fields never reached the decoder
    + RefusalError               message.refusal or finish_reason == "content_filter"
  x TokenBudgetExceeded          a token_budget was spent: no more re-asks, no new batch items
  x UnsupportedConstraintError   the dialect cannot express the constraint (raised before sending)
  x MediaError                   an image, audio or video that cannot be sent (before sending)
  x ConfigurationError           the client cannot be made as asked: URL, header, API key, limit
  x ConfidenceError              probabilities=True where the server gives no usable logprobs
  x NoValueError                 Response.value of a typed turn whose answer is tool calls
  x ClientClosedError            a call on a closed client (also a RuntimeError, as httpx's)

The API part is the openai SDK's tree (`APIError` at the root of every failure of the API, a
status error, a connection error and a timeout under it), so that code written against that SDK
catches the same failures here; `ProtocolError` stands where the SDK's
`APIResponseValidationError` does. A model's answer that does not match the output type is not
an API failure but the model's (`ValidationError`), as in the SDK's `LengthFinishReasonError`.

Messages never contain the API key: lmclient never puts request headers into an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._headers import Headers

__all__ = [
    "APIConnectionError",
    "APIError",
    "APIStatusError",
    "APITimeoutError",
    "AuthenticationError",
    "BadRequestError",
    "ClientClosedError",
    "ConfidenceError",
    "ConfigurationError",
    "ConstraintIgnoredError",
    "ContextLengthError",
    "LMClientError",
    "MediaError",
    "NoValueError",
    "NotFoundError",
    "PermissionDeniedError",
    "ProtocolError",
    "RateLimitError",
    "RefusalError",
    "RunawayError",
    "ServerError",
    "TokenBudgetExceeded",
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
    """Any failure of the API: an error status, no answer (`APIConnectionError`), or bytes that
    are not the protocol (`ProtocolError`). ``message`` is what went wrong, ``body`` what the
    server sent, where that helps (the decoded error envelope, the bytes that were not JSON)."""

    message: str
    body: Any

    def __init__(self, message: str, *, body: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.body = body


class APIStatusError(APIError):
    """The server answered with an error status; carries it, the decoded envelope, and the
    response's headers (``headers``: case-insensitive, read-only)."""

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
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message, body=body)
        if status_code:
            self.args = (f"{status_code}: {message}",)
        self.status_code = status_code
        self.type = type
        self.code = code
        self.param = param
        self.request_id = request_id
        self.retry_after = retry_after  # seconds the server asked to wait (Retry-After headers)
        self.should_retry = should_retry  # the server's `x-should-retry`, when it sent one
        self._headers = headers

    @property
    def headers(self) -> Headers:
        """The error response's headers (rate limits, request id), names case-insensitive;
        empty for an error event inside a 200 stream."""
        from ._headers import Headers

        return Headers(self._headers)  # (names lower-cased: this error may be a user's own)


class BadRequestError(APIStatusError):
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


class AuthenticationError(APIStatusError):
    """401: missing or wrong API key."""


class PermissionDeniedError(APIStatusError):
    """403."""


class NotFoundError(APIStatusError):
    """404: unknown model or route."""


class RateLimitError(APIStatusError):
    """429: too many requests; ``retry_after`` is the delay the server asked for, if any."""


class ServerError(APIStatusError):
    """5xx, TGI's 424, SGLang's ``abort`` finish, or an error event inside a 200 stream."""


class APIConnectionError(APIError):
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
    when the error did not come from an answer or the server reported none. ``unmetered`` is
    how many of those answers reported no usage, or only part of it, as `Response.unmetered`.
    """

    usage: Any = None
    total_usage: Any = None
    unmetered: int = 0

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

    def __init__(
        self, *, text: str, output_type: Any, usage: Any = None, advice: str = "raise max_tokens"
    ) -> None:
        super().__init__(
            f"the output was cut at max_tokens (finish_reason 'length'); {advice}",
            text=text,
            output_type=output_type,
        )
        self.usage = usage


class RunawayError(TruncatedError):
    """The answer ran away: it stopped making progress towards a value (a span repeated again
    and again, whitespace without end, a number whose digits never end), and generation was
    stopped there (``by``: ``"client"``, lmclient's watch closed the connection; ``"server"``,
    the server's own check, vLLM's ``repetition_detection``; ``"max_tokens"``, the answer was
    cut there and its text ends in the loop). A `TruncatedError`, so what catches a cut
    answer catches it; unlike one, raising ``max_tokens`` cannot help: the model was looping.

    ``path`` is the JSON path of what ran away (``$.tags``; ``$`` for a text output),
    ``span`` the repeating text, ``repeats`` how many times in a row, ``kind`` ``"repeat"``,
    ``"whitespace"`` or ``"digits"``, ``tokens`` the completion tokens spent (the server's
    count where it sent one, else the deltas received), ``seconds`` the answer's time."""

    def __init__(
        self,
        *,
        text: str,
        output_type: Any,
        path: str,
        span: str,
        repeats: int,
        kind: str,
        by: str,
        tokens: int | None,
        seconds: float | None,
        what: str,
        advice: str,
    ) -> None:
        where = "" if path == "$" else f" at {path}"
        spent = [] if tokens is None else [f"{tokens} tokens"]
        spent += [] if seconds is None else [f"{seconds:.1f} s"]
        stopped = {
            "client": "stopped by lmclient's runaway watch",
            "server": "stopped by the server's repetition detection",
            "max_tokens": "cut at max_tokens",
        }.get(by, by)
        ValidationError.__init__(
            self,
            f"the answer ran away{where}: {what} ({stopped}"
            f"{', after ' + ', '.join(spent) if spent else ''}); {advice}",
            text=text,
            output_type=output_type,
        )
        self.path = path
        self.span = span
        self.repeats = repeats
        self.kind = kind
        self.by = by
        self.tokens = tokens
        self.seconds = seconds


class ConstraintIgnoredError(ValidationError):
    """The answer could not have come out of the constraint lmclient sent (prose where a JSON
    object must begin, a first character no option of a `Literal` has): the server, or a
    gateway or proxy in front of it, accepted the constraint ``fields`` and ignored them. Said
    instead of truncation or a decoding error, whatever the finish reason, since raising
    ``max_tokens`` cannot help: the dialect (or the gateway's mode) must change. A re-ask
    (``max_reasks``) may still get a valid value from the model's own compliance."""

    def __init__(
        self,
        *,
        text: str,
        output_type: Any,
        fields: list[str],
        dialect: str,
        why: str,
        advice: str | None = None,
    ) -> None:
        names = ", ".join(fields)
        advice = advice or (
            "pass the dialect of the server that reads them (dialect=...; 'generic' sends only "
            "response_format), or behind the SGLang Model Gateway use dialect='auto', which "
            "detects it and its --backend mode"
        )
        super().__init__(
            f"the server, or a gateway or proxy in front of it, ignored the constraint "
            f"field(s) {names} of dialect {dialect!r}: {why} (not a max_tokens cut); {advice}",
            text=text,
            output_type=output_type,
        )
        self.fields = fields
        self.dialect = dialect
        self.why = why  # what the answer shows
        self.advice = advice  # what to change


class RefusalError(ValidationError):
    """The model refused (``message.refusal``) or the server filtered the output."""

    def __init__(self, refusal: str, *, text: str, output_type: Any) -> None:
        super().__init__(f"the model refused: {refusal}", text=text, output_type=output_type)
        self.refusal = refusal


class TokenBudgetExceeded(LMClientError):
    """A ``token_budget`` was spent: a call is not asked again, a batch starts no more items.

    A budget is checked before each re-ask and each new item, never in the middle of an answer,
    so what was spent may pass it by up to one answer: ``spent`` is the prompt and completion
    tokens counted against it (``None`` when an answer reported no usage: a budget that cannot
    be counted is taken as spent), ``budget`` the limit, ``over`` by how much ``spent`` passed
    it (0 when it only reached it), ``usage`` the `Usage` counted (the call's, or the batch's).

    ``total_usage`` is what the call that raised it spent, re-asked answers included, as a
    `ValidationError`'s (``None`` for a batch item that never started, and for the error a batch
    raises). ``results`` is set on the error a batch raises when it stopped without
    ``return_exceptions``: its list in input order, each finished item's value in its place and
    ``None`` for the others. A call stopped before a re-ask has the invalid answer's
    `ValidationError` as ``__cause__``.
    """

    total_usage: Any = None
    results: list[Any] | None = None

    def __init__(self, *, budget: int, spent: int | None, usage: Any, what: str) -> None:
        if spent is None:
            said = (
                f"an answer reported no usage that can be counted, so the {what}'s "
                "token_budget cannot be kept"
            )
        else:
            over = f", {spent - budget} over" if spent > budget else ""
            said = f"the {what} has spent {spent} tokens of its token_budget of {budget}{over}"
        super().__init__(said)
        self.budget = budget
        self.spent = spent
        self.usage = usage

    @property
    def over(self) -> int | None:
        """The tokens spent past the budget (0 when they only reached it); ``None`` when an
        answer reported no usage."""
        return None if self.spent is None else max(0, self.spent - self.budget)


class NoValueError(LMClientError, LookupError):
    """`Response.value` of an answer that is tool calls: a typed turn whose model called tools
    rather than answer (``r.tool_calls`` holds them)."""


class UnsupportedConstraintError(LMClientError, ValueError):
    """The server's dialect cannot express this output type; raised before anything is sent."""


class MediaError(LMClientError, ValueError):
    """An image, audio clip or video that cannot be sent: over its size bound, of an unknown or
    wrong MIME type, or of a kind (or form: a URL, a format) that the server, or the model it
    serves, does not take; raised before anything is sent."""


class ConfigurationError(LMClientError, ValueError):
    """The client's configuration cannot be sent as given (a base URL that is not http(s), a
    header or API key that would break or inject into the request head, a framing header that
    lmclient sets itself); raised when the client is made, before any request."""


class ConfidenceError(LMClientError):
    """``probabilities=True`` cannot be answered: before anything is sent, a server that gives
    no logprobs (LM Studio); after the answer, logprobs that are missing, that do not spell the
    answer, or that cannot tell an option's probability (its text leaves the answer's tokens at
    an alternative token shared with other options, and the server cannot continue the answer
    from it, or the continuation does not tell either). ``response`` is then the call's validated
    `Response` (its value stands; only its probabilities are missing), ``None`` before sending.
    Not an `APIError` (the call itself succeeded) nor a `ValidationError` (a re-ask cannot help)."""

    def __init__(self, message: str, *, response: Any = None) -> None:
        super().__init__(message)
        self.response = response


class ProtocolError(APIError):
    """The server's bytes are not the protocol; ``body`` holds what was received (or its start).
    An `APIError`, as the openai SDK's `APIResponseValidationError` is: a server (or a proxy in
    front of it) that answers garbage is a failure of the API, which `except APIError` catches.
    Not retried: the same request would get the same bytes."""

    body: bytes | str

    def __init__(self, message: str, *, body: bytes | str = b"") -> None:
        super().__init__(message, body=body)
        if body:
            self.args = (f"{message}; received {_preview(body)}",)


class ClientClosedError(LMClientError, RuntimeError):
    """A call or stream on a client after ``close()``: refused before anything is sent (a
    closed client never opens a new connection). A RuntimeError, as httpx's own refusal."""


def _type_name(tp: Any) -> str:
    name = getattr(tp, "__name__", None)
    return name if isinstance(name, str) and not getattr(tp, "__args__", None) else repr(tp)
