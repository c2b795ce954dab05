"""The sans-I/O core: every decision of a call, none of its I/O.

`ClientCore` holds a client's configuration; `ClientCore.prepare` validates one call's input and
returns a `Call`, which knows the bytes to send, the timeouts of the next attempt, how to turn the
bytes received into a `Response` or a typed error, and whether (and when) to retry. A `Lookup` is
the same for the set-up requests (the model list, the probes), whose answers are plain values.
`Client` and `AsyncClient` drive both with their transports and differ only in how they wait.

Defaults, with their precedents:
* 2 retries with 0.5 s · 2^n backoff capped at 8 s, 25 % jitter, on 408/409/429/5xx but 501:
  the OpenAI SDK's policy, which users of these servers already live with.
* 64 MiB response limit: far above any completion, low enough that garbage cannot exhaust memory.
"""

from __future__ import annotations

import copy
import logging
import os
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import httpx
import msgspec

from . import errors
from ._config import UDS_BASE_URL, client_headers, client_uds, client_url
from ._dialects import (
    OWNED_PROBES,
    PROBE_PATHS,
    Dialect,
    Endpoint,
    Plan,
    ServerInfo,
    Whitespace,
    detect,
    get_dialect,
)
from ._extra import merge_extra
from ._log import log
from ._output.depth import MAX_DEPTH, nested_deeper, too_deep
from ._output.types import DECODE_ERRORS, OutputSpec, compile_output
from ._params import CALL_PARAMS, Timeouts, check_params, env_api_key, env_base_url
from ._reasoning import REASONING_PARAMS, reasoning_fields, reasoning_params, thinking_room
from ._response import Response
from ._secrets import scrub, scrub_text, secrets_of
from ._serving import HEADER_PARAMS, TABLED, check_model, serving_fields, trace_headers
from ._status import api_error
from ._tools import (
    Tool,
    ToolCall,
    check_choice,
    check_tools,
    decode_calls,
    tool_fields,
    tool_table,
)
from ._unapplied import unapplied
from ._wire.protocol import (
    ChatCompletion,
    Completion,
    ModelList,
    TokenLogprob,
    Usage,
    WireToolCall,
    add_usage,
)
from .errors import ConfigurationError

__all__ = ["Call", "ClientCore", "Lookup", "PreparedRequest"]


DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
MAX_RETRY_AFTER = 60.0  # a server asking for a longer pause gets an error, not a hung call
PROBE_TIMEOUT = 2.0  # a server that is up answers a probe at once; one that is not, fails fast
_QUICK = {"timeout": PROBE_TIMEOUT, "max_retries": 0}  # detection's requests

