"""The sans-I/O core: a client's configuration, and every decision of a call before it is sent.

`ClientCore` holds a client's configuration (its URL, headers, defaults, dialect and model once
known, `CallSettings`); `ClientCore.prepare` validates one call's input and builds its request
into a `Call` (`lmclient._call`: its attempts, retries, re-asks and decoding). The set-up
requests (the model list, the probes) are `Lookup`s. `Client` and `AsyncClient` drive both with
their transports and differ only in how they wait.

Default, with its precedent: a 64 MiB response limit: far above any completion, low enough that
garbage cannot exhaust memory. (The retry policy's are in `lmclient._call`.)
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

import httpx
import msgspec

from . import _confidence, errors
from ._call import Abort, Call, Listing, Lookup, new_rid
from ._config import UDS_BASE_URL, client_headers, client_uds, client_url
from ._dialects import (
    OWNED_PROBES,
    PROBE_PATHS,
    Dialect,
    Endpoint,
    ServerInfo,
    Whitespace,
    detect,
    get_dialect,
)
from ._embeddings import tokenize_call
from ._extra import merge_extra
from ._media import check_media, content_media, prompt_messages, wire_messages
from ._output.depth import body_decoder
from ._output.types import OutputSpec, compile_output
from ._params import (
    CALL_PARAMS,
    RESPELT,
    Prompt,
    as_given,
    check_params,
    env_api_key,
    env_base_url,
)
from ._plans import Planned, Plans, Thinking
from ._reasoning import REASONING_PARAMS, reasoning_fields, reasoning_params, thinking_room
from ._request import CallSettings, PreparedRequest, Timeouts
from ._runaway import Runaway, RunawaySetting, runaway_setting, server_fields
from ._servers import SERVERS
from ._serving import (
    HEADER_PARAMS,
    TABLED,
    check_model,
    ignored_model,
    serving_fields,
    trace_headers,
)
from ._tools import check_tools, tool_fields
from ._turn import Turn
from ._usage import Many
from ._wire.protocol import ModelList
from .errors import ConfigurationError, UnsupportedConstraintError

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "ClientCore", "Reading", "Unlisted"]


DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024
PROBE_TIMEOUT = 2.0  # a server that is up answers a probe at once; one that is not, fails fast
_QUICK = {"timeout": PROBE_TIMEOUT, "max_retries": 0}  # detection's requests

# How a call's parameters (the client's defaults with them) go in its body, told once by
# `ClientCore._checked` so that building the request asks no more: ``"given"``, each as it is,
# and no defaults (`as_given`: the usual call's ``temperature``, ``max_tokens``...: one
# ``dict.update``, and the call keeps the client's settings); ``"spelt"``, each as its endpoint
# spells it (`_add_params`: a ``None`` left out, ``stop``..., lmclient's own read by the call);
# ``"special"``, that and some of `_CHECKED` (a header, a reasoning control, a tool...), which
# have their own checks and fields.
Shape = Literal["given", "spelt", "special"]
# How a call's answer is read: ``"call"``, whole, or as a stream where lmclient watches it for
# runaways (`Call.guard`); ``"stream"``, a user's stream; ``"file"``, a batch file's request
# line, sent by no one here (never streamed).
Reading = Literal["call", "stream", "file"]


class Unlisted(NamedTuple):
    """The set-up requests of ``probabilities=True`` for an output type on a server that reads
    ``logprob_token_ids``: one ``/tokenize`` per piece of its options (`_confidence.pieces`),
    whose answers `adopt` keeps in its plan, so that every later call of the type sends them."""

    planned: Planned
    calls: list[Lookup[list[int]]]

    def adopt(self, answers: Sequence[list[int]]) -> None:
        """Keep the pieces' token ids (their answers, in the calls' order) in the plan."""
        self.planned.listed = _confidence.listed_ids(answers)


class Checked(msgspec.Struct, frozen=True, kw_only=True):
    """What the checks of a call's input (`ClientCore._checked`) computed, for building its
    request: the output type's spec, the dialect's plan once the dialect is known, the prompt's
    messages if it was given as messages (``parts``: whether they hold text and media parts to
    translate for the server), and the `Shape` of its parameters."""

    spec: OutputSpec[Any]
    planned: Planned | None
    messages: list[Any] | None
    parts: bool
    shape: Shape
    turn: Turn | None = None  # tools beside an output type (`lmclient._turn`)
    # a call with thinking where the server applies a grammar from the first token
    reasoned: Thinking | None = None


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
        runaway: RunawaySetting = "on",
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
        if "runaway" in self.defaults:
            runaway_setting(self.defaults["runaway"], "defaults")
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
        try:
            self.runaway = runaway_setting(runaway, "Client")  # ``None``: "off"
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
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
        self.abort_url = self._abort_url()  # where its calls are aborted (`_abort_url`), if any
        self.listed: list[str] | None = None  # the model list the probes got, if they got one
        self.caveat = ""  # what the errors of invalid output add (`Dialect.caveat`, `_fallback`)
        self.unserved = ""  # the refusal of the client's model, if the server would ignore it
        self.settings = CallSettings(
            max_retries=max_retries,
            max_reasks=max_reasks,
            max_response_bytes=max_response_bytes,
            timeouts=Timeouts.from_user(timeout),
            deadline=deadline,
        )
        self._get_headers = list(hdrs.items())
        self.post_headers = [*self._get_headers, ("content-type", "application/json")]
        # A call's own header lists, one per distinct set of per-call headers (`_call_headers`)
        self._header_lists: dict[tuple[tuple[str, str], ...], list[tuple[str, str]]] = {}
        if not HEADER_PARAMS.isdisjoint(given):
            self._check_headers("defaults", given)
        self._plans = Plans(compact=self.compact, runaway=self.runaway)
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
        """Model and dialect are known, so a call needs no set-up requests first; a client
        whose model the server would ignore (`unserved`) is never ready: each call goes
        through `refuse_unserved`."""
        return self.model is not None and self.dialect is not None and not self.unserved

    def models_call(self, **params: Any) -> Lookup[list[str]]:
        """A request for the ids of the served models (``GET /v1/models``)."""
        request = PreparedRequest("GET", self.base_url + "/models", self._get_headers)
        return Lookup.new(self.settings, request, model_ids, params)

    def listing_call(self) -> Lookup[Listing]:
        """Detection's first question: the model list (one short request, never retried),
        which a client made with ``model=None`` needs anyway, and whose cards name vLLM,
        SGLang and llama.cpp (`Listing.owner`)."""
        request = PreparedRequest("GET", self.base_url + "/models", self._get_headers)
        return Lookup.new(self.settings, request, listing, _QUICK)

    def probe_calls(self, listing: Any) -> list[Lookup[Any] | None]:
        """The probes, one per path of `PROBE_PATHS` (each answers a JSON object; never
        retried), sent at once: only those of the server the model list named, if it named
        one (``None`` in the others' places), else all."""
        owner = listing.owner if isinstance(listing, Listing) else None
        asked = OWNED_PROBES.get(owner, PROBE_PATHS) if isinstance(owner, str) else PROBE_PATHS
        return [
            Lookup.new(
                self.settings,
                PreparedRequest("GET", self.root_url + path, self._get_headers),
                json_object,
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

    def adopt_probes(self, answers: Sequence[Any], *, mocked: bool) -> ServerInfo:
        """Learn from the answers to `probe_calls` and `listing_call`, last (the exception where
        one failed, ``None`` where one was not asked): the dialect, if
        ``"auto"`` left it open, and the model, if ``None`` left it open and only one is served.
        ``mocked``: the answers came through a respx mock (the transport's `mocked`).

        Whatever failed (a 404, a broken connection, a body that is not JSON, a mock's unmocked
        route) is simply not recognised: nothing recognised is ``generic``, and detection never
        fails a call. A model list that did not come is `listed` ``None``: `model_list` asks
        again only if a call needs the model from it. A model given to the client that the
        server would answer with another is `unserved` (refused by `refuse_unserved`)."""
        *probes, models = answers
        found = {p: a for p, a in zip(PROBE_PATHS, probes, strict=True) if isinstance(a, dict)}
        self.listed = models if isinstance(models, list) else None
        info = detect(self.host, found, self.listed or [])
        self.server_info = info
        if self.dialect is None:
            self.dialect = self.forced or get_dialect(info.dialect)
            self.caveat = self.dialect.caveat(info)
            if self.forced is None and info.kind == "unknown":
                self.caveat = self._fallback(answers, mocked=mocked)
        self.abort_url = self._abort_url()
        if self.model is None and len(info.models) == 1:
            self.model = info.models[0]
        elif self.model is not None:
            ignored = ignored_model(self.dialect.name, self.model, info.models)
            self.unserved = ignored and (
                f"the client's model={self.model!r} is not served at {self.base_url}, {ignored}: "
                "make the client with model= one of them (or pass model= to each call)"
            )
        return info

    def _abort_url(self) -> str | None:
        """Where the server stops a request by the id it carried (`Server.abort`: SGLang's
        ``/abort_request``), for the calls of this dialect: ``None`` before the dialect is
        known, for a dialect whose server has no such route, and where the probes saw a server
        of another kind (the SGLang Model Gateway in front of SGLang workers speaks their
        dialect, and drops ``rid`` on chat). A server they did not recognise (a dialect forced
        behind a proxy that passes only the POST routes) is taken at the dialect's word."""
        dialect = self.dialect
        server = None if dialect is None else SERVERS.get(dialect.name)
        if server is None or server.abort is None:
            return None
        info = self.server_info
        if info is not None and info.kind not in (server.kind, "unknown"):
            return None
        return self.root_url + server.abort

    def _fallback(self, answers: Sequence[Any], *, mocked: bool) -> str:
        """What the errors of invalid output add when ``"auto"`` fell back to ``generic``
        because no probe was answered, or a respx mock answered in the server's place: the
        request sent, and the answer expected, are then not those of the server in production
        (a suite that mocks only the POST, as the openai SDK's suites do). ``""`` for a server
        that answered and is none lmclient knows: ``generic`` is then its dialect."""
        paths = ", ".join([httpx.URL(self.base_url + "/models").path, *PROBE_PATHS])
        fix = (
            "make the client with the server's dialect (dialect='vllm', 'sglang', 'llamacpp', "
            "...; docs/servers.md)"
        )
        if mocked:
            return (
                "note: this answer came through a respx mock, and the client ran as dialect "
                "'generic' because dialect='auto' recognised no server behind the mock (its "
                f"probes, GET {paths}, got no answer it knows), so the request was not the one "
                f"your server gets in production: {fix}, or mock the probe routes too "
                "(docs/testing.md)"
            )
        if any(isinstance(answer, (dict, list)) for answer in answers):
            return ""
        return (
            "note: the client runs as dialect 'generic' because dialect='auto' recognised no "
            f"server: none of its probes (GET {paths}) was answered; if the server is one "
            f"lmclient knows (behind a gateway that passes only the POST routes, say), {fix}"
        )

    def refuse_unserved(self, params: Mapping[str, Any]) -> None:
        """Refuse a call that would go out with the client's model where the server would
        answer it with another model (`unserved`); a call naming its own model is checked as
        such (`check_model`)."""
        if self.unserved and not self.names_model(params):
            raise UnsupportedConstraintError(self.unserved)

    def unreachable(self, exc: errors.APIConnectionError, doing: str) -> errors.APIConnectionError:
        """``exc``, a set-up request's failure to reach the server, said as such: the request
        is lmclient's (``doing``), not the user's call, and the server is what to check."""
        timed_out = isinstance(exc, errors.APITimeoutError)
        failed = "did not answer in time" if timed_out else "could not be reached"
        exc.args = (
            f"the server at {self.base_url} {failed} while lmclient {doing} (check that it "
            f"runs at that address): {exc}",
            *exc.args[1:],
        )
        return exc

    def unlisted(self, exc: errors.LMClientError) -> errors.LMClientError:
        """The error for a client made with ``model=None`` whose call names no model, when the
        model list cannot be had: a server or gateway without ``GET /v1/models`` (a 404, 405 or
        501, or an answer that is not a model list) is a configuration to fix, said as such (a
        base URL without ``/v1`` the likely one); a server not reached is said as the set-up's
        (`unreachable`); any other failure (a bad key) is itself."""
        if isinstance(exc, errors.ProtocolError) or (
            isinstance(exc, errors.APIStatusError) and exc.status_code in (404, 405, 501)
        ):
            path = httpx.URL(self.base_url + "/models").path
            if not path.endswith("/v1/models"):  # the usual cause: a base URL without /v1
                return ConfigurationError(
                    f"model=None, and GET {path} lists no models ({exc}): the base URL likely "
                    "lacks the /v1 under which OpenAI-compatible servers answer (base_url="
                    f"'{self.base_url}/v1'); or pass model=... to the client, the call or defaults="
                )
            return ConfigurationError(
                f"model=None, and GET {path} lists no models "
                f"({exc}): pass model=... to the client, the call or defaults="
            )
        if isinstance(exc, errors.APIConnectionError):
            return self.unreachable(exc, "asked for its model list (model=None)")
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
        return self._checked(where, prompt, output_type, endpoint, params).spec

    def unlisted_options(
        self,
        where: str,
        prompt: Any,
        output_type: Any,
        endpoint: Endpoint,
        params: Mapping[str, Any],
    ) -> Unlisted | None:
        """The requests that ask the server for the token ids of ``output_type``'s options, for
        a ``probabilities=True`` call (the client ready) on a server that reads
        ``logprob_token_ids`` (`_confidence.lists`): on the type's first such call, after every
        check of the call's input; ``None`` once they are known, or where the call asks its own
        ``top_logprobs``, or the server or the options are not for them."""
        dialect = self.dialect
        if dialect is None or not _confidence.lists(dialect, self.server_info):
            return None
        merged = {**self.defaults, **params} if self.defaults else params
        if merged.get("top_logprobs") is not None:
            return None
        planned = self._plans.get(output_type, endpoint, dialect, self.server_info)
        if planned.listed is not None:
            return None
        self.validate(where, prompt, output_type, endpoint, params)
        texts = _confidence.pieces(planned.spec, planned.plan)
        if texts is None:
            planned.listed = ()  # too many: the top_logprobs way
            return None
        model = merged.get("model")
        settings = {name: merged.get(name) for name in ("timeout", "deadline", "max_retries")}
        calls = [
            tokenize_call(self, where, text, model=model, add_special_tokens=False, params=settings)
            for text in texts
        ]
        return Unlisted(planned=planned, calls=calls)

    def _check_media(self, where: str, dialect: Dialect, messages: list[Any]) -> None:
        """The media of a call's messages refused where the server, or its model, cannot take
        them (`check_media`): before any request."""
        info = self.server_info
        inputs = None if info is None else info.inputs
        models = ", ".join(info.models) if info is not None and info.models else "served"
        check_media(where, dialect.name, content_media(messages), inputs, models)

    def _checked(
        self,
        where: str,
        prompt: Any,
        output_type: Any,
        endpoint: Endpoint,
        params: Mapping[str, Any],
    ) -> Checked:
        """`validate`, with what its checks computed (`Checked`). The checks of parameters that
        need more than their type (headers, reasoning, tools, serving, model, extra_body) run
        only for the calls that give one (the ``"special"`` `Shape`): the usual call's
        parameters (``temperature``, ``max_tokens``...) pass with `check_params` alone."""
        defaults = self.defaults
        if params:
            check_params(where, params, allow_n=where == "create")
        shape: Shape
        if not defaults and (not params or as_given(params)):
            shape = "given"  # (`AS_GIVEN` holds none of `_CHECKED`)
        elif _CHECKED.isdisjoint(params) and _CHECKED.isdisjoint(defaults):
            shape = "spelt"
        else:
            shape = "special"
        special = shape == "special"
        if special and not (
            HEADER_PARAMS.isdisjoint(params) and HEADER_PARAMS.isdisjoint(defaults)
        ):
            self._check_headers(where, {**defaults, **params})
        messages = None  # a prompt given as messages (a str is one user message)
        parts = False  # whether they hold parts to translate (text and media)
        if endpoint == "chat":
            if not isinstance(prompt, str):
                messages, parts = prompt_messages(prompt)
        elif endpoint != "completions":
            raise ValueError(f"endpoint must be 'chat' or 'completions', not {endpoint!r}")
        elif not isinstance(prompt, str):
            raise TypeError("complete() takes a str prompt")
        dialect = self.dialect or self.forced  # only forced: not probed yet, or a batch file's
        if dialect is None:
            spec = compile_output(output_type)
            if special and params.get("probabilities"):
                _confidence.check_type(where, spec)
            return Checked(spec=spec, planned=None, messages=messages, parts=parts, shape=shape)
        # the type's spec and the dialect's plan, or their refusals, now
        planned = self._plans.get(output_type, endpoint, dialect, self.server_info)
        spec = planned.spec
        if parts:
            assert messages is not None
            self._check_media(where, dialect, messages)
        controls = None  # the reasoning controls, refused now where the server has no field
        turn = None
        reasoned = None  # the plan with its grammar after a reasoning block
        if special:
            if not (REASONING_PARAMS.isdisjoint(params) and REASONING_PARAMS.isdisjoint(defaults)):
                controls = reasoning_params(params, defaults)
                if controls:
                    reasoning_fields(dialect.name, endpoint, controls, where)
            if not (_TOOL_PARAMS.isdisjoint(params) and _TOOL_PARAMS.isdisjoint(defaults)):
                able = None if self.server_info is None else self.server_info.tools
                check_tools(where, dialect.name, endpoint, params, defaults, able)
                tools = params.get("tools") or defaults.get("tools")
                if tools and spec.kind != "text":
                    turn = self._turn(where, planned, tools, {**defaults, **params})
                elif params.get("parallel_tool_calls") is not None:
                    raise UnsupportedConstraintError(
                        f"{where}(): parallel_tool_calls= is a typed turn's (tools beside an "
                        "output type), whose grammar lmclient writes; a call without an output "
                        "type leaves the calls to the server's tool parser"
                    )
            field = dialect.reasoning_prefix
            if field is not None and controls and self._thinks(controls, spec):
                reasoned = planned.thinking()
                if turn is not None:
                    turn = turn.thinking(field)
            if not (_TABLED.isdisjoint(params) and _TABLED.isdisjoint(defaults)):
                self._serving(dialect, {**defaults, **params}, where)  # its refusals, now
            model = params.get("model") or defaults.get("model")
            if model is not None and self.server_info is not None:
                check_model(dialect.name, model, self.server_info.models, where)
            if params.get("probabilities"):
                _confidence.check(where, spec, planned.plan, dialect)
            if "runaway" in params:
                runaway_setting(params["runaway"], where)  # its refusal, before any request
            extra = params.get("extra_body") or defaults.get("extra_body")
            if extra:
                dialect.check_extra(extra, endpoint)
                merge_extra({}, extra, planned.plan.fields)  # its refusals, before any request
        budget = planned.plan.budget if turn is None else turn.budget
        if budget is not None:
            max_tokens = params.get("max_tokens") or defaults.get("max_tokens")
            thinking = (thinking_room(controls) or 0) if controls else 0
            if max_tokens is not None and max_tokens < budget.fewest + thinking:
                after = f", after up to {thinking} of thinking and its tags" if thinking else ""
                raise ValueError(
                    f"{where}(): max_tokens={max_tokens} cannot hold any {spec.name} value: "
                    f"its shortest encoding needs at least {budget.fewest} tokens{after}"
                )
        return Checked(
            spec=spec,
            planned=planned,
            messages=messages,
            parts=parts,
            shape=shape,
            turn=turn,
            reasoned=reasoned,
        )

    def _thinks(self, controls: Mapping[str, Any], spec: OutputSpec[Any]) -> bool:
        """Whether a constrained call's grammar goes after a reasoning block: it asks for
        thinking, and the server's chat template is not known to lack lmclient's markers
        (`ServerInfo.thinks`: one that does not write them would never close the block)."""
        info = self.server_info
        asked = controls.get("thinking") is not False and spec.kind != "text"
        return asked and (info is None or info.thinks is not False)

    @staticmethod
    def _turn(where: str, planned: Planned, tools: Any, merged: Mapping[str, Any]) -> Turn:
        """The typed turn of a call with tools and an output type (`lmclient._turn`)."""
        if merged.get("n", 1) != 1 or merged.get("probabilities"):
            raise UnsupportedConstraintError(
                f"{where}(): a turn with tools and an output type has one answer: no n= or "
                "probabilities="
            )
        parallel = merged.get("parallel_tool_calls") is True
        return planned.turn(where, tools, merged.get("tool_choice"), parallel)

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
        prompt: Prompt,
        output_type: Any,
        endpoint: Endpoint,
        params: dict[str, Any],
        *,
        reading: Reading = "call",
        many: Many | None = None,
    ) -> Call:
        """Validate a call's input and build its request, once the client is `ready`; raises
        before anything is sent. The body is one dict, encoded by msgspec in one pass, with the
        plan's fields already encoded (`Planned`). An item of ``many`` starts only within its
        batch's budgets (else `TokenBudgetExceeded`). ``reading``: how its answer will be read
        (`Reading`)."""
        if many is not None:
            many.check()
        checked = self._checked(where, prompt, output_type, endpoint, params)
        planned = checked.planned
        assert planned is not None, "set-up (model, dialect) must come first"
        messages = checked.messages
        if checked.parts:  # text and media parts as the server reads them
            assert messages is not None
            messages = wire_messages(messages, planned.dialect.name)
        merged = {**self.defaults, **params} if self.defaults else params
        shape = checked.shape
        headers = self.post_headers
        if shape == "special" and not HEADER_PARAMS.isdisjoint(merged):  # (in _CHECKED)
            headers = self._call_headers(merged, planned.dialect)
        runaway = self.runaway  # the call's runaway thresholds (``None``: "off")
        if shape == "special" and "runaway" in merged:
            runaway = runaway_setting(merged["runaway"], where)
        turn = checked.turn
        guard = None  # who watches its answer
        if runaway is not None:
            guard = planned.guard if turn is None else planned.guard_of(turn.budget)
        if guard == "client" and (reading == "file" or not _one_text(merged, shape, turn)):
            guard = None  # read whole, as before (several choices, logprobs, tools; a file)
        body = self._body(
            prompt,
            messages=messages,
            endpoint=endpoint,
            params=merged,
            planned=planned,
            shape=shape,
            stream=reading == "stream" or guard == "client",
            runaway=runaway,
            turn=turn,
            reasoned=checked.reasoned,
        )
        abort = None  # a call to a server that aborts by id (SGLang) carries one (`_aborted`)
        if self.abort_url is not None and reading != "file":
            abort = self._aborted(body, merged, headers)
        call = Call.new(
            self.settings,
            PreparedRequest("POST", self._urls[endpoint], headers, _encode(body)),
            spec=checked.spec,
            plan=planned.plan if checked.reasoned is None else checked.reasoned.plan,
            endpoint=endpoint,
            caveat=self.caveat,
            params=_NO_PARAMS if shape == "given" else merged,  # (all in the body: none read)
            many=many,
            runaway=runaway,
            guard=guard,
            turn=turn,
        )
        if abort is not None:  # set apart: the usual call's constructor keeps its keywords
            call.abort = abort
        return call

    def _aborted(
        self, body: dict[str, Any], params: Mapping[str, Any], headers: list[tuple[str, str]]
    ) -> Abort | None:
        """The abort of a call whose ``body`` goes to SGLang, by the body's ``rid``: the call's
        ``request_id`` (or extra_body's ``rid``), else one made here and put in the body,
        unique per call (`new_rid`). It goes to the same server with the call's headers.
        ``None`` for a call with ``n`` > 1, whose samples SGLang gives rids of their own, which
        no abort of the call's reaches (nor one for a ``rid`` that is not a str)."""
        if (params.get("n") or 1) != 1:
            return None
        rid = body.get("rid")
        made = rid is None
        if made:
            rid = body["rid"] = new_rid()
        elif not isinstance(rid, str):
            return None
        assert self.abort_url is not None
        return Abort.of(self.abort_url, headers, rid, made=made)

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
            return self.post_headers
        key = tuple(extra.items())
        found = self._header_lists.get(key)
        if found is None:
            found = [(k, v) for k, v in self.post_headers if k not in extra]
            found += extra.items()
            if len(self._header_lists) >= 64:  # bounded: a request id is new on every call
                self._header_lists.clear()
            self._header_lists[key] = found
        return found

    def _body(
        self,
        prompt: Any,
        *,
        messages: list[Any] | None,
        endpoint: Endpoint,
        params: Mapping[str, Any],
        planned: Planned,
        shape: Shape,
        stream: bool,
        runaway: Runaway | None,
        turn: Turn | None = None,
        reasoned: Thinking | None = None,
    ) -> dict[str, Any]:
        """The request body; ``messages`` are the prompt's when it was given as messages,
        ``shape`` how ``params`` go in it (`_checked` has told); a typed ``turn``'s grammar and
        tools in place of the plan's constraint; the plan's grammar after a reasoning block
        for a call with thinking (``reasoned``)."""
        given = shape == "given"  # (then they hold no model nor extra_body: neither looked up)
        body: dict[str, Any] = {"model": self.model if given else params.get("model") or self.model}
        if endpoint == "completions":
            body["prompt"] = prompt
        else:
            body["messages"] = messages or [{"role": "user", "content": prompt}]
        thinking: int | None = 0  # the tokens thinking may take first (`thinking_room`)
        if params:  # as they are (the usual call), or each as its endpoint spells it
            if given:
                body.update(params)
            else:
                _add_params(body, params, endpoint)
        if shape == "special":  # the rare parameters, told apart once (`_checked`)
            if not REASONING_PARAMS.isdisjoint(params):
                controls = reasoning_params(params, {})
                body.update(reasoning_fields(planned.dialect.name, endpoint, controls))
                thinking = thinking_room(controls)
            if params.get("tools") and turn is None:
                body.update(tool_fields(planned.dialect.name, params))
            if not _TABLED.isdisjoint(params):
                body.update(self._serving(planned.dialect, params, "call")[0])
            if params.get("probabilities"):
                top = params.get("top_logprobs")
                ids = planned.listed if top is None else None
                body.update(_confidence.fields(endpoint, top, planned.dialect, ids))
        budget = planned.plan.budget if turn is None else turn.budget
        if budget is not None and params.get("max_tokens") is None and thinking is not None:
            # a bounded answer can then neither run on nor be cut, after its thinking budget
            body["max_tokens"] = budget.most + thinking
        if stream:
            body["stream"] = True
            if planned.dialect.stream_usage:
                body["stream_options"] = {"include_usage": True}
        body.update(planned.fields)
        if reasoned is not None:
            body.update(reasoned.fields)
        if turn is not None:
            for name in planned.plan.fields:
                del body[name]
            body.update(turn.fields)
            # the server's loop guard as the turn needs it, not as its answer's type does
            body.pop("repetition_detection", None)
            if runaway is not None and planned.guard_of(turn.budget) == "server":
                body.update(server_fields(runaway))
        if shape == "special" and "runaway" in params and planned.guard == "server":
            body.pop("repetition_detection", None)  # the client's, in the plan's fields
            if runaway is not None:  # the call's ``runaway`` thresholds
                body.update(server_fields(runaway))
        extra = None if given else params.get("extra_body")
        if extra:
            merge_extra(body, extra, planned.plan.fields)
        return body


def _add_params(body: dict[str, Any], params: Mapping[str, Any], endpoint: Endpoint) -> None:
    """The per-call parameters that go in the body, as each endpoint spells them: as given, but
    for the few spelt otherwise (`RESPELT`)."""
    for name, value in params.items():  # into the body in place: it is built in one pass
        if value is not None and name not in CALL_PARAMS:
            body[name] = value  # noqa: PERF403
    if RESPELT.isdisjoint(params):
        return
    stop = body.get("stop")
    if isinstance(stop, tuple):
        body["stop"] = list(stop)
    if endpoint == "completions":
        body.pop("top_logprobs", None)
        if body.get("logprobs"):  # legacy completions: logprobs is the number of alternatives
            body["logprobs"] = params.get("top_logprobs") or 0
        else:
            body.pop("logprobs", None)


_encode = msgspec.json.Encoder().encode


_TOOL_PARAMS = frozenset({"tools", "tool_choice", "parallel_tool_calls"})
_NO_PARAMS: Mapping[str, Any] = MappingProxyType({})
_TABLED = frozenset(TABLED)
# The parameters checked beyond their types (`ClientCore._checked`): a call giving none of them
# (the usual one) skips those checks at once.
_CHECKED = (
    HEADER_PARAMS
    | REASONING_PARAMS
    | _TOOL_PARAMS
    | _TABLED
    | {"model", "extra_body", "probabilities", "runaway"}
)
# A call with any of these is read whole, not watched as a stream (`_one_text`).
_UNWATCHED = frozenset({"logprobs", "probabilities", "tools"})
_TURN_UNWATCHED = _UNWATCHED - {"tools"}


def _one_text(params: Mapping[str, Any], shape: Shape, turn: Turn | None = None) -> bool:
    """Whether a call's answer is one text lmclient can watch as a stream: one choice, and
    (beyond the usual call's parameters) no logprobs, probabilities or tools, whose answers are
    read whole, as before; but a typed turn's tools, whose calls are its text."""
    if params.get("n", 1) != 1:
        return False
    return shape == "given" or (_TURN_UNWATCHED if turn else _UNWATCHED).isdisjoint(params)


def model_ids(body: bytes) -> list[str]:
    return [m.id for m in _MODEL_LIST(body).data]


def listing(body: bytes) -> Listing:
    cards = _MODEL_LIST(body).data
    found = Listing(card.id for card in cards)
    owners = {card.owned_by for card in cards}
    owner = owners.pop() if len(owners) == 1 else None
    found.owner = owner if isinstance(owner, str) else None
    return found


def json_object(body: bytes) -> dict[str, Any]:
    answer: dict[str, Any] = _JSON_OBJECT(body)
    return answer


_MODEL_LIST = body_decoder(ModelList, "response")
_JSON_OBJECT = body_decoder(dict[str, Any], "response")
