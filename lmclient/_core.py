"""The sans-I/O core: every decision of a call, none of its I/O.

`ClientCore` holds a client's configuration; `ClientCore.prepare` validates one call's input and
returns a `Call`, which knows the bytes to send, the timeouts of the next attempt, how to turn the
bytes received into a `Response` or a typed error, and whether (and when) to retry. `Client` and
`AsyncClient` drive it with their transports and differ only in how they wait.

Defaults, with their precedents:
* 5 s to connect, 600 s between bytes: a connect to a local server is instant, but a model may
  think for minutes before its first byte (the OpenAI SDK also reads for 600 s).
* 2 retries with 0.5 s · 2^n backoff capped at 8 s, 25 % jitter, on 408/409/429/5xx but 501:
  the OpenAI SDK's policy, which users of these servers already live with.
* 64 MiB response limit: far above any completion, low enough that garbage cannot exhaust memory.
"""

from __future__ import annotations

import copy
import email.utils
import logging
import math
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import httpx
import msgspec

from . import errors
from ._config import client_headers, client_url
from ._dialects import PROBE_PATHS, Dialect, Endpoint, Plan, ServerInfo, detect, get_dialect
from ._params import env_api_key, env_base_url
from ._protocol import (
    ChatCompletion,
    Completion,
    ModelList,
    StreamChunk,
    TokenLogprob,
    Usage,
    error_info,
)
from ._response import Response
from ._sse import ServerSentEvent, SSEDecoder
from ._types import DECODE_ERRORS, OutputSpec, compile_output
from .errors import ConfigurationError

__all__ = ["Call", "ClientCore", "PreparedRequest", "StreamState", "Timeouts"]

log = logging.getLogger("lmclient")

DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_READ_TIMEOUT = 600.0
DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
MAX_RETRY_AFTER = 60.0  # a server asking for a longer pause gets an error, not a hung call
PROBE_TIMEOUT = 2.0  # a server that is up answers a probe at once; one that is not, fails fast

_NUMBER = (int, float)
# Per-call parameters sent to the server, with the types they accept. A name not here is a
# TypeError: servers silently ignore unknown fields, so a typo must not travel.
_BODY_PARAMS: dict[str, tuple[type, ...]] = {
    "max_tokens": (int,),
    "temperature": _NUMBER,
    "top_p": _NUMBER,
    "n": (int,),
    "stop": (str, list, tuple),
    "seed": (int,),
    "logprobs": (bool,),
    "top_logprobs": (int,),
    "presence_penalty": _NUMBER,
    "frequency_penalty": _NUMBER,
}
_CALL_PARAMS: dict[str, tuple[type, ...]] = {
    "timeout": (int, float, httpx.Timeout),
    "deadline": _NUMBER,
    "max_retries": (int,),
    "max_reasks": (int,),
    "extra_body": (dict,),
}
PARAMS = {**_BODY_PARAMS, **_CALL_PARAMS}


def check_params(where: str, params: Mapping[str, Any], *, allow_n: bool = False) -> None:
    """Reject misspelt or mistyped per-call parameters before anything is sent."""
    for name, value in params.items():
        accepted = PARAMS.get(name)
        if accepted is None or (name == "n" and not allow_n):
            hint = " (n is a parameter of create() only)" if name == "n" else ""
            raise TypeError(f"{where}() got an unexpected keyword argument {name!r}{hint}")
        if value is None:
            continue
        if (isinstance(value, bool) and bool not in accepted) or not isinstance(value, accepted):
            names = " or ".join(t.__name__ for t in accepted)
            raise TypeError(f"{where}(): {name} must be {names}, not {type(value).__name__}")
        problem = _value_problem(name, value)
        if problem:
            raise ValueError(f"{where}(): {name} {problem}, not {value!r}")


def _value_problem(name: str, value: Any) -> str | None:
    if name == "stop" and not isinstance(value, str):
        return None if all(isinstance(s, str) for s in value) else "must be a str or list of str"
    if name in ("max_tokens", "n") and value < 1:
        return "must be at least 1"
    if name in ("top_logprobs", "max_retries", "max_reasks") and value < 0:
        return "must not be negative"
    if name in ("deadline", "timeout") and isinstance(value, _NUMBER) and value <= 0:
        return "must be a positive number of seconds"
    return None


