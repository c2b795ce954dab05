"""Serving fields: what a service sets per call beside the prompt — the ``model`` (a LoRA
adapter is a model name on vLLM), extra ``headers``, a ``request_id``, a scheduling
``priority``, a prefix-cache ``cache_salt``, an agent's or conversation's ``session_id``, and
the W3C trace context (``traceparent``, ``tracestate``) — with the checks of their values, and
where each server reads the four that differ per server, in one table (`SERVING`).

Every placement is read from the server's own request handling:

* vLLM (0.32 read, and the ``protocol.py`` of the ``guided_*`` releases): the request id is
  the ``X-Request-Id`` header (``_base_request_id``, from 0.6.5, PR #10968), which wins over
  the body's ``request_id``; the answer's id is then ``chatcmpl-<id>`` (``cmpl-<id>`` on
  completions), and ``--enable-request-id-headers`` echoes the header. ``priority`` is a body
  field from 0.6.3 (PR #8850); the scheduler orders by it only under ``--scheduling-policy
  priority`` (before the V1 engine, another policy answered a nonzero priority with 400; 0.32
  accepts it and schedules first come, first served). ``cache_salt`` is a body field from
  0.9.0 (PR #17045; V1 engine only, V0 answers 400); 0.32 also refuses a salt longer than 128
  characters or holding ``@``, ``/``, ``\\`` or NUL with 400.
  ``session_id`` ("stable session identity shared by related requests": one conversation, one
  agent run) is a body field read in 0.32 (PR #48048, July 2026; it also reads an
  ``X-Session-ID`` header), handed to the engine's request for KV-cache events and the
  connectors and schedulers that use it; it routes nothing itself. Earlier releases are
  refused: lmclient has not read that they have it.
* SGLang (0.5.23, ``entrypoints/openai/protocol.py``, both endpoints; no session field, so
  ``session_id`` is refused): ``rid``, ``priority``
  (honoured with ``--enable-priority-scheduling``, ignored or refused with 503 otherwise, by
  server flags) and ``cache_salt`` (isolating only from PR #23300, so releases before the one
  read are refused).
* llama.cpp, TGI, Ollama, OpenAI and the unknown servers: none of the four, so each is
  refused there. A header such as ``X-Request-Id`` can still be sent with ``headers=``, for a
  proxy in front that reads it.

The trace context is not a server field but an HTTP propagation header, read by whatever is on
the path: vLLM, SGLang and TGI read ``traceparent``/``tracestate`` for their own tracing, as do
gateways and proxies; so it is sent to every server. `trace_headers` is the one place a
traceparent becomes headers.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from ._config import header_problem
from ._servers import SERVERS, release
from .errors import UnsupportedConstraintError

__all__ = [
    "HEADER_PARAMS",
    "MODEL_LISTED",
    "SERVING",
    "SERVING_PARAMS",
    "TABLED",
    "Place",
    "check_model",
    "ignored_model",
    "serving_fields",
    "serving_problem",
    "trace_headers",
]

SERVING_PARAMS = frozenset(
    {
        "model",
        "headers",
        "request_id",
        "priority",
        "cache_salt",
        "session_id",
        "traceparent",
        "tracestate",
    }
)
TABLED = ("request_id", "priority", "cache_salt", "session_id")  # per dialect, in `SERVING`
# The parameters that may add headers to a call's request: any other call keeps the client's
# one header list (and its encoded head, which the transports cache per list).
HEADER_PARAMS = frozenset({"headers", "request_id", "traceparent", "tracestate"})
# Per-call headers that cannot be a call's own: the body is lmclient's JSON.
_CALL_SETS = frozenset({"content-type"})
_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")
_INT64 = (-(2**63), 2**63)


@dataclasses.dataclass(frozen=True)
class Place:
    """Where one dialect's server reads a serving field: a body field or a header (``key``),
    and the first release of that server that reads it (``()``: every release the dialect
    speaks to)."""

    key: str
    header: bool = False
    since: tuple[int, ...] = ()


SERVING: dict[str, dict[str, Place]] = {
    "vllm": {
        "request_id": Place("x-request-id", header=True),
        "priority": Place("priority"),
        "cache_salt": Place("cache_salt"),
        "session_id": Place("session_id", since=(0, 32)),
    },
    "vllm-guided": {
        "request_id": Place("x-request-id", header=True, since=(0, 6, 5)),
        "priority": Place("priority", since=(0, 6, 3)),
        "cache_salt": Place("cache_salt", since=(0, 9)),
    },
    "sglang": {
        "request_id": Place("rid"),
        "priority": Place("priority"),
        "cache_salt": Place("cache_salt", since=(0, 5, 23)),
    },
    "llamacpp": {},
    "tgi": {},
    "generic": {},
    "ollama": {},
    "lmstudio": {},
    "sglang-gateway": {},  # the gateway drops rid, priority and cache_salt
    "openai": {},
}


# Servers that answer a request for any model name with a model they serve (the table's
# `unknown_model`: llama.cpp, TGI). A name they do not list would be ignored, so a model is
# refused there when the probes saw the list.
MODEL_LISTED = frozenset(key for key, server in SERVERS.items() if server.unknown_model == "served")


def check_model(dialect: str, model: str, served: list[str], where: str) -> None:
    """Refuse a per-call ``model`` that ``dialect``'s server would ignore (`ignored_model`)."""
    ignored = ignored_model(dialect, model, served)
    if ignored:
        raise UnsupportedConstraintError(
            f"{where}(): model {model!r} is not served here, {ignored}: pass model= one of them"
        )


