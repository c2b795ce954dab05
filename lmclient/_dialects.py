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
import functools
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import msgspec

from ._output.patterns import gbnf_alternation, regex_alternation, search_anchored
from ._output.thinking import END
from ._output.types import OutputSpec
from ._servers import SERVERS, Server
from .errors import UnsupportedConstraintError

__all__ = [
    "DIALECTS",
    "MAX_TOKEN_BYTES",
    "OWNED_PROBES",
    "PROBE_PATHS",
    "Budget",
    "Dialect",
    "Endpoint",
    "Plan",
    "ServerInfo",
    "Whitespace",
    "detect",
    "get_dialect",
]

Endpoint = Literal["chat", "completions"]
# The client's choice for JSON output: lmclient's compact grammar where a server takes one, or
# the server's own converter of the schema (which lets the model write whitespace anywhere).
Whitespace = Literal["compact", "server"]
Fields = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Plan:
    """The request fields for one (output type, dialect, endpoint) and the decoder of the reply.

    ``wrapped`` is true when the value travels as ``{"value": …}`` (object-root dialects)."""

    fields: Fields
    decode: Callable[[str], Any]
    wrapped: bool = False
    emulated: bool = False  # the server is told something equivalent, not the constraint itself
    compact: bool = False  # lmclient's compact grammar, not the server's JSON converter
    budget: Budget | None = None  # the tokens an exactly constrained, bounded answer may need
    dialect: str = ""  # the dialect that made it, for the errors that name its fields
    # A call with thinking: its grammar lets the model reason first (`Dialect.reasoning_prefix`),
    # so the content may begin with the reasoning, which the answer follows (`split_reasoning`).
    reasoned: bool = False


