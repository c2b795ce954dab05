"""``FakeLLM``: an OpenAI-compatible server as a pure function of the request.

Both ways of mounting it (a real loopback HTTP server, or respx routes) call
:meth:`FakeLLM.handle`, so they answer byte for byte alike.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

import msgspec

from ._constraints import Constraint, read_constraint
from ._errors import ConstraintError, UnsatisfiableError
from ._grammar import grammar_literals
from ._recording import RecordedRequest, endpoint_of, message_text
from ._regex_gen import regex_instance
from ._schema_instance import schema_instance
from ._script import Reply, Script, StreamStyle
from ._wire import (
    JSON_HEADERS,
    Answer,
    FakeResponse,
    Kind,
    completion_body,
    error_response,
    estimate_tokens,
    json_response,
    sse_response,
)

if TYPE_CHECKING:
    import respx

__all__ = ["FakeLLM"]

CREATED = 1_700_000_000  # a fixed "created" timestamp keeps whole bodies comparable in tests

# What each impersonated server kind answers on the probe path that identifies it (the parts
# a client reads to pick a dialect); "generic" answers none, like an unknown server.
PROBES: dict[str, tuple[str, dict[str, Any]]] = {
    "vllm": ("/version", {"version": "0.33.0"}),
    "vllm-guided": ("/version", {"version": "0.10.1.1"}),
    "sglang": ("/server_info", {"version": "0.5.23"}),
    "llamacpp": ("/props", {"default_generation_settings": {}, "build_info": "b11434-515e855"}),
    "tgi": ("/info", {"model_id": "fake-model", "version": "3.3.6"}),
    "ollama": ("/api/version", {"version": "0.33.0"}),
}


class FakeLLM:
    """A fake OpenAI-compatible LLM server for tests.

    What a generation request gets, in order: a scripted reply (:meth:`reply`,
    :meth:`reply_sequence`, :meth:`reply_error`); else text generated from the constraint the
    request carries (a JSON instance of a schema, a regex match, one of the choices); else
    ``default_text``. Generation is deterministic for a given ``seed``; choice ``i`` of a
    request with ``n`` choices uses ``seed + i``.

    ``max_tokens`` (or ``max_completion_tokens``) is honoured with the fake's token estimate,
    one token per four characters: longer text is cut and ends with ``finish_reason
    "length"``. Stream settings (``chunk_size``, ``keepalive``, ``error_after``,
    ``close_after``, ``drop_after``; see :class:`StreamStyle`) apply to every stream unless a
    scripted reply overrides them. ``on_chunk(index)`` runs before each SSE ``data:`` event
    is written, in the thread writing the stream, so a test can pace a stream with a
    ``threading.Event``; ``on_request(request)`` runs before any request is answered.

    ``server`` is the kind of server it impersonates on the probe endpoints that clients use to
    pick a dialect (``"vllm"`` by default; ``"generic"`` answers none of them).

    Mount it with ``with fake.serve() as base_url:`` (a real HTTP server on 127.0.0.1) or
    ``with fake.mock() as base_url:`` (respx routes for any httpx client).
    """

    def __init__(
        self,
        models: Iterable[str] = ("fake-model",),
        *,
        server: str = "vllm",
        seed: int = 0,
        default_text: str = "This is a fake reply.",
        base_url: str | None = None,
        chunk_size: int = 4,
        keepalive: bool = False,
        error_after: int | None = None,
        close_after: int | None = None,
        drop_after: int | None = None,
        on_chunk: Callable[[int], object] | None = None,
        on_request: Callable[[RecordedRequest], object] | None = None,
    ) -> None:
        self.models = list(models)
        if not self.models:
            raise ValueError("FakeLLM needs at least one model name")
        self.seed = seed
        self.default_text = default_text
        self.base_url = base_url
        self.style = StreamStyle(chunk_size, keepalive, error_after, close_after, drop_after)
        self.on_chunk = on_chunk
        self.on_request = on_request
        self._script = Script()
        self._routes: dict[tuple[str, str], FakeResponse] = {}
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._ids = itertools.count(1)
        self._in_flight = 0
        self._max_in_flight = 0
        if server != "generic":
            if server not in PROBES:
                raise ValueError(f"server must be one of {[*PROBES, 'generic']}, not {server!r}")
            path, body = PROBES[server]
            self.add_route("GET", path, body)

    # -- scripting -------------------------------------------------------------------------

    def reply(
        self,
        value: Any,
        *,
        times: int | None = None,
        when: str | Callable[[RecordedRequest], bool] | None = None,
        finish_reason: str = "stop",
        refusal: str | None = None,
        reasoning: str | None = None,
        usage: dict[str, int] | None = None,
        logprobs: Any = None,
        chunk_size: int | None = None,
        keepalive: bool | None = None,
        error_after: int | None = None,
        close_after: int | None = None,
        drop_after: int | None = None,
    ) -> Reply:
        """Script the answer text: a ``str`` is sent as is, ``None`` as ``content: null``, any
        other value JSON-encoded by msgspec (Structs, dataclasses, lists, numbers, ...).

        ``times=None`` (default) answers every later request no counted reply takes;
        ``times=k`` answers the next ``k``. ``when`` limits the reply to requests whose prompt
        (last user message, or completion prompt) contains the substring, or that the
        predicate accepts. Each choice of an ``n > 1`` request takes its own reply.
        """
        content = value if value is None or isinstance(value, str) else _encode(value)
        reply = Reply(
            content=content,
            finish_reason=finish_reason,
            refusal=refusal,
            reasoning=reasoning,
            usage=usage,
            logprobs=logprobs,
            when=when,
            times=times,
            chunk_size=chunk_size,
            keepalive=keepalive,
            error_after=error_after,
            close_after=close_after,
            drop_after=drop_after,
        )
        self._script.add(reply)
        return reply

    def reply_sequence(
        self, values: Iterable[Any], *, when: str | Callable[[RecordedRequest], bool] | None = None
    ) -> list[Reply]:
        """Script one answer per value, used once each, in order."""
        return [self.reply(value, times=1, when=when) for value in values]

    def reply_error(
        self,
        status: int,
        body: dict[str, Any] | str | bytes,
        *,
        headers: Mapping[str, str] | None = None,
        times: int | None = 1,
        when: str | Callable[[RecordedRequest], bool] | None = None,
    ) -> Reply:
        """Answer with an HTTP error: a ``dict`` body is JSON-encoded, a ``str`` becomes the
        message of a vLLM-style envelope, ``bytes`` are sent verbatim. Used once by default."""
        if status < 400:
            raise ValueError("reply_error needs an error status (>= 400)")
        if isinstance(body, str):
            body = {"error": {"message": body, "type": "error", "param": None, "code": status}}
        raw = body if isinstance(body, bytes) else _encode(body).encode()
        given = {k.lower(): v for k, v in (headers or {}).items()}
        default_type = (
            "text/plain; charset=utf-8" if isinstance(body, bytes) else "application/json"
        )
        given.setdefault("content-type", default_type)
        reply = Reply(status=status, body=raw, headers=tuple(given.items()), times=times, when=when)
        self._script.add(reply)
        return reply

    def add_route(
        self,
        method: str,
        path: str,
        body: Any,
        *,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Answer ``method path`` (exact path, e.g. ``"/version"``) with a fixed response.

        For server probes and extra endpoints; a ``str``/``bytes`` body is sent as is, anything
        else as JSON. Fixed routes take precedence over the built-in endpoints.
        """
        raw = body.encode() if isinstance(body, str) else body
        if isinstance(raw, bytes):
            given = {"content-type": "text/plain; charset=utf-8"}
        else:
            raw, given = msgspec.json.encode(body), dict(JSON_HEADERS)
        given.update({k.lower(): v for k, v in (headers or {}).items()})
        self._routes[(method.upper(), path)] = FakeResponse(status, list(given.items()), raw)

    @property
    def pending(self) -> int:
        """How many uses of counted (``times=k``) replies are left."""
        return self._script.pending

    def reset(self) -> None:
        """Forget recorded requests, scripted replies and the in-flight peak (not routes)."""
        self._script.clear()
        with self._lock:
            self._requests.clear()
            self._max_in_flight = self._in_flight

    # -- observation -----------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received, oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def last_request(self) -> RecordedRequest:
        with self._lock:
            if not self._requests:
                raise LookupError("FakeLLM has not received any request")
            return self._requests[-1]

    @property
    def max_in_flight(self) -> int:
        """The most requests handled at the same time (served mode), streams included."""
        with self._lock:
            return self._max_in_flight

    @contextmanager
    def _in_flight_scope(self) -> Iterator[None]:
        """Count a request as being handled; the HTTP server wraps each exchange in this."""
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1

    # -- mounting --------------------------------------------------------------------------

    def serve(self) -> AbstractContextManager[str]:
        """Run a real HTTP/1.1 server on 127.0.0.1; yields its base URL (``.../v1``)."""
        from ._server import serve

        return serve(self)

    def mock(self, router: respx.Router | None = None) -> AbstractContextManager[str]:
        """Route httpx requests to the fake with respx; yields the base URL to use.

        Without ``router`` a ``respx.mock`` is started for the duration; with one, a route is
        added to it and removed on exit. Requests to any URL are answered, or only those under
        the origin of ``base_url`` when the fake was given one.
        """
        from ._respx import mock

        return mock(self, router)

    # -- handling --------------------------------------------------------------------------

    def handle(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes
    ) -> FakeResponse:
        """Answer one HTTP request; records it first. Never raises for bad input."""
        path = path.split("?", 1)[0]
        try:
            decoded: Any = msgspec.json.decode(body) if body else None
            bad_json = False
        except msgspec.DecodeError:
            decoded, bad_json = None, True
        request = RecordedRequest(
            method=method.upper(),
            path=path,
            endpoint=endpoint_of(path),
            headers={k.lower(): v for k, v in headers.items()},
            body=decoded,
            raw_body=body,
        )
        with self._lock:
            self._requests.append(request)
        if self.on_request is not None:
            self.on_request(request)
        fixed = self._routes.get((request.method, path))
        if fixed is not None:
            return fixed
        if request.endpoint == "models" and request.method == "GET":
            return self._models()
        if request.endpoint not in ("chat", "completions") or request.method != "POST":
            return error_response(
                404, f"Route {request.method} {path} not found", "not_found_error", code=404
            )
        if bad_json or not isinstance(decoded, dict):
            return _bad_request("The request body is not a JSON object")
        return self._generate(request, decoded)

    def _models(self) -> FakeResponse:
        cards = [
            {"id": model, "object": "model", "created": 0, "owned_by": "lmclient-fake"}
            for model in self.models
        ]
        return json_response(200, {"object": "list", "data": cards})

    def _generate(self, request: RecordedRequest, body: dict[str, Any]) -> FakeResponse:
        kind: Kind = "chat" if request.endpoint == "chat" else "completions"
        model = body.get("model") or self.models[0]
        if model not in self.models:
            message = f"The model `{model}` does not exist."
            return error_response(404, message, "NotFoundError", param="model", code=404)
        problem = _check_body(kind, body)
        if problem:
            return _bad_request(problem)
        try:
            constraint = read_constraint(body)
        except ConstraintError as exc:
            return _bad_request(str(exc))
        first = self._script.take(request, errors=True)
        if first is not None and first.is_error:
            return FakeResponse(first.status, list(first.headers), first.body)
        limit = _first_set(body, "max_completion_tokens", "max_tokens")
        answers: list[Answer] = []
        replies: list[Reply | None] = [first]
        try:
            for index in range(body.get("n") or 1):
                if index:
                    replies.append(self._script.take(request, errors=False))
                answers.append(self._answer(replies[index], constraint, index, limit))
        except UnsatisfiableError as exc:
            return _bad_request(str(exc))
        number = next(self._ids)
        head = {
            "id": f"chatcmpl-{number}" if kind == "chat" else f"cmpl-{number}",
            "object": "chat.completion" if kind == "chat" else "text_completion",
            "created": CREATED,
            "model": model,
        }
        usage = _usage(kind, body, answers, first)
        if not request.stream:
            return json_response(200, completion_body(kind, head, answers, usage))
        options = body.get("stream_options") or {}
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
        style = self.style.override(first)
        return sse_response(
            kind, head, answers, usage if include_usage else None, style, self.on_chunk
        )

    def _answer(
        self, reply: Reply | None, constraint: Constraint, index: int, limit: Any
    ) -> Answer:
        """One choice: the scripted reply or generated text, cut to the token limit."""
        if reply is None:
            content: str | None = self._text_for(constraint, self.seed + index)
            answer = Answer(content, "stop")
        else:
            content = reply.content
            answer = Answer(
                content, reply.finish_reason, reply.refusal, reply.reasoning, reply.logprobs
            )
        if isinstance(limit, int) and content and estimate_tokens(content) > limit:
            return dataclasses.replace(answer, content=content[: 4 * limit], finish_reason="length")
        return answer

    def _text_for(self, constraint: Constraint, seed: int) -> str:
        """Text satisfying ``constraint`` (raises ``UnsatisfiableError`` when it cannot)."""
        kind, value = constraint.kind, constraint.value
        if kind == "json_schema":
            return _encode(schema_instance(value, seed=seed))
        if kind == "json_object":
            return "{}"
        if kind == "regex":
            try:
                return regex_instance(value, seed=seed)
            except re.error as exc:
                raise UnsatisfiableError(f"bad regex {value!r}: {exc}") from None
        if kind == "choice":
            return str(random.Random(seed).choice(value))
        if kind == "grammar":
            options = grammar_literals(value)
            if options is None:
                raise UnsatisfiableError(
                    "FakeLLM only generates for grammars that choose between literals "
                    '(root ::= "a" | "b"); script the answer with FakeLLM.reply(...)'
                )
            return random.Random(seed).choice(options)
        return self.default_text