def ignored_model(dialect: str, model: str, served: list[str]) -> str:
    """Why ``dialect``'s server would answer ``model`` with another model (``""``: it would
    not): on the servers that answer any name (`MODEL_LISTED`), a name their model list
    (``served``) lacks. The same rule for a call's model and a client's (`ClientCore.unserved`)."""
    if dialect in MODEL_LISTED and served and model not in served:
        return (
            f"and {dialect} servers answer any model name with a model they serve "
            f"({', '.join(served)}), ignoring it"
        )
    return ""


def serving_problem(name: str, value: Any) -> str | None:
    """What is wrong with one serving parameter's value (its type is already checked)."""
    if name in ("model", "request_id", "cache_salt", "session_id", "tracestate") and not value:
        return "must not be empty"
    if name in ("request_id", "tracestate") and header_problem("x", value):
        return "must be Latin-1 without control characters (it may travel as a header)"
    if name == "priority" and not _INT64[0] <= value < _INT64[1]:
        return "must fit a signed 64-bit integer"
    if name == "traceparent":
        found = _TRACEPARENT.fullmatch(value)
        if found is None:
            return "must be a W3C traceparent: 00-<32 hex>-<16 hex>-<2 hex>, lower case"
        if not found[1].strip("0") or not found[2].strip("0"):
            return "must not have an all-zero trace id or parent id"
    if name == "headers":
        for key, text in value.items():
            problem = header_problem(key, text)
            if problem:
                return f"are not valid: {problem}"
            if key.lower() in _CALL_SETS:
                return f"are not valid: header {key!r} is set by lmclient (the body is JSON)"
    return None


def serving_fields(
    dialect: str,
    params: Mapping[str, Any],
    where: str,
    kind: str | None = None,
    version: str | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """The body fields and headers of the tabled parameters a call sets, on ``dialect``'s
    server (a probed one of ``kind`` at ``version``, when known); raises
    `UnsupportedConstraintError` for one that server would ignore."""
    table = SERVING.get(dialect, {})
    fields: dict[str, Any] = {}
    headers: dict[str, str] = {}
    for name in TABLED:
        value = params.get(name)
        if value is None:
            continue
        place = table.get(name)
        if place is None:
            able = ", ".join(d for d, t in SERVING.items() if name in t)
            raise UnsupportedConstraintError(
                f"{where}(): dialect {dialect!r} has no request field for {name} (the server "
                f"would ignore it); dialects that do: {able}"
            )
        server = SERVERS.get(dialect)
        if (
            place.since
            and version is not None
            and server is not None
            and kind == server.kind
            and release(version) < place.since
        ):
            first = ".".join(map(str, place.since))
            raise UnsupportedConstraintError(
                f"{where}(): {kind} {version} ignores {name}; {kind} reads it from {first} on"
            )
        if place.header:
            headers[place.key] = value
        else:
            fields[place.key] = value
    return fields, headers


def trace_headers(traceparent: str | None, tracestate: str | None) -> dict[str, str]:
    """The W3C trace context as headers: the one place a traceparent is turned into headers
    (a tracing integration fills ``traceparent`` here from its active span when a call gives
    none)."""
    if traceparent is None:
        return {}
    if tracestate is None:
        return {"traceparent": traceparent}
    return {"traceparent": traceparent, "tracestate": tracestate}
