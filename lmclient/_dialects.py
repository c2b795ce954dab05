"""Dialects: how each server family is told about a constraint, and what it cannot be told.

A dialect turns an `OutputSpec` into request fields plus the decoder for what comes back. Where a
server has no native field for a constraint it is emulated (a choice as a regex alternation, a
GBNF alternation or a JSON-schema ``enum``; a regex as a JSON string with ``pattern``), and where
it cannot be expressed at all the dialect raises `UnsupportedConstraintError` before anything is
sent: no field is ever sent that the server would silently ignore. Field placements are read
from each server's own source (request models and handlers), version by version.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal

import msgspec

from ._types import OutputSpec, gbnf_alternation, regex_alternation, search_anchored
from .errors import UnsupportedConstraintError

__all__ = [
    "DIALECTS",
    "PROBE_PATHS",
    "Dialect",
    "Endpoint",
    "Plan",
    "ServerInfo",
    "detect",
    "get_dialect",
]

Endpoint = Literal["chat", "completions"]
Fields = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Plan:
    """The request fields for one (output type, dialect, endpoint) and the decoder of the reply.

    ``wrapped`` is true when the value travels as ``{"value": …}`` (object-root dialects)."""

    fields: Fields
    decode: Callable[[str], Any]
    wrapped: bool = False
    emulated: bool = False  # the server is told something equivalent, not the constraint itself


@dataclasses.dataclass(frozen=True, eq=False)
class Dialect:
    """One server family's constraint fields; ``None`` is "no native field" (emulate or refuse)."""

    name: str
    schema: Callable[[dict[str, Any], str, Endpoint], Fields]
    any_json: Fields | None = None  # the server's "any JSON" mode; else the schema {}
    regex: Callable[[str], Fields] | None = None
    choice: Callable[[tuple[str, ...]], Fields] | None = None
    grammar: Callable[[str], Fields] | None = None
    grammar_syntaxes: frozenset[str] = frozenset()
    native_choice: bool = False  # `choice` is a server field, not an emulation
    object_root: bool = False
    stream_usage: bool = True  # reads stream_options.include_usage
    constrained_endpoints: frozenset[str] = frozenset({"chat", "completions"})
    # Fields the server accepts and silently ignores (200, as if never sent): refused in
    # extra_body, where a user would count on them. `reads`, where known, is the whole set of
    # fields the server reads at all (Ollama's Go decoder drops every other key).
    ignores: frozenset[str] = frozenset()
    ignores_on_completions: frozenset[str] = frozenset()
    reads: frozenset[str] | None = None

    def check_extra(self, extra: Fields, endpoint: Endpoint) -> None:
        """Refuse extra_body fields this server would silently ignore."""
        for name in extra:
            ignored = name in self.ignores or (
                endpoint == "completions" and name in self.ignores_on_completions
            )
            if ignored or (self.reads is not None and name not in self.reads):
                raise ValueError(
                    f"extra_body field {name!r} is silently ignored by {self.name} servers on "
                    f"the {endpoint} endpoint; lmclient does not send fields that cannot work"
                )

    def plan(self, spec: OutputSpec[Any], endpoint: Endpoint) -> Plan:
        """The cached plan for ``spec`` on ``endpoint``; raises before any request is built."""
        key = (self.name, endpoint)
        plan = spec.plans.get(key)
        if plan is None:
            plan = spec.plans[key] = self._plan(spec, endpoint)
        return plan

    def _plan(self, spec: OutputSpec[Any], endpoint: Endpoint) -> Plan:
        if spec.kind == "text":
            return Plan({}, spec.decode)
        if endpoint not in self.constrained_endpoints:
            raise UnsupportedConstraintError(
                f"dialect {self.name!r} cannot constrain the {endpoint} endpoint "
                f"(the server ignores constraint fields there); use endpoint='chat'"
            )
        native = self._native(spec)
        if native is not None:
            return Plan(
                native, spec.decode, emulated=spec.kind == "choice" and not self.native_choice
            )
        if spec.kind == "grammar":
            able = [d.name for d in DIALECTS.values() if spec.syntax in d.grammar_syntaxes]
            raise UnsupportedConstraintError(
                f"dialect {self.name!r} cannot take a {spec.syntax} grammar; "
                f"dialect= values that can: {', '.join(able)}"
            )
        assert spec.schema is not None and spec.decode_json is not None
        emulated = spec.kind in ("regex", "choice") and spec.output_type not in (int, float, bool)
        if self.object_root and not spec.root_is_object:
            schema, decode = spec.wrapped
            fields = self.schema(schema, spec.name, endpoint)
            return Plan(fields, decode, wrapped=True, emulated=emulated)
        return Plan(
            self.schema(spec.schema, spec.name, endpoint), spec.decode_json, emulated=emulated
        )

    def _native(self, spec: OutputSpec[Any]) -> Fields | None:
        if spec.kind == "any" and self.any_json is not None:
            return self.any_json
        if spec.kind == "regex" and self.regex is not None:
            assert spec.pattern is not None
            return self.regex(spec.pattern)
        if (
            spec.kind == "regex"
            and spec.grammar
            and self.grammar
            and "gbnf" in self.grammar_syntaxes
        ):
            return self.grammar(spec.grammar)  # a scalar's exact GBNF where there is no regex
        if spec.kind == "choice" and self.choice is not None:
            return self.choice(spec.options)
        if spec.kind == "grammar" and self.grammar and spec.syntax in self.grammar_syntaxes:
            assert spec.grammar is not None
            return self.grammar(spec.grammar)
        return None