class Timeouts(msgspec.Struct, frozen=True):
    """Per-phase timeouts of one attempt, in seconds."""

    connect: float
    read: float
    write: float
    pool: float

    @classmethod
    def from_user(cls, value: float | httpx.Timeout | None) -> Timeouts:
        if value is None:
            return cls(
                DEFAULT_CONNECT_TIMEOUT,
                DEFAULT_READ_TIMEOUT,
                DEFAULT_READ_TIMEOUT,
                DEFAULT_READ_TIMEOUT,
            )
        if isinstance(value, httpx.Timeout):
            inf = math.inf
            return cls(
                value.connect or inf, value.read or inf, value.write or inf, value.pool or inf
            )
        seconds = float(value)  # one number bounds every phase, as in httpx
        return cls(seconds, seconds, seconds, seconds)

    def capped(self, remaining: float) -> Timeouts:
        return Timeouts(
            min(self.connect, remaining),
            min(self.read, remaining),
            min(self.write, remaining),
            min(self.pool, remaining),
        )

    def as_httpx(self) -> dict[str, float | None]:
        return {
            k: (None if math.isinf(v) else v)
            for k, v in (
                ("connect", self.connect),
                ("read", self.read),
                ("write", self.write),
                ("pool", self.pool),
            )
        }


class PreparedRequest(msgspec.Struct, frozen=True):
    """Exactly what goes on the wire."""

    method: str
    url: str
    headers: list[tuple[str, str]]
    body: bytes | None = None


