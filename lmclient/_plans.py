"""The client's plan cache: the one place where what a call's output type needs on one endpoint
of one dialect is kept, so that no call repeats it.

A plan (`Dialect.plan`) is a type's constraint fields as its dialect spells them, with the
decoder of its answers; its fields (a type's schema or grammar: most of a request body, and the
same on every call) are encoded here once, and go into each body as they are (`msgspec.Raw`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ._dialects import Dialect, Endpoint, Plan, ServerInfo
from ._output.types import OutputSpec

__all__ = ["Planned", "Plans"]

_encode = msgspec.json.Encoder().encode
_UNCHECKED = object()
_BOUND = 256  # plans kept: output types made anew on every call must not grow the cache forever


class Planned:
    """A dialect's plan for one output type and endpoint, with its fields encoded once."""

    __slots__ = ("checked", "dialect", "fields", "plan", "spec")

    def __init__(self, spec: OutputSpec[Any], dialect: Dialect, plan: Plan) -> None:
        self.spec = spec
        self.dialect = dialect
        self.plan = plan
        self.fields = {name: msgspec.Raw(_encode(value)) for name, value in plan.fields.items()}
        # the server info this plan passed `Dialect.check_server` for (a call checks it again
        # only when the probes have learnt another); a sentinel until the first check
        self.checked: object = _UNCHECKED

    def check_server(self, info: ServerInfo | None, endpoint: Endpoint) -> None:
        """`Dialect.check_server` for this plan, once per server info."""
        if self.checked is not info:
            self.dialect.check_server(info, self.plan, endpoint)
            self.checked = info


class Plans:
    """A client's plans, by output type (its spec: `compile_output`), endpoint and dialect; made
    on first use, which raises the dialect's refusals before any request."""

    __slots__ = ("_found", "compact")

    def __init__(self, *, compact: bool) -> None:
        self.compact = compact  # lmclient's compact grammar, where the dialect can send one
        self._found: dict[tuple[OutputSpec[Any], Endpoint, Dialect], Planned] = {}

    def get(self, spec: OutputSpec[Any], endpoint: Endpoint, dialect: Dialect) -> Planned:
        key = (spec, endpoint, dialect)
        planned = self._found.get(key)
        if planned is None:
            planned = Planned(spec, dialect, dialect.plan(spec, endpoint, compact=self.compact))
            if len(self._found) >= _BOUND:
                self._found.clear()
            self._found[key] = planned
        return planned
