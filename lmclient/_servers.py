"""What each kind of server answers to the probes, and which request fields it reads.

One table, read by the client (`_dialects`: server detection, the extra_body fields a dialect
refuses because the server would ignore them, a dialect forced on a release that ignores its
fields) and by `lmclient.testing`'s FakeLLM (the probe it answers, the constraint fields it
obeys): the fake impersonates exactly the facts the client relies on. Each fact is read from the
server's own source (request models and handlers), release by release.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

__all__ = ["CONSTRAINT_FIELDS", "SERVERS", "Server", "Successor", "UnknownModel", "release"]

# What a server does with a request for a model it does not serve: "refused", a 404 (vLLM's
# "The model `x` does not exist."); or "served" by the one model it has, whatever the name
# (llama.cpp: its answer's `model` is its own name, tools/server/server-context.cpp).
UnknownModel = Literal["refused", "served"]

# Every top-level request field that some server's constrained decoding reads. A server obeys
# some of them and accepts the others with 200, as if they had never been sent.
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
CONSTRAINT_FIELDS = _GUIDED | {
    "structured_outputs",
    "response_format",
    "json_schema",
    "regex",
    "ebnf",
    "grammar",
}


@dataclasses.dataclass(frozen=True)
class Successor:
    """From ``release`` on, servers of this kind accept this dialect's ``fields`` and ignore
    them; ``dialect`` is the one they read instead."""

    release: tuple[int, ...]
    dialect: str
    fields: str  # how a message names them


@dataclasses.dataclass(frozen=True)
class Server:
    """One kind of server as one dialect speaks to it (vLLM is two: before and after
    ``structured_outputs``). ``probes`` are the paths whose JSON-object answer identifies it
    when it has one of the ``marks`` keys (no marks: any answer); ``answer`` is such an answer,
    the one FakeLLM gives."""

    kind: str
    probes: tuple[str, ...]
    marks: tuple[str, ...]
    version_key: str
    answer: Mapping[str, Any]
    # Per endpoint ("chat", "completions"): the fields of CONSTRAINT_FIELDS it reads; the other
    # fields it accepts and ignores (a dotted name is a key of a nested object), each with what
    # to do instead.
    obeys: Mapping[str, frozenset[str]]
    ignores: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    reads: frozenset[str] | None = None  # every field it reads, where that is known
    # The ``owned_by`` of its ``GET /v1/models`` cards, where the server names itself there:
    # detection's first question, which then asks only this server's probes.
    owner: str | None = None
    # Other probe paths that must answer a JSON object too (the answer FakeLLM gives each),
    # and the dialect detection then picks, where it is not the row's key.
    also: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    dialect: str = ""
    unknown_model: UnknownModel = "refused"
    since: tuple[int, ...] = ()  # the releases this row describes: [since, successor.release)
    # Request fields (not constraints) that only later releases of the row read: field -> the
    # first release that reads it; earlier ones accept it and ignore it.
    added: Mapping[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    successor: Successor | None = None
    # The path of its route that stops a request by the id the request carried (``rid`` on
    # SGLang: ``POST /abort_request {"rid": ...}``, answered 200 with no body whether the id
    # is known or not): where the client asks it to stop an answer it stopped reading.
    abort: str | None = None

    def ignored(self, field: str, endpoint: str) -> str | None:
        """Why ``field`` would be ignored on ``endpoint`` (``""``: no more to say), or ``None``
        when this server reads it."""
        if field in CONSTRAINT_FIELDS and field not in self.obeys[endpoint]:
            return ""
        why = self.ignores.get(endpoint, {}).get(field)
        if why is not None:
            return why
        if self.reads is not None and "." not in field and field not in self.reads:
            return ""
        return None

    def covers(self, version: str | None) -> bool:
        """Whether a server of this kind at ``version`` is the one this row describes."""
        if not self.since and self.successor is None:
            return True
        if version is None:
            return False
        number = release(version)
        return number >= self.since and (self.successor is None or number < self.successor.release)


def _both(*fields: str) -> dict[str, frozenset[str]]:
    return {"chat": frozenset(fields), "completions": frozenset(fields)}


_DISABLE_ANY_WHITESPACE = (
    "vLLM's xgrammar and guidance backends read it from the server's configuration only: start "
    "the server with --structured-outputs-config "
    '\'{"backend":"xgrammar","disable_any_whitespace":true}\''
    ", or let lmclient send compact JSON (whitespace='compact', the default)"
)
_WHITESPACE_PATTERN = (
    "no vLLM backend reads it (its outlines backend builds the JSON regex without it); "
    "lmclient's compact JSON (whitespace='compact', the default) has no free whitespace"
)
_VLLM_IGNORES = {
    "structured_outputs.disable_any_whitespace": _DISABLE_ANY_WHITESPACE,
    "structured_outputs.whitespace_pattern": _WHITESPACE_PATTERN,
}
_OLLAMA_READS = frozenset(
    {
        "model", "messages", "prompt", "stream", "stream_options", "max_tokens", "seed", "stop",
        "temperature", "frequency_penalty", "presence_penalty", "top_p", "response_format",
        "tools", "reasoning", "reasoning_effort", "logprobs", "top_logprobs", "suffix",
    }
)  # fmt: skip

# The SGLang Model Gateway (sglang-router 0.3.2), run here in front of recording workers
# (tests/fixtures/sglang-router/): it answers /get_server_info, as SGLang before 0.4.5 did, with
# router counts instead of a version, and /get_model_info as its backend allows: 501 with
# --backend openai, the worker's answer with --backend sglang. It parses every chat request into
# its own OpenAI-plus-SGLang model and sends that on: ``grammar``, a top-level ``json_schema``,
# ``structured_outputs``, ``guided_*``, ``user``, ``rid``, ``priority``, ``cache_salt`` and the
# thinking budgets are dropped, ``response_format``, ``regex`` and ``ebnf`` kept. With --backend
# openai its workers' kind is not known (``regex`` and ``ebnf`` reach a llama.cpp worker, which
# ignores them) and /v1/completions answers 501; with --backend sglang, completions go through
# with every field, and its workers are SGLang servers.
_GATEWAY_DROPS = (
    "sglang-router drops it (its chat request model has no such field); send it to a "
    "worker directly"
)
_GATEWAY_DROPPED = (
    "user",
    "rid",
    "priority",
    "cache_salt",
    "thinking_token_budget",
    "reasoning_budget_tokens",
)
GATEWAY_ANSWER: Mapping[str, Any] = {"router_manager": True, "routers_count": 1, "workers_count": 2}

# Keyed by the dialect that speaks to each, in the order detection tries them: the gateway
# before SGLang (both answer /get_server_info), /version last, since other servers (SGLang)
# answer it too.
SERVERS: dict[str, Server] = {
    "sglang-gateway-sglang": Server(
        "sglang-gateway",
        probes=("/get_server_info",),
        marks=("router_manager",),
        version_key="version",
        answer=GATEWAY_ANSWER,
        # SGLang's fields, forwarded to SGLang workers (as the sglang row below, on both).
        obeys={
            "chat": frozenset({"response_format", "regex", "ebnf"}),
            "completions": frozenset({"response_format", "json_schema", "regex", "ebnf"}),
        },
        also={"/get_model_info": {"model_path": "fake-model", "is_generation": True}},
        dialect="sglang",
    ),
    "sglang-gateway": Server(
        "sglang-gateway",
        probes=("/get_server_info",),
        marks=("router_manager",),
        version_key="version",
        answer=GATEWAY_ANSWER,
        # response_format only: the other constraint fields it forwards bind SGLang workers only
        obeys={"chat": frozenset({"response_format"}), "completions": frozenset()},
        ignores={"chat": dict.fromkeys(_GATEWAY_DROPPED, _GATEWAY_DROPS)},
    ),
    "sglang": Server(
        "sglang",
        probes=("/server_info", "/get_server_info"),  # the second before SGLang 0.4.5
        marks=(),
        version_key="version",
        answer={"version": "0.5.23"},
        owner="sglang",  # sglang/srt/entrypoints/openai/protocol.py, ModelCard
        abort="/abort_request",  # sglang/srt/entrypoints/http_server.py, AbortReq
        # Its chat ignores a top-level json_schema, which its completions read (a JSON string).
        obeys={
            "chat": frozenset({"response_format", "regex", "ebnf"}),
            "completions": frozenset({"response_format", "json_schema", "regex", "ebnf"}),
        },
    ),
    "llamacpp": Server(
        "llamacpp",
        probes=("/props",),
        marks=("default_generation_settings", "build_info"),
        version_key="build_info",
        answer={"default_generation_settings": {}, "build_info": "b11434-515e855"},
        owner="llamacpp",  # tools/server/server-context.cpp
        unknown_model="served",
        obeys={  # response_format is ignored on /v1/completions
            "chat": frozenset({"json_schema", "grammar", "response_format"}),
            "completions": frozenset({"json_schema", "grammar"}),
        },
    ),
    "tgi": Server(
        "tgi",
        probes=("/info",),
        marks=("model_id",),
        version_key="version",
        answer={"model_id": "fake-model", "version": "3.3.6"},
        unknown_model="served",  # its one model, whatever the request names
        obeys={"chat": frozenset({"response_format"}), "completions": frozenset()},
    ),
    "ollama": Server(
        "ollama",
        probes=("/api/version",),
        marks=("version",),
        version_key="version",
        answer={"version": "0.33.0"},
        obeys={"chat": frozenset({"response_format"}), "completions": frozenset()},
        reads=_OLLAMA_READS,  # top_k, min_p, …: dropped by Ollama's /v1 decoder
    ),
    "vllm": Server(
        "vllm",
        probes=("/version",),
        marks=("version",),
        version_key="version",
        answer={"version": "0.33.0"},
        owner="vllm",  # vllm/entrypoints/openai/engine/protocol.py, ModelCard
        obeys=_both("structured_outputs", "response_format"),  # guided_*: ignored from 0.12
        ignores={
            "chat": {**_VLLM_IGNORES, "user": "vLLM's source marks it as ignored"},
            "completions": _VLLM_IGNORES,
        },
        since=(0, 10, 2),  # the first release with structured_outputs
        # vllm/v1/core/sched/utils.py, check_stop: finish_reason "repetition" (PR #35451);
        # sampling_params.py: logprob_token_ids, the logprobs of listed token ids at each
        # position (read in 0.32; lmclient has not read the releases before it)
        added={"repetition_detection": (0, 17), "logprob_token_ids": (0, 32)},
    ),
    "vllm-guided": Server(
        "vllm",
        probes=("/version",),
        marks=("version",),
        version_key="version",
        answer={"version": "0.10.1.1"},
        owner="vllm",
        obeys=_both(*_GUIDED, "response_format"),
        successor=Successor((0, 12), "vllm", "guided_* fields"),
    ),
}


def release(version: str) -> tuple[int, ...]:
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