V = TypeVar("V")


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
        whitespace: Whitespace = "compact",
        uds: str | os.PathLike[str] | None = None,
    ) -> None:
        base_url = (base_url or UDS_BASE_URL) if uds is not None else env_base_url(base_url)
        if not base_url:
            raise ConfigurationError(
                "no base_url: pass Client(base_url=...) or set LMCLIENT_BASE_URL or OPENAI_BASE_URL"
            )
        url = client_url(base_url)
        self.uds = None if uds is None else client_uds(uds, url)  # the socket, else TCP
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
        if self.defaults.get("request_id") is not None:
            raise ValueError("defaults(): request_id names one request; give it per call")
        # Headers in defaults= are the client's: checked and encoded once, like headers=.
        given = self.defaults
        self.defaults = {k: v for k, v in given.items() if k != "headers"}
        default_headers = given.get("headers")
        if default_headers:
            headers = {**(headers or {}), **default_headers}
        if max_response_bytes < 1:
            raise ConfigurationError("max_response_bytes must be positive")
        if whitespace not in ("compact", "server"):
            raise ConfigurationError(
                f"whitespace must be 'compact' or 'server', not {whitespace!r}"
            )
        self.compact = whitespace == "compact"
        hdrs = client_headers(
            headers, api_key=env_api_key(api_key), api_key_given=bool(api_key), url=url
        )
        self.base_url = url.base_url
        self.root_url = self.base_url.removesuffix("/v1")  # where servers answer probes
        self.host = url.host
        self.model = model
        # A dialect that some releases of its server ignore waits for the probes (`check_server`).
        self.forced = None if dialect == "auto" else get_dialect(dialect)
        self.dialect = None if self.forced is None or self.forced.probe_first else self.forced
        self.server_info: ServerInfo | None = None
        self.listed: list[str] | None = None  # the model list the probes got, if they got one
        self.caveat = ""  # what the errors of invalid output add (`Dialect.caveat`)
        self.timeouts = Timeouts.from_user(timeout)
        self.deadline = deadline
        self.max_retries = max_retries
        self.max_reasks = max_reasks
        self.max_response_bytes = max_response_bytes
        self._get_headers = list(hdrs.items())
        self._post_headers = [*self._get_headers, ("content-type", "application/json")]
        # A call's own header lists, one per distinct set of per-call headers (`_call_headers`)
        self._header_lists: dict[tuple[tuple[str, str], ...], list[tuple[str, str]]] = {}
        if not HEADER_PARAMS.isdisjoint(given):
            self._check_headers("defaults", given)
        self._plans: dict[tuple[OutputSpec[Any], str, Dialect], _Planned] = {}
        self._usual: dict[tuple[type, str, bool], _Usual] = {}
        self._urls = {
            "chat": self.base_url + "/chat/completions",
            "completions": self.base_url + "/completions",
        }

    def __repr__(self) -> str:  # never the API key
        dialect = "auto" if self.dialect is None else self.dialect.name
        uds = "" if self.uds is None else f", uds={self.uds!r}"
        return f"base_url={self.base_url!r}{uds}, model={self.model!r}, dialect={dialect!r}"

    # -- set-up: what model=None and dialect="auto" leave open --------------------------------

    @property
    def ready(self) -> bool:
        """Model and dialect are known, so a call needs no set-up requests first."""
        return self.model is not None and self.dialect is not None

    def models_call(self, **params: Any) -> Lookup[list[str]]:
        """A request for the ids of the served models (``GET /v1/models``)."""
        request = PreparedRequest("GET", self.base_url + "/models", self._get_headers)
        return Lookup(self, request, _model_ids, params)

    def listing_call(self) -> Lookup[Listing]:
        """Detection's first question: the model list (one short request, never retried),
        which a client made with ``model=None`` needs anyway, and whose cards name vLLM,
        SGLang and llama.cpp (`Listing.owner`)."""
        request = PreparedRequest("GET", self.base_url + "/models", self._get_headers)
        return Lookup(self, request, _listing, _QUICK)

    def probe_calls(self, listing: Any) -> list[Lookup[Any] | None]:
        """The probes, one per path of `PROBE_PATHS` (each answers a JSON object; never
        retried), sent at once: only those of the server the model list named, if it named
        one (``None`` in the others' places), else all."""
        owner = listing.owner if isinstance(listing, Listing) else None
        asked = OWNED_PROBES.get(owner, PROBE_PATHS) if isinstance(owner, str) else PROBE_PATHS
        return [
            Lookup(
                self,
                PreparedRequest("GET", self.root_url + path, self._get_headers),
                _json_object,
                _QUICK,
            )
            if path in asked
            else None
            for path in PROBE_PATHS
        ]

    @staticmethod
    def unreached(answers: Sequence[Any]) -> bool:
        """Whether no request of detection (`listing_call`, `probe_calls`) reached the server
        (each failed to connect, or lost its connection): the server is down or still starting,
        and nothing can be learnt yet. A timeout is not that (a busy server may still answer
        the call)."""
        asked = [a for a in answers if a is not None]
        return all(
            isinstance(a, errors.APIConnectionError) and not isinstance(a, errors.APITimeoutError)
            for a in asked
        )

    def adopt_probes(self, answers: Sequence[Any]) -> ServerInfo:
        """Learn from the answers to `probe_calls` and `listing_call`, last (the exception where
        one failed, ``None`` where one was not asked): the dialect, if
        ``"auto"`` left it open, and the model, if ``None`` left it open and only one is served.

        Whatever failed (a 404, a broken connection, a body that is not JSON, a mock's unmocked
        route) is simply not recognised: nothing recognised is ``generic``, and detection never
        fails a call. A model list that did not come is `listed` ``None``: `model_list` asks
        again only if a call needs the model from it."""
        *probes, models = answers
        found = {p: a for p, a in zip(PROBE_PATHS, probes, strict=True) if isinstance(a, dict)}
        self.listed = models if isinstance(models, list) else None
        info = detect(self.host, found, self.listed or [])
        self.server_info = info
        if self.dialect is None:
            self.dialect = self.forced or get_dialect(info.dialect)
            self.caveat = self.dialect.caveat(info)
        if self.model is None and len(info.models) == 1:
            self.model = info.models[0]
        return info

    def unlisted(self, exc: errors.LMClientError) -> errors.LMClientError:
        """The error for a client made with ``model=None`` whose call names no model, when the
        model list cannot be had: a server or gateway without ``GET /v1/models`` (a 404, 405 or
        501, or an answer that is not a model list) is a configuration to fix, said as such; any
        other failure (the server unreachable, a bad key) is itself."""
        if isinstance(exc, errors.ProtocolError) or (
            isinstance(exc, errors.APIStatusError) and exc.status_code in (404, 405, 501)
        ):
            return ConfigurationError(
                f"model=None, and GET {httpx.URL(self.base_url).path}/models lists no models "
                f"({exc}): pass model=... to the client, the call or defaults="
            )
        return exc

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
        return self._checked(where, prompt, output_type, endpoint, params)[0]

    def _checked(
        self,
        where: str,
        prompt: Any,
        output_type: Any,
        endpoint: Endpoint,
        params: Mapping[str, Any],
    ) -> tuple[OutputSpec[Any], _Planned | None, list[Any] | None]:
        """`validate`, with what its checks computed: the prompt's messages, if it was given as
        messages, and the plan once the dialect is known."""
        if params:
            check_params(where, params, allow_n=where == "create")
        defaults = self.defaults
        if (params or defaults) and not (
            HEADER_PARAMS.isdisjoint(params) and HEADER_PARAMS.isdisjoint(defaults)
        ):
            self._check_headers(where, {**defaults, **params})
        spec = compile_output(output_type)
        messages = None  # a prompt given as messages (a str is one user message)
        if endpoint == "chat":
            if not isinstance(prompt, str):
                messages = _messages(prompt)
        elif endpoint != "completions":
            raise ValueError(f"endpoint must be 'chat' or 'completions', not {endpoint!r}")
        elif not isinstance(prompt, str):
            raise TypeError("complete() takes a str prompt")
        dialect = self.dialect or self.forced  # only forced: not probed yet, or a batch file's
        if dialect is None:
            return spec, None, messages
        key = (spec, endpoint, dialect)
        planned = self._plans.get(key)
        if planned is None:  # the dialect's refusals now, not after I/O
            planned = _Planned(dialect, dialect.plan(spec, endpoint, compact=self.compact))
            if len(self._plans) >= 256:  # bounded: output types made anew on every call
                self._plans.clear()
            self._plans[key] = planned
        dialect.check_server(self.server_info, planned.plan, endpoint)
        budget = planned.plan.budget
        controls = None  # the reasoning controls, refused now where the server has no field
        if params or defaults:  # the usual call sets neither: no work
            if not (REASONING_PARAMS.isdisjoint(params) and REASONING_PARAMS.isdisjoint(defaults)):
                controls = reasoning_params(params, defaults)
                if controls:
                    reasoning_fields(dialect.name, endpoint, controls, where)
            if not (_TOOL_PARAMS.isdisjoint(params) and _TOOL_PARAMS.isdisjoint(defaults)):
                able = None if self.server_info is None else self.server_info.tools
                check_tools(where, dialect.name, endpoint, spec, params, defaults, able)
            if not (_TABLED.isdisjoint(params) and _TABLED.isdisjoint(defaults)):
                self._serving(dialect, {**defaults, **params}, where)  # its refusals, now
            model = params.get("model") or defaults.get("model")
            if model is not None and self.server_info is not None:
                check_model(dialect.name, model, self.server_info.models, where)
        if budget is not None:
            max_tokens = params.get("max_tokens") or self.defaults.get("max_tokens")
            thinking = (thinking_room(controls) or 0) if controls else 0
            if max_tokens is not None and max_tokens < budget.fewest + thinking:
                after = f", after up to {thinking} of thinking and its tags" if thinking else ""
                raise ValueError(
                    f"{where}(): max_tokens={max_tokens} cannot hold any {spec.name} value: "
                    f"its shortest encoding needs at least {budget.fewest} tokens{after}"
                )
        extra = params.get("extra_body") or self.defaults.get("extra_body")
        if extra:
            dialect.check_extra(extra, endpoint)
            merge_extra({}, extra, planned.plan.fields)  # its refusals, before any request
        return spec, planned, messages

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
        if params.get("request_id") is not None:
            raise ValueError(f"{where}(): request_id names one request, not each of many")
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
        if (
            not params
            and not self.defaults
            and prompt.__class__ is str
            and isinstance(output_type, type)
        ):  # the usual call: its checks and body depend on nothing but the type (`_usual`)
            key = (output_type, endpoint, stream)
            usual = self._usual.get(key)
            if usual is None or usual[0] is not self.server_info or usual[1] is not self.model:
                usual = self._learn_usual(where, prompt, output_type, endpoint, stream)
            _, _, spec, plan, url, head, tail = usual
            data = head + _encode(prompt) + tail
            deadline = self.deadline
            return Call(  # `Call.new`, for a call with no parameters
                PreparedRequest("POST", url, self._post_headers, data),
                spec,
                plan,
                endpoint,
                self.max_response_bytes,
                self.max_retries,
                self.timeouts,
                None if deadline is None else time.monotonic() + deadline,
                self.max_reasks,
                self.caveat,
            )
        spec, planned, messages = self._checked(where, prompt, output_type, endpoint, params)
        assert planned is not None, "set-up (model, dialect) must come first"
        merged = {**self.defaults, **params} if self.defaults else params
        headers = self._post_headers
        if merged or messages is not None:
            data = _encode(self._body(prompt, messages, endpoint, merged, stream, planned))
            if not HEADER_PARAMS.isdisjoint(merged):
                headers = self._call_headers(merged, planned.dialect)
        else:  # the usual call: one prompt, no parameters
            template = planned.templates[stream]
            if template is None or template[0] is not self.model:
                template = planned.templates[stream] = self._template(endpoint, stream, planned)
            data = template[1] + _encode(prompt) + template[2]
        request = PreparedRequest("POST", self._urls[endpoint], headers, data)
        return Call.new(self, request, spec, planned.plan, endpoint, merged)

    def _learn_usual(
        self, where: str, prompt: str, output_type: type, endpoint: Endpoint, stream: bool
    ) -> _Usual:
        """Check a usual call (`prepare`) in full, and keep what its checks found with its body's
        template: valid as long as the server found by the probes and the model are."""
        spec, planned, _ = self._checked(where, prompt, output_type, endpoint, {})
        assert planned is not None, "set-up (model, dialect) must come first"
        _, head, tail = self._template(endpoint, stream, planned)
        usual = (self.server_info, self.model, spec, planned.plan, self._urls[endpoint], head, tail)
        if len(self._usual) >= 256:  # bounded: classes made anew on every call
            self._usual.clear()
        self._usual[output_type, endpoint, stream] = usual
        return usual

    def names_model(self, params: Mapping[str, Any]) -> bool:
        """Whether a call names its model (``model=``, or in ``defaults``): then a client made
        with ``model=None`` needs no model list to make it."""
        return params.get("model") is not None or self.defaults.get("model") is not None

    def _check_headers(self, where: str, params: Mapping[str, Any]) -> None:
        """What `check_params` cannot see in a call's headers: a header given twice (as a
        header and as its typed parameter), a trace state without its trace, and credentials
        replacing the client's (its API key would be dropped without a word)."""
        given = {name.lower() for name in params.get("headers") or ()}
        for name in ("traceparent", "tracestate"):
            if params.get(name) is not None and name in given:
                raise ValueError(f"{where}(): pass {name}= or the {name!r} header, not both")
        if params.get("request_id") is not None and "x-request-id" in given:
            raise ValueError(f"{where}(): pass request_id= or the 'X-Request-Id' header, not both")
        if params.get("tracestate") is not None and params.get("traceparent") is None:
            raise ValueError(f"{where}(): tracestate= needs traceparent= (W3C trace context)")
        if "authorization" in given and any(k == "authorization" for k, _ in self._get_headers):
            raise ValueError(
                f"{where}(): headers= cannot replace the client's credentials (its api_key or "
                "the base URL's): make a client per key, or one without api_key"
            )

    def _serving(
        self, dialect: Dialect, params: Mapping[str, Any], where: str
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """The body fields and headers of the call's request_id, priority and cache_salt on
        this client's server (`serving_fields`), refused where it would ignore them."""
        info = self.server_info
        kind, version = (None, None) if info is None else (info.kind, info.version)
        return serving_fields(dialect.name, params, where, kind, version)

    def _call_headers(self, params: Mapping[str, Any], dialect: Dialect) -> list[tuple[str, str]]:
        """The header list of a call that adds headers: the client's, with the call's
        ``headers=``, its request id where the server reads a header, and its trace context
        over them. One list per distinct set (so the transports' head cache, keyed by list,
        hits for a tenant's repeated headers), and a bounded number of them."""
        extra = {name.lower(): value for name, value in (params.get("headers") or {}).items()}
        if not _TABLED.isdisjoint(params):
            extra.update(self._serving(dialect, params, "call")[1])
        extra.update(trace_headers(params.get("traceparent"), params.get("tracestate")))
        if not extra:
            return self._post_headers
        key = tuple(extra.items())
        found = self._header_lists.get(key)
        if found is None:
            found = [(k, v) for k, v in self._post_headers if k not in extra]
            found += extra.items()
            if len(self._header_lists) >= 64:  # bounded: a request id is new on every call
                self._header_lists.clear()
            self._header_lists[key] = found
        return found

    def _body(
        self,
        prompt: Any,
        messages: list[Any] | None,
        endpoint: Endpoint,
        params: Mapping[str, Any],
        stream: bool,
        planned: _Planned,
    ) -> dict[str, Any]:
        """The request body; ``messages`` are the prompt's when it was given as messages."""
        body: dict[str, Any] = {"model": params.get("model") or self.model}
        if endpoint == "completions":
            body["prompt"] = prompt
        else:
            body["messages"] = messages or [{"role": "user", "content": prompt}]
        thinking: int | None = 0  # the tokens thinking may take first (`thinking_room`)
        if params:
            _add_params(body, params, endpoint)
            if not REASONING_PARAMS.isdisjoint(params):
                controls = reasoning_params(params, {})
                body.update(reasoning_fields(planned.dialect.name, endpoint, controls))
                thinking = thinking_room(controls)
            if params.get("tools"):
                body.update(tool_fields(planned.dialect.name, params))
            if not _TABLED.isdisjoint(params):
                body.update(self._serving(planned.dialect, params, "call")[0])
        budget = planned.plan.budget
        if budget is not None and params.get("max_tokens") is None and thinking is not None:
            # a bounded answer can then neither run on nor be cut, after its thinking budget
            body["max_tokens"] = budget.most + thinking
        if stream:
            body["stream"] = True
            if planned.dialect.stream_usage:
                body["stream_options"] = {"include_usage": True}
        body.update(planned.fields)
        extra = params.get("extra_body")
        if extra:
            merge_extra(body, extra, planned.plan.fields)
        return body

    def _template(
        self, endpoint: Endpoint, stream: bool, planned: _Planned
    ) -> tuple[str | None, bytes, bytes]:
        """The usual call's body cut around its prompt, for this model: the same bytes on every
        call but the prompt, which is encoded alone and put between them."""
        encoded = _encode(self._body(_MARK, None, endpoint, {}, stream, planned))
        head, mark, tail = encoded.partition(_encode(_MARK))
        assert mark and tail.find(mark) < 0, "the mark is random: nothing else holds it"
        return self.model, head, tail


def _add_params(body: dict[str, Any], params: Mapping[str, Any], endpoint: Endpoint) -> None:
    """The per-call parameters that go in the body, as each endpoint spells them."""
    for name, value in params.items():
        if value is None or name in CALL_PARAMS:
            continue
        if name == "logprobs" and endpoint == "completions":
            if value:  # legacy completions: logprobs is the number of alternatives
                body["logprobs"] = params.get("top_logprobs") or 0
        elif name == "top_logprobs" and endpoint == "completions":
            continue
        else:
            body[name] = list(value) if name == "stop" and isinstance(value, tuple) else value


_encode = msgspec.json.Encoder().encode
_MARK = "\x00" + os.urandom(8).hex()  # where a template's prompt goes; random, so no field holds it


# A usual call's checks passed (`ClientCore._learn_usual`): the server info and model they held
# for, the output spec and plan, the URL, and the body's template around the prompt.
_Usual = tuple[ServerInfo | None, str | None, OutputSpec[Any], Plan, str, bytes, bytes]


class _Planned:
    """A dialect's plan for one output type and endpoint, with its fields encoded once (a type's
    schema is most of a request body, and the same on every call), and the templates of the
    usual body, without and with ``stream`` (`ClientCore._template`)."""

    __slots__ = ("dialect", "fields", "plan", "templates")

    def __init__(self, dialect: Dialect, plan: Plan) -> None:
        self.dialect = dialect
        self.plan = plan
        self.fields = {name: msgspec.Raw(_encode(value)) for name, value in plan.fields.items()}
        self.templates: list[tuple[str | None, bytes, bytes] | None] = [None, None]


def _messages(prompt: Any) -> list[Any]:
    """A prompt given as messages, checked; a copy, so the caller's list is not the body's."""
    if isinstance(prompt, Sequence) and prompt:
        messages = list(prompt)
        for m in messages:
            if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
                raise TypeError("each message must be a mapping with a 'role' str")
        return messages
    raise TypeError("prompt must be a str or a non-empty list of message dicts")


class Attempts:
    """One request's attempts: the timeouts of the next one, when to give up, whether to retry.
    The state is its subclasses' (`Call`, `Lookup`), made by `attempt_settings` from the client's
    settings and the call's parameters."""

    if not TYPE_CHECKING:  # no state of its own (mypy would take it for all there is)
        __slots__ = ()
    request: PreparedRequest
    retries: int
    _attempt_started: float
    max_response_bytes: int
    max_retries: int
    _timeouts: Timeouts
    deadline_at: float | None

    def timeouts(self) -> Timeouts:
        """Timeouts of the next attempt, shortened to what is left of the deadline. The clock
        gives the attempt's start only where its DEBUG line may be written (`log_attempt`): a
        clock read costs every call."""
        self._attempt_started = (
            time.monotonic() if _debug_known(logging.DEBUG) is not False else 0.0
        )
        if self.deadline_at is None:
            return self._timeouts
        remaining = self.deadline_at - time.monotonic()
        if remaining <= 0:
            raise errors.APITimeoutError("the call's deadline expired")
        return self._timeouts.capped(remaining)

    def backoff(self, exc: errors.LMClientError) -> float:
        """The pause before retrying after ``exc``; re-raises ``exc`` if it must not be retried,
        its message then naming the request it came from (``... (GET /v1/models)``): a call
        may send set-up requests before its own, and an error must say which one failed. Every
        error of a call passes here first: the client's key leaves the server's text in it
        before it is logged or raised (`scrub`)."""
        scrub(exc, self.request.headers)
        try:
            return self._backoff(exc)
        except errors.LMClientError as raised:
            name_request(raised, self.request)
            raise

    def _backoff(self, exc: errors.LMClientError) -> float:
        """The pause before retrying after ``exc``; re-raises ``exc`` if it must not be retried:
        an error status the server did not mark retryable, or any other `APIError` than a
        connection error or timeout (a `ProtocolError`: the same request gets the same bytes)."""
        if self.retries >= self.max_retries:
            raise exc
        if isinstance(exc, errors.APIStatusError):
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
        """One DEBUG line per attempt; never the key, the prompt or the output. (An attempt
        that started while DEBUG was off, and ended with it on, was not timed.)"""
        started = self._attempt_started
        log.debug(
            "%s %s -> %d in %s (retry %d, request id %s)",
            self.request.method,
            httpx.URL(self.request.url).path,
            status,
            f"{(time.monotonic() - started) * 1000:.1f} ms" if started else "untimed",
            self.retries,
            scrub_text(headers.get("x-request-id"), secrets_of(self.request.headers)),
        )


def name_request(exc: errors.LMClientError, request: PreparedRequest) -> None:
    """Add the request's method and path to the message of ``exc`` (once). An invalid output
    (`ValidationError`) is about the model's text, and a closed client about the client, not a
    request: they keep their messages."""
    if isinstance(exc, (errors.ValidationError, errors.ClientClosedError)) or not exc.args:
        return
    named = f"({request.method} {httpx.URL(request.url).path})"
    message = str(exc.args[0])
    if not message.endswith(named):
        exc.args = (f"{message} {named}", *exc.args[1:])


def attempt_settings(
    core: ClientCore, params: Mapping[str, Any]
) -> tuple[int, Timeouts, float | None]:
    """A call's ``max_retries``, timeouts and deadline (as a time of `time.monotonic`): its
    parameters', else the client's."""
    timeout = params.get("timeout")
    deadline = params.get("deadline", core.deadline)
    return (
        params.get("max_retries", core.max_retries),
        core.timeouts if timeout is None else Timeouts.from_user(timeout),
        None if deadline is None else time.monotonic() + deadline,
    )


class Lookup(Attempts, Generic[V]):
    """A set-up request (the model list, a probe): its answer is a plain value, not a `Response`."""

    __slots__ = (
        "_attempt_started",
        "_decode",
        "_timeouts",
        "deadline_at",
        "max_response_bytes",
        "max_retries",
        "request",
        "retries",
    )

    def __init__(
        self,
        core: ClientCore,
        request: PreparedRequest,
        decode: Callable[[bytes], V],
        params: Mapping[str, Any],
    ) -> None:
        self.request = request
        self.retries = 0
        self._attempt_started = 0.0
        self.max_response_bytes = core.max_response_bytes
        self.max_retries, self._timeouts, self.deadline_at = attempt_settings(core, params)
        self._decode = decode

    def finish(self, status: int, headers: Mapping[str, str], body: bytes) -> V:
        """The decoded answer of a complete HTTP response, or its typed error."""
        if log.isEnabledFor(logging.DEBUG):
            self.log_attempt(status, headers)
        if status >= 300:
            raise api_error(status, headers, body)
        return self._decode(body)


def _model_ids(body: bytes) -> list[str]:
    return [m.id for m in _decode_wire(_MODEL_LIST, body).data]


class Listing(list[str]):
    """The served models' ids, and ``owner``: the ``owned_by`` every card names, if they name
    one and the same (``None`` otherwise)."""

    owner: str | None = None


def _listing(body: bytes) -> Listing:
    cards = _decode_wire(_MODEL_LIST, body).data
    listing = Listing(card.id for card in cards)
    owners = {card.owned_by for card in cards}
    owner = owners.pop() if len(owners) == 1 else None
    listing.owner = owner if isinstance(owner, str) else None
    return listing


def _json_object(body: bytes) -> dict[str, Any]:
    answer: dict[str, Any] = _decode_wire(_JSON_OBJECT, body)
    return answer


class Call(msgspec.Struct, Attempts):
    """One generation's state across attempts: what to send, when to give up, what came back.

    A msgspec Struct: one is made for every call, and its C constructor costs far less than a
    Python ``__init__`` (`ClientCore.prepare` makes the usual call's directly, `Call.new` any
    other)."""

    request: PreparedRequest
    spec: OutputSpec[Any]
    plan: Plan
    endpoint: Endpoint
    max_response_bytes: int
    max_retries: int
    _timeouts: Timeouts
    deadline_at: float | None
    max_reasks: int
    caveat: str  # what the errors of invalid output add (`ClientCore.caveat`)
    tools: dict[str, Tool[Any]] | None = None  # its answer's tool calls are decoded with these
    tool_choice: Any = None  # read only when there are tools
    retries: int = 0
    _attempt_started: float = 0.0
    reasks: int = 0
    attempts: Sequence[str] = ()  # texts of the answers re-asked so far
    spent: Usage | None = None  # the usage of the answers re-asked so far (`add_usage`)

    @classmethod
    def new(
        cls,
        core: ClientCore,
        request: PreparedRequest,
        spec: OutputSpec[Any],
        plan: Plan,
        endpoint: Endpoint,
        params: Mapping[str, Any],
    ) -> Call:
        """The call of ``request``, with its parameters' settings, else the client's."""
        max_retries, timeouts, deadline_at = attempt_settings(core, params)
        return cls(
            request,
            spec,
            plan,
            endpoint,
            core.max_response_bytes,
            max_retries,
            timeouts,
            deadline_at,
            params.get("max_reasks", core.max_reasks),
            core.caveat,
            tool_table(params),
            params.get("tool_choice"),
        )

    def finish(self, status: int, headers: Mapping[str, str], body: bytes) -> Response[Any]:
        """Turn a complete HTTP response into a `Response` or raise its typed error."""
        if _debug_known(logging.DEBUG) is not False and log.isEnabledFor(logging.DEBUG):
            self.log_attempt(status, headers)
        if status >= 300:
            raise api_error(status, headers, body)
        chat = self.endpoint == "chat"
        if nested_deeper(body, MAX_DEPTH):
            refusal = f"unexpected response body ({too_deep(MAX_DEPTH)})"
            raise errors.ProtocolError(refusal, body=body)
        try:  # `_decode_wire`, inline: a call costs every response
            wire: Any = _CHAT.decode(body) if chat else _COMPLETION.decode(body)
        except DECODE_ERRORS as exc:
            raise errors.ProtocolError(f"unexpected response body ({exc})", body=body) from None
        return self._chat(wire, body, headers) if chat else self._completion(wire, body, headers)

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
        again.spent = exc.total_usage
        log.warning(
            "re-ask %d of %d after invalid output: %s", again.reasks, self.max_reasks, exc.detail
        )
        return again

    # -- response bodies -------------------------------------------------------------------

    def _chat(self, wire: ChatCompletion, body: bytes, headers: Mapping[str, str]) -> Response[Any]:
        choices = wire.choices
        if len(choices) == 1:
            first = choices[0]
            msg = first.message
            text = msg.content
            if (
                text
                and first.finish_reason == "stop"
                and not msg.refusal
                and first.logprobs is None
                and not msg.tool_calls  # vLLM sends "tool_calls": [] with every message
                and self.tools is None  # `result` holds the answer to the call's tool_choice
            ):
                reasoning = msg.reasoning or msg.reasoning_content
                return self._one(text, wire, body, reasoning, headers)
        elif not choices:
            raise errors.ProtocolError("the response has no choices")
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
            raw=body,
            reasoning=reasoning,
            refusal=refusal,
            logprobs=first.logprobs.content if first.logprobs is not None else None,
            tool_calls=msg.tool_calls,
            headers=headers,
        )

    def _completion(
        self, wire: Completion, body: bytes, headers: Mapping[str, str]
    ) -> Response[Any]:
        choices = wire.choices
        if len(choices) == 1:
            only = choices[0]
            text = only.text
            if text and only.finish_reason == "stop" and only.logprobs is None:
                return self._one(text, wire, body, None, headers)
        elif not choices:
            raise errors.ProtocolError("the response has no choices")
        choices = sorted(choices, key=lambda c: c.index)
        first = choices[0].logprobs
        return self.result(
            [c.text or "" for c in choices],
            [c.finish_reason for c in choices],
            usage=wire.usage,
            model=wire.model,
            id=wire.id,
            raw=body,
            logprobs=first.normalized() if first is not None else None,
            headers=headers,
        )

    def _one(
        self,
        text: str,
        wire: ChatCompletion | Completion,
        body: bytes,
        reasoning: str | None,
        headers: Mapping[str, str],
    ) -> Response[Any]:
        """`result` for the common answer: one choice, ended by "stop", with content, without
        a refusal or logprobs, so that only its decoding can fail."""
        usage = wire.usage
        try:
            value = self.plan.decode(text)
        except errors.ValidationError as exc:
            error = self.unapplied(text) or exc
            self.spend(error, usage)
            raise self.explained(error) from None
        spent = self.spent
        return Response(
            [value],
            [text],
            ["stop"],
            usage,
            wire.model,
            wire.id,
            body,
            usage if spent is None else add_usage(spent, usage),
            reasoning,
            None,
            self.retries,
            self.reasks,
            self.plan.compact,
            headers,
        )

    def spend(self, exc: errors.ValidationError, usage: Usage | None) -> None:
        """Put on ``exc`` the usage of the answer it rejects, and the call's total so far."""
        exc.usage = usage
        exc.total_usage = add_usage(self.spent, usage)

    def result(
        self,
        texts: list[str],
        reasons: list[str | None],
        *,
        usage: Usage | None,
        model: str | None,
        id: str | None,
        raw: bytes | list[bytes],
        reasoning: str | None = None,
        refusal: str | None = None,
        logprobs: list[TokenLogprob] | None = None,
        tool_calls: list[WireToolCall] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Response[Any]:
        """Validate every choice's text into the output type, and the first choice's tool
        calls into their tools' types; the same for bodies and streams. ``raw`` is the body
        (a stream: its events' data), kept for `Response.raw`, ``headers`` the response's,
        for `Response.headers`."""
        try:
            values, calls = self._validated(texts, reasons, usage, reasoning, refusal, tool_calls)
        except errors.ValidationError as exc:
            self.spend(exc, usage)
            raise
        spent = self.spent
        return Response(
            values,
            texts,
            reasons,
            usage,
            model,
            id,
            raw,
            usage if spent is None else add_usage(spent, usage),
            reasoning,
            logprobs,
            self.retries,
            self.reasks,
            self.plan.compact,
            headers,
            calls,
        )

    def _validated(
        self,
        texts: list[str],
        reasons: list[str | None],
        usage: Usage | None,
        reasoning: str | None,
        refusal: str | None,
        tool_calls: list[WireToolCall] | None,
    ) -> tuple[list[Any], tuple[ToolCall[Any], ...]]:
        """Every choice's value, and the first choice's tool calls, validated."""
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
                raise self.explained(
                    self.unapplied(text)
                    or errors.TruncatedError(text=text, output_type=self._type, usage=usage)
                )
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
                error = self.unapplied(text) or exc
                if len(texts) > 1:
                    error.attempts = list(texts)
                raise self.explained(error) from None  # its message completed
        calls: tuple[ToolCall[Any], ...] = ()
        if self.tools:
            cut = reasons[0] == "length"
            try:
                calls = tuple(decode_calls(self.tools, tool_calls)) if tool_calls else ()
                check_choice(self.tool_choice, calls, texts[0])
            except errors.ValidationError as exc:
                if not cut:
                    raise
                # The call, or its arguments, did not fit in max_tokens; with no call at all,
                # the server may as well have ignored the tools: both are said.
                truncated = errors.TruncatedError(text=exc.text, output_type=None, usage=usage)
                if not tool_calls:
                    truncated.args = (f"{truncated}; {exc.detail}",)
                raise truncated from None
        return values, calls

    def unapplied(self, text: str) -> errors.ConstraintIgnoredError | None:
        """The error for an answer that shows the constraint was never applied (`unapplied`),
        if ``text`` does: said instead of a cut or a decoding error, which would mislead."""
        why = unapplied(self.spec, self.plan, text)
        if why is None:
            return None
        return errors.ConstraintIgnoredError(
            text=text,
            output_type=self._type,
            fields=list(self.plan.fields),
            dialect=self.plan.dialect,
            why=why,
        )

    def explained(self, exc: errors.ValidationError) -> errors.ValidationError:
        """``exc``, its message followed by the set-up's caveat, if any."""
        if self.caveat:
            exc.args = (f"{exc}; {self.caveat}",)
        return exc

    @property
    def _type(self) -> Any:
        return self.spec.output_type


_TOOL_PARAMS = frozenset({"tools", "tool_choice"})
_TABLED = frozenset(TABLED)
_CHAT = msgspec.json.Decoder(ChatCompletion)
_COMPLETION = msgspec.json.Decoder(Completion)
_MODEL_LIST = msgspec.json.Decoder(ModelList)
_JSON_OBJECT = msgspec.json.Decoder(dict[str, Any])


# Whether the logger is enabled for a level, as `Logger.isEnabledFor` caches it (None: not known
# yet, or not CPython's logging): a look-up, not a call, on every response. Logging clears this
# cache whenever a level changes.
_debug_known: Callable[[int], bool | None] = getattr(log, "_cache", {}).get


def _decode_wire(decoder: msgspec.json.Decoder[Any], body: bytes) -> Any:
    if nested_deeper(body, MAX_DEPTH):
        raise errors.ProtocolError(f"unexpected response body ({too_deep(MAX_DEPTH)})", body=body)
    try:
        return decoder.decode(body)
    except DECODE_ERRORS as exc:
        raise errors.ProtocolError(f"unexpected response body ({exc})", body=body) from None