class Budget(NamedTuple):
    """What a bounded answer may cost, when the server enforces its exact text (a compact
    grammar, a choice): the encoding's longest length in UTF-8 bytes plus one, as every token
    of these models' tokenizers decodes to at least one byte and the end-of-sequence token
    counts against ``max_tokens`` too; and the fewest tokens that could hold the shortest
    encoding, at `MAX_TOKEN_BYTES` per token."""

    most: int
    fewest: int

    @classmethod
    def of(cls, shortest: int, longest: int) -> Budget:
        return cls(longest + 1, max(1, -(-shortest // MAX_TOKEN_BYTES)))


# A generous bound on the bytes of one token in compact JSON (vocabularies merge words and
# punctuation, rarely beyond 16 bytes): the refusal of a too-small ``max_tokens`` errs towards
# sending, and a budget that is in fact too small still ends as a `TruncatedError`.
MAX_TOKEN_BYTES = 16


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
    # Where a `Tagged` output's structural tag goes (xgrammar's ``format``); ``None``: the
    # server has none, and the same language goes as a GBNF grammar where it takes one.
    structural: Callable[[dict[str, Any]], Fields] | None = None
    # Where lmclient's compact GBNF (`_gbnf`) goes instead of the schema; ``None``: the server
    # has no field honoured for it, and its own converter's whitespace stands.
    compact: Callable[[str], Fields] | None = None
    # The field of a GBNF grammar that the server applies from the first generated token, the
    # model's reasoning included (llama.cpp's ``grammar``): a call with thinking sends its
    # grammar after lmclient's reasoning block (`thinking_grammar`). ``None``: the server starts
    # the constraint after the reasoning itself (vLLM, SGLang), or takes no grammar.
    reasoning_prefix: str | None = None
    # What the server's own JSON grammar allows between tokens (whitespace="server", or a
    # dialect without `compact`), from its source: shown in the capability matrix.
    json_whitespace: str = "not known; no request field controls it"
    native_choice: bool = False  # `choice` is a server field, not an emulation
    object_root: bool = False
    stream_usage: bool = True  # reads stream_options.include_usage
    constrained_endpoints: frozenset[str] = frozenset({"chat", "completions"})
    # A Regex as a JSON string with ``pattern`` (else refused: the servers behind may not
    # enforce a pattern), and what a refusal adds (what to do instead).
    regex_as_schema: bool = True
    advice: str = ""
    # The alternatives per token that ``probabilities=True`` asks for: as many as the server
    # gives by default (vLLM's and SGLang's --max-logprobs, OpenAI's 20), for options that are
    # unlikely answers to be seen; ``None``: the server gives no logprobs (refused).
    top_logprobs: int | None = 20

    @functools.cached_property
    def server(self) -> Server | None:
        """The server this dialect speaks to, from the table of servers; ``None`` for the
        dialects of many servers (generic, lmstudio, openai), whose ignored fields are unknown."""
        return SERVERS.get(self.name)

    @property
    def probe_first(self) -> bool:
        """Whether some releases of this dialect's server ignore its fields, so that a client
        forced to it asks the server what it is before the first call (`check_server`)."""
        return self.server is not None and self.server.successor is not None

    def check_extra(self, extra: Fields, endpoint: Endpoint) -> None:
        """Refuse extra_body fields the server would silently ignore (200, as if never sent),
        where a user would count on them: top-level ones, and keys of nested objects."""
        server = self.server
        if server is None:
            return
        for name, value in extra.items():
            nested = [f"{name}.{key}" for key in value] if isinstance(value, dict) else []
            for field in (name, *nested):
                why = server.ignored(field, endpoint)
                if why is not None:
                    raise ValueError(
                        f"extra_body field {field!r} is silently ignored by {self.name} servers "
                        f"on the {endpoint} endpoint; lmclient does not send fields that cannot "
                        "work" + (f" ({why})" if why else "")
                    )

    def check_server(self, info: ServerInfo | None, plan: Plan, endpoint: Endpoint) -> None:
        """Refuse a plan whose fields the probed server ignores: this dialect forced on a
        release of its server that reads other fields (``vllm-guided`` on vLLM >= 0.12)."""
        if info is None or info.dialect == self.name or not plan.fields:
            return  # not probed, or detected as this very dialect: nothing to refuse
        server = self.server
        if server is None or info.kind != server.kind or server.covers(info.version):
            return  # another kind of server (the user overrode detection), or a release we fit
        ignored = [f for f in plan.fields if SERVERS[info.dialect].ignored(f, endpoint) is not None]
        if ignored:
            raise UnsupportedConstraintError(
                f"dialect {self.name!r} sends {', '.join(ignored)}, which {info.kind} "
                f"{info.version} accepts and ignores (the output would be unconstrained); use "
                f"dialect={info.dialect!r} or 'auto'"
            )

    def caveat(self, info: ServerInfo | None) -> str:
        """What a failed call's error adds when the probes could not tell whether the server is
        a release that ignores this dialect's fields (``""`` when they could, or none does)."""
        server = self.server
        known = info is not None and info.kind != "unknown"
        if server is None or server.successor is None or known:
            return ""
        later = server.successor
        version = ".".join(map(str, later.release))
        return (
            f"likely cause: {server.kind} {version} and later accept the {later.fields} of "
            f"dialect {self.name!r} and ignore them, leaving the output unconstrained, and this "
            f"server did not say its version; if it is one, use dialect={later.dialect!r}"
        )

    def plan(self, spec: OutputSpec[Any], endpoint: Endpoint, *, compact: bool = True) -> Plan:
        """The plan for ``spec`` on ``endpoint``; raises before any request is built.
        ``compact`` asks for lmclient's compact grammar where this dialect can send one. Made
        anew on each call: a client keeps its plans (`lmclient._plans.Plans`)."""
        return dataclasses.replace(self._plan(spec, endpoint, compact), dialect=self.name)

    def _plan(self, spec: OutputSpec[Any], endpoint: Endpoint, compact: bool) -> Plan:
        if spec.kind == "text":
            return Plan({}, spec.decode)
        if endpoint not in self.constrained_endpoints:
            raise UnsupportedConstraintError(
                f"dialect {self.name!r} cannot constrain the {endpoint} endpoint "
                f"(the server ignores constraint fields there); use endpoint='chat'" + self.advice
            )
        grammar = spec.compact if compact and self.compact is not None else None
        if grammar is not None:
            assert self.compact is not None and spec.decode_json is not None
            longest = grammar.longest
            budget = None if longest is None else Budget.of(grammar.shortest, longest)
            return Plan(self.compact(grammar.text), spec.decode_json, compact=True, budget=budget)
        native = self._native(spec)
        if native is not None:
            budget = None
            if spec.kind == "choice":
                sizes = [len(option.encode()) for option in spec.options]
                budget = Budget.of(min(sizes), max(sizes))
            return Plan(
                native,
                spec.decode,
                emulated=spec.kind == "choice" and not self.native_choice,
                budget=budget,
            )
        if spec.kind == "grammar":
            able = [d.name for d in DIALECTS.values() if spec.syntax in d.grammar_syntaxes]
            what = f"a {spec.syntax} grammar"
            if spec.structural is not None:
                what = "a Tagged output (it needs a structural tag or a GBNF grammar)"
            raise UnsupportedConstraintError(
                f"dialect {self.name!r} cannot take {what}; "
                f"dialect= values that can: {', '.join(able)}" + self.advice
            )
        assert spec.schema is not None and spec.decode_json is not None
        emulated = spec.kind in ("regex", "choice") and spec.output_type not in (int, float, bool)
        if spec.kind == "regex" and emulated and not self.regex_as_schema:
            raise UnsupportedConstraintError(
                f"dialect {self.name!r} cannot take a Regex: its only constraint field is "
                f"response_format json_schema, and the servers behind it may not enforce a "
                f"string pattern" + self.advice
            )
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
        if spec.kind == "grammar" and spec.structural is not None and self.structural is not None:
            return self.structural(spec.structural)
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


def _vllm_structural(format: dict[str, Any]) -> Fields:
    # a JSON *string* on vLLM (its field is typed ``str``; an object is a 400), read by its
    # xgrammar backend, the default
    tag = msgspec.json.encode({"type": "structural_tag", "format": format}).decode()
    return {"structured_outputs": {"structural_tag": tag}}


def _sglang_structural(format: dict[str, Any]) -> Fields:
    return {"response_format": {"type": "structural_tag", "format": format}}


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
_VLLM_WHITESPACE = "any, unless the server is started with disable_any_whitespace"
_LLAMACPP_WHITESPACE = "up to 2 newlines and 20 spaces or tabs between tokens"

DIALECTS: dict[str, Dialect] = _dialects(
    Dialect(
        "vllm",
        schema=lambda s, _n, _e: {"structured_outputs": {"json": s}},
        any_json={"structured_outputs": {"json_object": True}},
        regex=_so("regex"),
        choice=_so("choice"),
        grammar=_so("grammar"),
        grammar_syntaxes=frozenset({"gbnf", "lark"}),
        compact=_so("grammar"),
        structural=_vllm_structural,
        json_whitespace=_VLLM_WHITESPACE,
        native_choice=True,
    ),
    Dialect(
        "vllm-guided",
        schema=lambda s, _n, _e: {"guided_json": s},
        any_json=_JSON_OBJECT,
        regex=_top("guided_regex"),
        choice=_top("guided_choice"),
        grammar=_top("guided_grammar"),
        grammar_syntaxes=frozenset({"gbnf", "lark"}),
        compact=_top("guided_grammar"),  # GBNF under xgrammar, the default from vLLM 0.6.5
        json_whitespace=_VLLM_WHITESPACE,
        native_choice=True,
    ),
    Dialect(
        "sglang",
        schema=_sglang_schema,
        any_json=_JSON_OBJECT,
        regex=_top("regex"),
        choice=lambda options: {"regex": regex_alternation(options)},
        grammar=_top("ebnf"),
        grammar_syntaxes=_GBNF,
        compact=_top("ebnf"),  # both endpoints; xgrammar (the default) and llguidance read GBNF
        structural=_sglang_structural,  # both endpoints: xgrammar's StructuralTag, validated
        json_whitespace="any; server flags only (--constrained-json-disable-any-whitespace, …)",
    ),
    Dialect(
        "llamacpp",
        # Top level on both endpoints: llama.cpp ignores response_format on /v1/completions.
        schema=lambda s, _n, _e: {"json_schema": llamacpp_schema(s)},
        choice=lambda options: {"grammar": gbnf_alternation(options)},
        grammar=_top("grammar"),
        grammar_syntaxes=_GBNF,
        compact=_top("grammar"),  # instead of json_schema: the server refuses both together
        reasoning_prefix="grammar",  # a user grammar, not prefilled: `_output/thinking.py`
        json_whitespace=_LLAMACPP_WHITESPACE,
        top_logprobs=100,  # no cap; the grammar's options may be far down the model's own list
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
        json_whitespace="at most one space between tokens",
        top_logprobs=5,  # TGI's --max-top-n-tokens default
    ),
    Dialect("generic", schema=_response_format, any_json=_JSON_OBJECT),
    Dialect(
        "ollama",
        schema=_response_format,
        any_json=_JSON_OBJECT,
        constrained_endpoints=frozenset({"chat"}),
        json_whitespace=f"schema: {_LLAMACPP_WHITESPACE}; any JSON (json_object): any",
    ),
    # LM Studio answers json_object with 400, and documents no logprobs
    Dialect("lmstudio", schema=_response_format, top_logprobs=None),
    Dialect(
        "sglang-gateway",  # sglang-router --backend openai: see `_servers`
        schema=_strict_response_format,
        any_json=_JSON_OBJECT,
        constrained_endpoints=frozenset({"chat"}),  # its /v1/completions answers 501
        regex_as_schema=False,
        advice=(
            "; the SGLang Model Gateway (sglang-router) with --backend openai forwards only "
            "OpenAI's response_format json_schema to workers of unknown kind: use a JSON output "
            "type (a Struct, Literal, int...), or run the gateway with --backend sglang in "
            "front of SGLang workers (lmclient then sends SGLang's regex and ebnf), or call a "
            "worker directly with its dialect="
        ),
    ),
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

# Probed once per client, relative to the server root (base_url without "/v1").
PROBE_PATHS = tuple(
    dict.fromkeys(path for server in SERVERS.values() for path in (*server.probes, *server.also))
)
# The probes worth asking when the model list's cards name their server (`Server.owner`).
OWNED_PROBES: dict[str, tuple[str, ...]] = {}
for _server in SERVERS.values():
    if _server.owner is not None:
        OWNED_PROBES[_server.owner] = tuple(
            dict.fromkeys([*OWNED_PROBES.get(_server.owner, ()), *_server.probes, *_server.also])
        )


class ServerInfo(msgspec.Struct, frozen=True):
    """What `dialect="auto"` learnt about the server."""

    kind: str  # vllm, sglang, sglang-gateway, llamacpp, tgi, ollama, openai, or unknown
    dialect: str
    version: str | None = None
    models: list[str] = []
    # Whether the server can render tools and parse the model's calls (llama.cpp's /props
    # ``chat_template_caps``); ``None`` where the server does not say.
    tools: bool | None = None
    # The media kinds ("image", "audio", "video") its model takes (llama.cpp's /props
    # ``modalities``: what its --mmproj projector reads); ``None`` where the server does not say.
    inputs: frozenset[str] | None = None
    # Whether its chat template writes the reasoning markers lmclient's grammar knows
    # (`lmclient._output.thinking`: ``</think>`` in llama.cpp's /props ``chat_template``):
    # where it does not, a call with thinking keeps its grammar as it is (the template does not
    # think, or marks the reasoning otherwise); ``None`` where the server does not say.
    thinks: bool | None = None


def detect(host: str, probes: dict[str, Any], models: list[str]) -> ServerInfo:
    """Pick a dialect from the probe answers: ``probes`` maps each path of `PROBE_PATHS` that
    answered 200 with a JSON object to that object. The servers are tried in the table's order;
    a row for some releases only needs the version to say it is one of them."""
    if host == "api.openai.com" or host.endswith(".openai.azure.com"):
        return ServerInfo("openai", "openai", None, models)
    for dialect, server in SERVERS.items():
        for path in server.probes:
            answer = probes.get(path)
            if answer is None or (server.marks and not any(m in answer for m in server.marks)):
                continue
            if any(path not in probes for path in server.also):
                continue
            version = answer.get(server.version_key)
            version = version if isinstance(version, str) else None
            if server.covers(version):
                caps = answer.get("chat_template_caps")
                tools = caps.get("supports_tool_calls") if isinstance(caps, dict) else None
                tools = tools if isinstance(tools, bool) else None
                kind, name = server.kind, server.dialect or dialect
                return ServerInfo(
                    kind, name, version, models, tools, _inputs(answer), thinks=_thinks(answer)
                )
    return ServerInfo("unknown", "generic", None, models)


def _thinks(answer: dict[str, Any]) -> bool | None:
    """Whether a llama.cpp /props answer's chat templates (``chat_template``, and
    ``chat_template_tool_use`` where the server has one) write the end-of-reasoning marker."""
    keys = ("chat_template", "chat_template_tool_use")
    templates = [t for t in (answer.get(k) for k in keys) if isinstance(t, str)]
    return any(END in t for t in templates) if templates else None


_MODALITIES = {"vision": "image", "audio": "audio", "video": "video"}


def _inputs(answer: dict[str, Any]) -> frozenset[str] | None:
    """The media kinds a llama.cpp /props answer says its model takes (``modalities``)."""
    said = answer.get("modalities")
    if not isinstance(said, dict):
        return None
    return frozenset(kind for key, kind in _MODALITIES.items() if said.get(key) is True)