class ClientCore:
    """A client's configuration and the pure steps shared by `Client` and `AsyncClient`."""

    def __init__(
        self,
        base_url: str | None,
        model: str | None,
        *,
        api_key: str | None = None,
        dialect: str = "auto",
        timeout: float | httpx.Timeout | None = None,
        deadline: float | None = None,
        max_retries: int = 2,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        headers: Mapping[str, str] | None = None,
        defaults: Mapping[str, Any] | None = None,
        max_reasks: int = 0,
    ) -> None:
        base_url = env_base_url(base_url)
        if not base_url:
            raise ConfigurationError(
                "no base_url: pass Client(base_url=...) or set LMCLIENT_BASE_URL or OPENAI_BASE_URL"
            )
        url = client_url(base_url)
        check_params(
            "Client",
            {
                "timeout": timeout,
                "deadline": deadline,
                "max_retries": max_retries,
                "max_reasks": max_reasks,
            },
        )
        self.defaults = dict(defaults or {})
        check_params("defaults", self.defaults, allow_n=False)
        if max_response_bytes < 1:
            raise ConfigurationError("max_response_bytes must be positive")
        hdrs = client_headers(
            headers, api_key=env_api_key(api_key), api_key_given=bool(api_key), url=url
        )
        self.base_url = url.base_url
        self.root_url = self.base_url.removesuffix("/v1")  # where servers answer probes
        self.host = url.host
        self.model = model
        self.dialect: Dialect | None = None if dialect == "auto" else get_dialect(dialect)
        self.server_info: ServerInfo | None = None
        self.timeouts = Timeouts.from_user(timeout)
        self.deadline = deadline
        self.max_retries = max_retries
        self.max_reasks = max_reasks
        self.max_response_bytes = max_response_bytes
        self._get_headers = list(hdrs.items())
        self._post_headers = [*self._get_headers, ("content-type", "application/json")]

    def __repr__(self) -> str:  # never the API key
        dialect = "auto" if self.dialect is None else self.dialect.name
        return f"base_url={self.base_url!r}, model={self.model!r}, dialect={dialect!r}"

    # -- set-up: what model=None and dialect="auto" leave open --------------------------------

    @property
    def ready(self) -> bool:
        """Model and dialect are known, so a call needs no set-up requests first."""
        return self.model is not None and self.dialect is not None

    def models_call(self, **params: Any) -> Call:
        """A call that lists the served models (``GET /v1/models``)."""
        request = PreparedRequest("GET", self.base_url + "/models", self._get_headers)
        return Call(self, request, None, None, "models", params)

    def probe_calls(self) -> list[Call]:
        """One short call per probe path, then the model list; a probe is never retried."""
        quick = {"timeout": PROBE_TIMEOUT, "max_retries": 0}
        calls = [
            Call(
                self,
                PreparedRequest("GET", self.root_url + path, self._get_headers),
                None,
                None,
                "probe",
                quick,
            )
            for path in PROBE_PATHS
        ]
        return [*calls, self.models_call(**quick)]

    def adopt_probes(self, answers: Sequence[Any]) -> ServerInfo:
        """Learn from the answers to `probe_calls` (``None`` where one failed): the dialect, if
        ``"auto"`` left it open, and the model, if ``None`` left it open and only one is served."""
        *probes, models = answers
        found = {p: a for p, a in zip(PROBE_PATHS, probes, strict=True) if isinstance(a, dict)}
        info = detect(self.host, found, models if isinstance(models, list) else [])
        self.server_info = info
        if self.dialect is None:
            self.dialect = get_dialect(info.dialect)
        if self.model is None and len(info.models) == 1:
            self.model = info.models[0]
        return info

    def adopt_models(self, names: list[str]) -> str:
        """Use the only model served, as ``model=None`` asks; several or none is an error."""
        if len(names) != 1:
            raise errors.LMClientError(
                f"model=None needs a server with exactly one model; {self.base_url} serves "
                f"{len(names)}: {', '.join(names) or '(none)'}; pass model=..."
            )
        self.model = names[0]
        return self.model

    # -- calls -----------------------------------------------------------------------------

    def validate(
        self,
        where: str,
        prompt: Any,
        output_type: Any,
        endpoint: Endpoint,
        params: Mapping[str, Any],
    ) -> OutputSpec[Any]:
        """Every check of a call's input that needs no server: run before any request."""
        check_params(where, params, allow_n=where == "create")
        spec = compile_output(output_type)
        if endpoint == "chat":
            _messages(prompt)
        elif endpoint != "completions":
            raise ValueError(f"endpoint must be 'chat' or 'completions', not {endpoint!r}")
        elif not isinstance(prompt, str):
            raise TypeError("complete() takes a str prompt")
        if self.dialect is not None:  # the dialect's refusals now, not after I/O
            self.dialect.plan(spec, endpoint)
            extra = params.get("extra_body") or self.defaults.get("extra_body")
            if extra:
                self.dialect.check_extra(extra, endpoint)
        return spec

    def batch(
        self,
        where: str,
        prompts: Iterable[Any],
        output_type: Any,
        endpoint: Endpoint,
        params: Mapping[str, Any],
        concurrency: int,
    ) -> list[tuple[Any, Any]]:
        """The (prompt, output type) of every item, all checked before the first request. An item
        is a prompt, or a ``(prompt, output_type)`` pair so one batch may mix types."""
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"{where}(): concurrency must be a positive int, not {concurrency!r}")
        if isinstance(prompts, (str, bytes)):
            raise TypeError(f"{where}() takes an iterable of prompts, not a single str")
        items = []
        for item in prompts:
            pair = isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], (str, list))
            prompt, tp = item if pair else (item, output_type)
            self.validate(where, prompt, tp, endpoint, params)
            items.append((prompt, tp))
        return items

    def prepare(
        self,
        where: str,
        prompt: str | Sequence[Mapping[str, Any]],
        output_type: Any,
        endpoint: Endpoint,
        params: dict[str, Any],
        *,
        stream: bool = False,
    ) -> Call:
        """Validate a call's input and build its request, once the client is `ready`; raises
        before anything is sent."""
        spec = self.validate(where, prompt, output_type, endpoint, params)
        assert self.dialect is not None, "set-up (model, dialect) must come first"
        plan = self.dialect.plan(spec, endpoint)
        merged = {**self.defaults, **params} if self.defaults else params
        body: dict[str, Any] = {"model": self.model}
        if endpoint == "chat":
            body["messages"] = _messages(prompt)
        else:
            body["prompt"] = prompt
        for name, value in merged.items():
            if value is None or name in _CALL_PARAMS:
                continue
            if name == "logprobs" and endpoint == "completions":
                if value:  # legacy completions: logprobs is the number of alternatives
                    body["logprobs"] = merged.get("top_logprobs") or 0
            elif name == "top_logprobs" and endpoint == "completions":
                continue
            else:
                body[name] = list(value) if name == "stop" and isinstance(value, tuple) else value
        if stream:
            body["stream"] = True
            if self.dialect.stream_usage:
                body["stream_options"] = {"include_usage": True}
        body.update(plan.fields)
        extra = merged.get("extra_body")
        if extra:
            self.dialect.check_extra(extra, endpoint)
            body.update(extra)
        request = PreparedRequest(
            "POST",
            self.base_url + ("/chat/completions" if endpoint == "chat" else "/completions"),
            self._post_headers,
            msgspec.json.encode(body),
        )
        return Call(self, request, spec, plan, endpoint, merged)