def _response_format(schema: dict[str, Any], name: str, _endpoint: Endpoint) -> Fields:
    # `name` is required by vLLM, SGLang and OpenAI and ignored elsewhere: always sent.
    return {
        "response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
    }


def _strict_response_format(schema: dict[str, Any], name: str, _endpoint: Endpoint) -> Fields:
    return {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": strict_schema(schema), "strict": True},
        }
    }


def _sglang_schema(schema: dict[str, Any], name: str, endpoint: Endpoint) -> Fields:
    if endpoint == "chat":  # SGLang chat ignores top-level json_schema
        return _response_format(schema, name, endpoint)
    return {"json_schema": msgspec.json.encode(schema).decode()}  # a JSON *string* on SGLang


_JSON_OBJECT: Fields = {"response_format": {"type": "json_object"}}


def _so(key: str) -> Callable[[Any], Fields]:
    return lambda value: {"structured_outputs": {key: list(value) if key == "choice" else value}}


def _top(key: str) -> Callable[[Any], Fields]:
    return lambda value: {key: list(value) if isinstance(value, tuple) else value}


def strict_schema(schema: Any) -> Any:
    """Rewrite a schema to OpenAI's strict rules: every object closed and every property
    required (optional ones then simply appear), ``default`` dropped (not allowed there).
    Objects with open keys (``dict[str, T]``) cannot be expressed and are refused."""
    if isinstance(schema, list):
        return [strict_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict_schema(v) for k, v in schema.items() if k != "default"}
    if out.get("type") == "object" or "properties" in out:
        if "properties" not in out or out.get("additionalProperties") not in (None, False):
            raise UnsupportedConstraintError(
                "OpenAI strict mode cannot express an object with arbitrary keys "
                "(dict[str, T] or additionalProperties); use a Struct with named fields"
            )
        out["required"] = list(out["properties"])
        out["additionalProperties"] = False
    return out


_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})


def llamacpp_schema(schema: Any) -> Any:
    """Anchor every string ``pattern`` at both ends (`search_anchored`): llama.cpp's converter
    skips, without a word, a pattern that is not ``^…$``, and the string goes unconstrained."""
    if isinstance(schema, list):
        return [llamacpp_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "pattern" and isinstance(value, str):
            max_length = schema.get("maxLength")
            out[key] = search_anchored(value, max_length if isinstance(max_length, int) else None)
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: llamacpp_schema(sub) for name, sub in value.items()}
        else:
            out[key] = value if key in _DATA_KEYWORDS else llamacpp_schema(value)
    return out


def _dialects(*dialects: Dialect) -> dict[str, Dialect]:
    return {d.name: d for d in dialects}


_GBNF = frozenset({"gbnf"})
_GUIDED = frozenset(
    {
        "guided_json",
        "guided_regex",
        "guided_choice",
        "guided_grammar",
        "guided_decoding_backend",
        "guided_whitespace_pattern",
    }
)
_OTHER_SERVERS = _GUIDED | {"structured_outputs"}
_OLLAMA_READS = frozenset(
    {
        "model", "messages", "prompt", "stream", "stream_options", "max_tokens", "seed", "stop",
        "temperature", "frequency_penalty", "presence_penalty", "top_p", "response_format",
        "tools", "reasoning", "reasoning_effort", "logprobs", "top_logprobs", "suffix",
    }
)  # fmt: skip