def _encode(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def _first_set(body: dict[str, Any], *keys: str) -> Any:
    """The first of ``keys`` present and not null: clients often send optional fields as null."""
    return next((body[key] for key in keys if body.get(key) is not None), None)


def _bad_request(message: str) -> FakeResponse:
    return error_response(400, message, "BadRequestError", param=None, code=400)


def _check_body(kind: str, body: dict[str, Any]) -> str | None:
    """The first reason a real server would reject the body with 400, if any."""
    if kind == "chat" and not isinstance(body.get("messages"), list):
        return "messages: a list of messages is required"
    if kind == "completions" and not isinstance(body.get("prompt"), (str, list)):
        return "prompt: a string or a list of strings is required"
    n = 1 if body.get("n") is None else body["n"]
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        return "n must be a positive integer"
    if body.get("stream_options") is not None and body.get("stream") is not True:
        return "Stream options can only be defined when `stream=True`."
    return None


def _usage(
    kind: str, body: dict[str, Any], answers: list[Answer], first: Reply | None
) -> dict[str, int]:
    """Estimated usage, or the first scripted reply's ``usage`` when it sets one."""
    if first is not None and first.usage is not None:
        return dict(first.usage)
    if kind == "chat":
        prompt = "".join(message_text(m) for m in body["messages"] if isinstance(m, dict))
    else:
        given = body["prompt"]
        prompt = (
            given if isinstance(given, str) else "".join(p for p in given if isinstance(p, str))
        )
    prompt_tokens = max(1, estimate_tokens(prompt))
    completion_tokens = sum(
        estimate_tokens((a.reasoning or "") + (a.content or "") + (a.refusal or ""))
        for a in answers
    )
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
