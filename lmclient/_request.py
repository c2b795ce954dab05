"""The bottom of the call: what goes on the wire (`PreparedRequest`), the timeouts of one attempt
(`Timeouts`), and a client's per-call settings (`CallSettings`).

No lmclient imports: the transports need only this module, so importing one loads neither the
core nor the dialects, tools and output types the core needs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import httpx
import msgspec

__all__ = ["CallSettings", "PreparedRequest", "Timeouts"]

DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_READ_TIMEOUT = 600.0


class PreparedRequest(msgspec.Struct, frozen=True):
    """Exactly what goes on the wire."""

    method: str
    url: str
    headers: list[tuple[str, str]]
    body: bytes | None = None


class Timeouts(msgspec.Struct, frozen=True):
    """Per-phase timeouts of one attempt, in seconds: what the ``timeout`` parameter means."""

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


class CallSettings(msgspec.Struct, frozen=True, kw_only=True):
    """A client's settings for each of its calls, which a call's parameters may override
    (`given`): one value, passed whole, so that no two of its ints can be swapped on the way
    (keyword-only, and frozen: a call's are its own)."""

    max_retries: int
    max_reasks: int
    max_response_bytes: int
    timeouts: Timeouts
    deadline: float | None  # seconds a call may take, retries included, from its start
    token_budget: int | None = None  # prompt + completion tokens over its answers (`_usage`)
    reask_history: str = "full"  # what a re-ask sends back: every invalid answer, or the last

    def given(self, params: Mapping[str, Any]) -> CallSettings:
        """These settings, with the call's parameters over them (``timeout``, ``deadline``,
        ``max_retries``, ``max_reasks``, ``token_budget``, ``reask_history``, checked by the
        core); themselves when it gives none, as most calls do."""
        if _OVERRIDES.isdisjoint(params):
            return self
        timeout = params.get("timeout")
        return CallSettings(
            max_retries=params.get("max_retries", self.max_retries),
            max_reasks=params.get("max_reasks", self.max_reasks),
            max_response_bytes=self.max_response_bytes,
            timeouts=self.timeouts if timeout is None else Timeouts.from_user(timeout),
            deadline=params.get("deadline", self.deadline),
            token_budget=params.get("token_budget", self.token_budget),
            reask_history=params.get("reask_history") or self.reask_history,
        )


_OVERRIDES = frozenset(
    {"timeout", "deadline", "max_retries", "max_reasks", "token_budget", "reask_history"}
)