DIALECTS: dict[str, Dialect] = _dialects(
    Dialect(
        "vllm",
        schema=lambda s, _n, _e: {"structured_outputs": {"json": s}},
        any_json={"structured_outputs": {"json_object": True}},
        regex=_so("regex"),
        choice=_so("choice"),
        grammar=_so("grammar"),
        grammar_syntaxes=frozenset({"gbnf", "lark"}),
        native_choice=True,
        ignores=_GUIDED,  # removed in vLLM 0.12: accepted, ignored, output unconstrained
    ),
    Dialect(
        "vllm-guided",
        schema=lambda s, _n, _e: {"guided_json": s},
        any_json=_JSON_OBJECT,
        regex=_top("guided_regex"),
        choice=_top("guided_choice"),
        grammar=_top("guided_grammar"),
        grammar_syntaxes=frozenset({"gbnf", "lark"}),
        native_choice=True,
        ignores=frozenset({"structured_outputs"}),  # unknown before vLLM 0.10.2
    ),
    Dialect(
        "sglang",
        schema=_sglang_schema,
        any_json=_JSON_OBJECT,
        regex=_top("regex"),
        choice=lambda options: {"regex": regex_alternation(options)},
        grammar=_top("ebnf"),
        grammar_syntaxes=_GBNF,
        ignores=_OTHER_SERVERS,
    ),
    Dialect(
        "llamacpp",
        # Top level on both endpoints: llama.cpp ignores response_format on /v1/completions.
        schema=lambda s, _n, _e: {"json_schema": llamacpp_schema(s)},
        choice=lambda options: {"grammar": gbnf_alternation(options)},
        grammar=_top("grammar"),
        grammar_syntaxes=_GBNF,
        ignores=_OTHER_SERVERS,
        ignores_on_completions=frozenset({"response_format"}),
    ),
    Dialect(
        "tgi",
        schema=lambda s, _n, _e: {"response_format": {"type": "json", "value": s}},
        regex=lambda p: {"response_format": {"type": "regex", "value": p}},
        choice=lambda options: {
            "response_format": {"type": "regex", "value": regex_alternation(options)}
        },
        object_root=True,
        stream_usage=False,
        constrained_endpoints=frozenset({"chat"}),
        ignores=_OTHER_SERVERS | {"json_schema", "grammar", "regex"},
        ignores_on_completions=frozenset({"response_format"}),
    ),
    Dialect("generic", schema=_response_format, any_json=_JSON_OBJECT),
    Dialect(
        "ollama",
        schema=_response_format,
        any_json=_JSON_OBJECT,
        constrained_endpoints=frozenset({"chat"}),
        reads=_OLLAMA_READS,  # top_k, min_p, …: dropped by Ollama's /v1 decoder
        ignores_on_completions=frozenset({"response_format"}),
    ),
    Dialect("lmstudio", schema=_response_format),  # LM Studio answers json_object with 400
    Dialect(
        "openai",
        schema=_strict_response_format,
        any_json=_JSON_OBJECT,
        object_root=True,
    ),
)


def get_dialect(name: str) -> Dialect:
    try:
        return DIALECTS[name]
    except KeyError:
        raise ValueError(
            f"unknown dialect {name!r}; expected one of: {', '.join(DIALECTS)}"
        ) from None


# -- detection (dialect="auto") -------------------------------------------------------------

# Probed once per client, relative to the server root (base_url without "/v1"). Precedence is
# in `detect`: /version alone is the weakest signal, since other servers may answer it too.
PROBE_PATHS = ("/version", "/props", "/server_info", "/get_server_info", "/info", "/api/version")
_VLLM_STRUCTURED_OUTPUTS = (0, 10, 2)  # first release with `structured_outputs`


class ServerInfo(msgspec.Struct, frozen=True):
    """What `dialect="auto"` learnt about the server."""

    kind: str  # vllm, sglang, llamacpp, tgi, ollama, openai, or unknown
    dialect: str
    version: str | None = None
    models: list[str] = []


def detect(host: str, probes: dict[str, Any], models: list[str]) -> ServerInfo:
    """Pick a dialect from the probe answers: ``probes`` maps each path of `PROBE_PATHS` that
    answered 200 with a JSON object to that object."""
    if host == "api.openai.com" or host.endswith(".openai.azure.com"):
        return ServerInfo("openai", "openai", None, models)
    sglang = probes.get("/server_info") or probes.get("/get_server_info")
    if sglang is not None:
        return ServerInfo("sglang", "sglang", _version(sglang.get("version")), models)
    props = probes.get("/props")
    if props is not None and ("default_generation_settings" in props or "build_info" in props):
        return ServerInfo("llamacpp", "llamacpp", _version(props.get("build_info")), models)
    info = probes.get("/info")
    if info is not None and "model_id" in info:
        return ServerInfo("tgi", "tgi", _version(info.get("version")), models)
    ollama = probes.get("/api/version")
    if ollama is not None and "version" in ollama:
        return ServerInfo("ollama", "ollama", _version(ollama.get("version")), models)
    vllm = probes.get("/version")
    if vllm is not None and isinstance(vllm.get("version"), str):
        version = vllm["version"]
        dialect = "vllm" if _release(version) >= _VLLM_STRUCTURED_OUTPUTS else "vllm-guided"
        return ServerInfo("vllm", dialect, version, models)
    return ServerInfo("unknown", "generic", None, models)


def _version(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _release(version: str) -> tuple[int, ...]:
    """``"0.10.1.1"`` → (0, 10, 1, 1); ``"0.11.0rc1"`` → (0, 11, 0): enough to compare releases."""
    parts = []
    for piece in version.split("."):
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        parts.append(int(digits))
        if len(digits) < len(piece):
            break
    return tuple(parts)
