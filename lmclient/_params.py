"""The per-call keyword parameters, as TypedDicts so type checkers see them on every method.

At run time `core.check_params` enforces the same names and types (a test keeps the two in step):
a misspelt parameter must be a TypeError, never a field a server silently ignores.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

import httpx

__all__ = ["CallParams", "CreateParams", "Prompt", "env_api_key", "env_base_url"]

Prompt = str | Sequence[Mapping[str, Any]]


class CallParams(TypedDict, total=False):
    """Keyword parameters accepted by every call method (also usable in ``defaults=``)."""

    max_tokens: int
    temperature: float
    top_p: float
    stop: str | list[str]
    seed: int
    logprobs: bool
    top_logprobs: int
    presence_penalty: float
    frequency_penalty: float
    timeout: float | httpx.Timeout
    deadline: float
    max_retries: int
    max_reasks: int
    extra_body: dict[str, Any]


class CreateParams(CallParams, total=False):
    """`create` also takes ``n``: several choices, each validated."""

    n: int


def env_base_url(base_url: str | None) -> str | None:
    return base_url or os.environ.get("LMCLIENT_BASE_URL") or os.environ.get("OPENAI_BASE_URL")


def env_api_key(api_key: str | None) -> str | None:
    return api_key or os.environ.get("LMCLIENT_API_KEY") or os.environ.get("OPENAI_API_KEY")
