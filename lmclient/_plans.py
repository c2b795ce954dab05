"""The client's plan cache: the one place where what a call's output type needs on one endpoint
of one dialect is kept, so that no call repeats it.

A plan (`Dialect.plan`) is a type's constraint fields as its dialect spells them, with the
decoder of its answers; its fields (a type's schema or grammar: most of a request body, and the
same on every call) are encoded here once, and go into each body as they are (`msgspec.Raw`).
A call finds its plan with one look-up, by its output type itself when that is a class (the
usual output type, equal only to itself), else by the type's spec (`compile_output`, which
tells apart types that compare equal but mean different constraints, as ``Literal`` options in
another order do).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from types import GenericAlias
from typing import Any, NamedTuple

import msgspec

from ._dialects import Budget, Dialect, Endpoint, Plan, ServerInfo
from ._output.types import OutputSpec, compile_output
from ._runaway import Guard, Runaway, server_fields
from ._servers import release
from ._tools import Tool
from ._turn import Turn, turn_key

__all__ = ["Planned", "Plans", "Thinking"]

_encode = msgspec.json.Encoder().encode
_UNCHECKED = object()
_BOUND = 256  # plans kept: output types made anew on every call must not grow the cache forever


class Thinking(NamedTuple):
    """A plan as a call with thinking sends it where the server applies a grammar from the
    first token (`Dialect.reasoning_prefix`): its grammar after lmclient's reasoning block,
    encoded once (``fields``, over the plan's), and the plan whose answers may begin with the
    reasoning (`Plan.reasoned`)."""

    plan: Plan
    fields: dict[str, msgspec.Raw]


class Planned:
    """A dialect's plan for one output type and endpoint, with its fields encoded once."""

    __slots__ = (
        "_by_server",
        "_runaway",
        "_thinking",
        "_turns",
        "checked",
        "dialect",
        "endpoint",
        "fields",
        "guard",
        "listed",
        "plan",
        "spec",
    )

    def __init__(
        self,
        spec: OutputSpec[Any],
        dialect: Dialect,
        endpoint: Endpoint,
        *,
        compact: bool,
        runaway: Runaway | None,
    ) -> None:
        self.spec = spec
        self.dialect = dialect
        self.endpoint = endpoint
        self.plan = plan = dialect.plan(spec, endpoint, compact=compact)
        self.fields = {name: msgspec.Raw(_encode(value)) for name, value in plan.fields.items()}
        self._runaway = runaway  # the client's thresholds (``None``: runaway="off")
        # Who watches this plan's answers for runaways (`_runaway`), with the server known
        # (`check_server`); ``None``: a bounded type, whose token budget caps its answer, or a
        # server whose streams carry no usage (TGI), whose answers are read whole.
        self.guard: Guard | None = None
        # the server info this plan passed `Dialect.check_server` for (a call checks it again
        # only when the probes have learnt another); a sentinel until the first check
        self.checked: object = _UNCHECKED
        self._turns: dict[tuple[Any, ...], Turn] = {}  # by `turn_key`
        self._by_server = False  # whether the server stops a loop itself (`check_server`)
        # probabilities=True on a server that reads logprob_token_ids: the options' token ids
        # (`_confidence.listed_ids`), ``()`` where too many to list; ``None``: not asked yet
        self.listed: tuple[int, ...] | None = None
        self._thinking: Thinking | None = None  # made by the first call with thinking

    def thinking(self) -> Thinking:
        """This plan for a call that asks for thinking, on a dialect with a
        `Dialect.reasoning_prefix`: made once."""
        found = self._thinking
        if found is None:
            from ._output.thinking import thinking_grammar

            field = self.dialect.reasoning_prefix
            grammar = None if field is None else self.plan.fields.get(field)
            fields: dict[str, str] = {}
            if field is not None and isinstance(grammar, str):  # (else the server's schema)
                fields[field] = thinking_grammar(grammar)
            plan = dataclasses.replace(
                self.plan, fields={**self.plan.fields, **fields}, reasoned=True
            )
            encoded = {name: msgspec.Raw(_encode(value)) for name, value in fields.items()}
            found = self._thinking = Thinking(plan, encoded)
        return found

    def turn(self, where: str, tools: Sequence[Tool[Any]], choice: Any, parallel: bool) -> Turn:
        """This plan's output type as the answer of a typed turn with ``tools``
        (`lmclient._turn`), made once per tools, ``tool_choice`` and whether calls may be
        several (``parallel``); raises what the dialect cannot hold."""
        key = turn_key(tools, choice, parallel)
        found = self._turns.get(key)
        if found is None:
            found = Turn(where, self.spec, self.dialect, tools, choice, parallel)
            if len(self._turns) >= _BOUND:
                self._turns.clear()
            self._turns[key] = found
        return found

    def guard_of(self, budget: Budget | None) -> Guard | None:
        """Who watches an answer of this plan's type, or of a typed turn of it (whose budget is
        the turn's), on the server `check_server` was given: none where a budget caps it."""
        if budget is not None:
            return None
        if self._by_server:
            return "server"
        # (a stream without usage would leave the call unmetered: read whole)
        return "client" if self.dialect.stream_usage else None

    def check_server(self, info: ServerInfo | None) -> None:
        """`Dialect.check_server` for this plan, and the server info it passed for (`Plans.get`
        checks again only for another); who watches its answers on that server (`guard`), and
        the server's fields for it in `fields` (vLLM's ``repetition_detection``, at the
        client's thresholds: a call's own ``runaway=`` changes them in its body)."""
        self.dialect.check_server(info, self.plan, self.endpoint)
        self.checked = info
        server = self.dialect.server  # the release that stops a loop itself, if one does
        since = None if server is None else server.added.get("repetition_detection")
        version = None if info is None else info.version
        self._by_server = since is not None and (version is None or release(version) >= since)
        self.guard = self.guard_of(self.plan.budget)
        self.fields.pop("repetition_detection", None)
        if self.guard == "server" and self._runaway is not None:
            for name, value in server_fields(self._runaway).items():
                self.fields[name] = msgspec.Raw(_encode(value))


class Plans:
    """A client's plans, by output type, endpoint and dialect; made on first use, which raises
    the dialect's refusals before any request."""

    __slots__ = ("_found", "compact", "runaway")

    def __init__(self, *, compact: bool, runaway: Runaway | None) -> None:
        self.compact = compact  # lmclient's compact grammar, where the dialect can send one
        self.runaway = runaway  # the client's runaway thresholds (``None``: "off")
        self._found: dict[tuple[Any, Endpoint, Dialect], Planned] = {}

    def get(
        self, output_type: Any, endpoint: Endpoint, dialect: Dialect, info: ServerInfo | None
    ) -> Planned:
        """The plan of ``output_type`` on ``endpoint`` of ``dialect``, checked against the
        server the probes found (``info``): refused where it would ignore the fields."""
        # (a parametrised generic such as ``list[int]`` is a `type` instance on Python 3.10)
        key: tuple[Any, Endpoint, Dialect]
        spec = None
        if isinstance(output_type, type) and not isinstance(output_type, GenericAlias):
            key = (output_type, endpoint, dialect)
        else:
            spec = compile_output(output_type)
            key = (spec, endpoint, dialect)
        planned = self._found.get(key)
        if planned is None:
            spec = spec or compile_output(output_type)
            planned = Planned(spec, dialect, endpoint, compact=self.compact, runaway=self.runaway)
            if len(self._found) >= _BOUND:
                self._found.clear()
            self._found[key] = planned
        if planned.checked is not info:
            planned.check_server(info)
        return planned