def _messages(prompt: str | Sequence[Mapping[str, Any]]) -> list[Any]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if isinstance(prompt, Sequence) and prompt:
        messages = list(prompt)
        for m in messages:
            if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
                raise TypeError("each message must be a mapping with a 'role' str")
        return messages
    raise TypeError("prompt must be a str or a non-empty list of message dicts")


class Call:
    """One call's state across attempts: what to send, when to give up, what came back."""

    def __init__(
        self,
        core: ClientCore,
        request: PreparedRequest,
        spec: OutputSpec[Any] | None,
        plan: Plan | None,
        endpoint: Literal["chat", "completions", "models", "probe"],
        params: Mapping[str, Any],
    ) -> None:
        self.request = request
        self.spec = spec
        self.plan = plan
        self.endpoint = endpoint
        self.retries = 0
        self.max_retries: int = params.get("max_retries", core.max_retries)
        self.reasks = 0
        self.max_reasks: int = params.get("max_reasks", core.max_reasks)
        self.attempts: list[str] = []  # texts of the answers re-asked so far
        self._attempt_started = 0.0
        timeout = params.get("timeout")
        self._timeouts = core.timeouts if timeout is None else Timeouts.from_user(timeout)
        deadline = params.get("deadline", core.deadline)
        self.deadline_at: float | None = None if deadline is None else time.monotonic() + deadline
        self.max_response_bytes = core.max_response_bytes

    def timeouts(self) -> Timeouts:
        """Timeouts of the next attempt, shortened to what is left of the deadline."""
        self._attempt_started = time.monotonic()
        if self.deadline_at is None:
            return self._timeouts
        remaining = self.deadline_at - time.monotonic()
        if remaining <= 0:
            raise errors.APITimeoutError("the call's deadline expired")
        return self._timeouts.capped(remaining)

    def finish(self, status: int, headers: Mapping[str, str], body: bytes) -> Response[Any]:
        """Turn a complete HTTP response into a `Response` or raise its typed error."""
        if log.isEnabledFor(logging.DEBUG):
            self.log_attempt(status, headers)
        if status >= 300:
            raise api_error(status, headers, body)
        if self.endpoint == "probe":
            return Response(
                [_decode_wire(dict[str, Any], body)], [""], [None], None, None, None, None
            )
        if self.endpoint == "models":
            models = _decode_wire(ModelList, body)
            return Response([[m.id for m in models.data]], [""], [None], None, None, None, models)
        assert self.spec is not None and self.plan is not None
        if self.endpoint == "chat":
            return self._chat(_decode_wire(ChatCompletion, body))
        return self._completion(_decode_wire(Completion, body))

    def backoff(self, exc: errors.LMClientError) -> float:
        """The pause before retrying after ``exc``; re-raises ``exc`` if it must not be retried."""
        if self.retries >= self.max_retries:
            raise exc
        if isinstance(exc, errors.APIError):
            forced = exc.should_retry
            retryable = exc.status_code in RETRY_STATUSES if forced is None else forced
            if not retryable or (exc.retry_after is not None and exc.retry_after > MAX_RETRY_AFTER):
                raise exc
            delay = exc.retry_after
        elif isinstance(exc, errors.APIConnectionError):
            delay = None
        else:
            raise exc
        if delay is None:
            base = min(0.5 * 2**self.retries, 8.0)
            delay = base * (1 - 0.25 * random.random())
        if self.deadline_at is not None and time.monotonic() + delay >= self.deadline_at:
            raise exc  # the pause alone would outlive the deadline: report what happened
        self.retries += 1
        log.warning(
            "retry %d of %d for %s %s in %.2f s after %s: %s",
            self.retries,
            self.max_retries,
            self.request.method,
            httpx.URL(self.request.url).path,
            delay,
            type(exc).__name__,
            exc,
        )
        return delay

    def log_attempt(self, status: int, headers: Mapping[str, str]) -> None:
        """One DEBUG line per attempt; never the key, the prompt or the output."""
        log.debug(
            "%s %s -> %d in %.1f ms (retry %d, request id %s)",
            self.request.method,
            httpx.URL(self.request.url).path,
            status,
            (time.monotonic() - self._attempt_started) * 1000,
            self.retries,
            headers.get("x-request-id"),
        )

    def reask(self, exc: errors.ValidationError) -> Call:
        """The call that asks again after an invalid answer, with that answer and the reason
        appended as a correction request; re-raises ``exc`` (carrying every attempt's text)
        when no re-ask is left, or when asking again cannot help (truncation, refusal)."""
        exc.attempts = [*self.attempts, *exc.attempts]
        hopeless = isinstance(exc, (errors.TruncatedError, errors.RefusalError))
        if hopeless or self.reasks >= self.max_reasks or self.endpoint != "chat":
            raise exc
        if self.deadline_at is not None and time.monotonic() >= self.deadline_at:
            raise exc
        assert self.request.body is not None
        body = msgspec.json.decode(self.request.body)
        if body.get("n", 1) != 1:
            raise exc  # which of several choices to correct is not ours to pick
        body["messages"] = [
            *body["messages"],
            {"role": "assistant", "content": exc.text},
            {
                "role": "user",
                "content": f"That answer is invalid: {exc.detail}. "
                "Answer again with only a valid value.",
            },
        ]
        again = copy.copy(self)
        again.request = PreparedRequest(
            self.request.method, self.request.url, self.request.headers, msgspec.json.encode(body)
        )
        again.reasks = self.reasks + 1
        again.attempts = exc.attempts
        log.warning(
            "re-ask %d of %d after invalid output: %s", again.reasks, self.max_reasks, exc.detail
        )
        return again

    # -- response bodies -------------------------------------------------------------------

    def _chat(self, wire: ChatCompletion) -> Response[Any]:
        if not wire.choices:
            raise errors.ProtocolError("the response has no choices")
        choices = wire.choices
        if len(choices) > 1:
            choices = sorted(choices, key=lambda c: c.index)
        first = choices[0]
        msg = first.message
        reasoning = msg.reasoning or msg.reasoning_content
        refusal = next((c.message.refusal for c in choices if c.message.refusal), None)
        return self.result(
            [c.message.content or "" for c in choices],
            [c.finish_reason for c in choices],
            usage=wire.usage,
            model=wire.model,
            id=wire.id,
            raw=wire,
            reasoning=reasoning,
            refusal=refusal,
            logprobs=first.logprobs.content if first.logprobs is not None else None,
        )

    def _completion(self, wire: Completion) -> Response[Any]:
        if not wire.choices:
            raise errors.ProtocolError("the response has no choices")
        choices = sorted(wire.choices, key=lambda c: c.index)
        first = choices[0].logprobs
        return self.result(
            [c.text or "" for c in choices],
            [c.finish_reason for c in choices],
            usage=wire.usage,
            model=wire.model,
            id=wire.id,
            raw=wire,
            logprobs=first.normalized() if first is not None else None,
        )

    def result(
        self,
        texts: list[str],
        reasons: list[str | None],
        *,
        usage: Usage | None,
        model: str | None,
        id: str | None,
        raw: Any,
        reasoning: str | None = None,
        refusal: str | None = None,
        logprobs: list[TokenLogprob] | None = None,
    ) -> Response[Any]:
        """Validate every choice's text into the output type; the same for bodies and streams."""
        assert self.spec is not None and self.plan is not None
        if refusal:
            raise errors.RefusalError(refusal, text=texts[0], output_type=self._type)
        constrained = self.spec.kind != "text"
        values = []
        for text, reason in zip(texts, reasons, strict=True):
            if reason == "content_filter":
                raise errors.RefusalError(
                    "the server filtered the output (finish_reason 'content_filter')",
                    text=text,
                    output_type=self._type,
                )
            if reason == "abort":  # SGLang aborts a request it cannot finish
                raise errors.ServerError("the server aborted the generation", status_code=200)
            if reason == "length" and constrained:
                raise errors.TruncatedError(text=text, output_type=self._type, usage=usage)
            if not text and reasoning and constrained:
                raise errors.ValidationError(
                    "the message content is empty but reasoning is present: the model may "
                    "have spent max_tokens on thinking",
                    text=text,
                    output_type=self._type,
                )
            try:
                values.append(self.plan.decode(text))
            except errors.ValidationError as exc:
                if len(texts) > 1:
                    exc.attempts = list(texts)
                raise
        return Response(
            values,
            texts,
            reasons,
            usage,
            model,
            id,
            raw,
            reasoning,
            logprobs,
            self.retries,
            self.reasks,
        )

    @property
    def _type(self) -> Any:
        return None if self.spec is None else self.spec.output_type


def _decode_wire(tp: type[Any], body: bytes) -> Any:
    try:
        return msgspec.json.decode(body, type=tp)
    except DECODE_ERRORS as exc:
        raise errors.ProtocolError(f"unexpected response body ({exc})", body=body) from None


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
    exc = cls(
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
    return exc


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


class StreamState:
    """A stream's pure state: SSE bytes in, content deltas out; the validated result at the end.

    Only choice 0 is followed (``n`` is a parameter of `create` only). Bytes after ``[DONE]``
    are read and ignored, so the connection can go back to the pool.
    """

    __slots__ = (
        "_call",
        "_decoder",
        "_parts",
        "_reasoning",
        "_refusal",
        "_sse",
        "done",
        "events",
        "finish_reason",
        "id",
        "model",
        "usage",
    )

    _chunks = msgspec.json.Decoder(StreamChunk)

    def __init__(self, call: Call) -> None:
        self._call = call
        self._sse = SSEDecoder()
        self._parts: list[str] = []
        self._reasoning: list[str] = []
        self._refusal: list[str] = []
        self.done = False
        self.events = 0
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.id: str | None = None
        self.model: str | None = None

    @property
    def text(self) -> str:
        return "".join(self._parts)

    @property
    def call(self) -> Call:
        return self._call

    def feed(self, data: bytes) -> list[str]:
        out: list[str] = []
        for event in self._sse.feed(data):
            self._event(event, out)
        return out

    def end(self) -> list[str]:
        """The byte stream ended: flush, and insist that it ended properly."""
        out: list[str] = []
        for event in self._sse.close():
            self._event(event, out)
        if not self.done and self.finish_reason is None:
            raise errors.ProtocolError(
                "the stream ended before [DONE] and before a finish_reason", body=self.text
            )
        self.done = True
        return out

    def result(self) -> Response[Any]:
        return self._call.result(
            [self.text],
            [self.finish_reason],
            usage=self.usage,
            model=self.model,
            id=self.id,
            raw=None,
            reasoning="".join(self._reasoning) or None,
            refusal="".join(self._refusal) or None,
        )

    def _event(self, event: ServerSentEvent, out: list[str]) -> None:
        if self.done:
            return
        self.events += 1
        data = event.data
        if data == b"[DONE]":
            self.done = True
            return
        if event.event == "error":
            raise _event_error(data)
        try:
            chunk = self._chunks.decode(data)
        except DECODE_ERRORS as exc:
            raise errors.ProtocolError(f"bad stream event ({exc})", body=data) from None
        if chunk.error is not None:
            raise _event_error(data)
        if chunk.usage is not None:
            self.usage = chunk.usage
        self.id = chunk.id or self.id
        self.model = chunk.model or self.model
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            delta = choice.delta
            text = choice.text if delta is None else delta.content
            if text:
                self._parts.append(text)
                out.append(text)
            if delta is not None:
                thought = delta.reasoning or delta.reasoning_content
                if thought:
                    self._reasoning.append(thought)
                if delta.refusal:
                    self._refusal.append(delta.refusal)
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason


def _event_error(data: bytes) -> errors.APIError:
    """An error event inside a 200 stream, typed by the status code it carries (else 5xx)."""
    status = 500
    try:
        decoded = msgspec.json.decode(data)
    except DECODE_ERRORS:
        decoded = None
    inner = decoded.get("error", decoded) if isinstance(decoded, dict) else None
    code = inner.get("code") if isinstance(inner, dict) else None
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
        status = code
    if isinstance(decoded, dict) and not isinstance(decoded.get("error"), (dict, str)):
        data = msgspec.json.encode({"error": decoded})  # legacy `error:` field: the object itself
    return api_error(status, {}, data)
