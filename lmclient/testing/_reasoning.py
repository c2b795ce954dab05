"""How the fake answers a thinking model's request, like the server it impersonates.

The field the thinking goes in (``reasoning`` on vLLM >= 0.10 and Ollama, ``reasoning_content``
on SGLang and llama.cpp), whether thinking is on (``chat_template_kwargs.enable_thinking``, a
``reasoning_effort`` level; ``"none"`` or ``false`` turns it off), the thinking budget in the
server's spelling, and ``max_tokens`` counting the thinking first, as every server does: a
budget that thinking uses up leaves an empty answer with ``finish_reason "length"``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ._wire import Answer, estimate_tokens

__all__ = ["DEFAULT_REASONING", "reasoning_key", "shaped"]

DEFAULT_REASONING = "The fake model thinks about the question before it answers."

_CONTENT_KEY = frozenset({"sglang", "llamacpp"})
# The thinking budget's field per server kind (None: the default fake, which reads them all).
_BUDGETS: dict[str | None, tuple[str, ...]] = {
    None: ("thinking_token_budget", "reasoning_budget_tokens", "thinking_budget_tokens"),
    "generic": ("thinking_token_budget", "reasoning_budget_tokens", "thinking_budget_tokens"),
    "vllm": ("thinking_token_budget",),
    "llamacpp": ("reasoning_budget_tokens", "thinking_budget_tokens"),
}


def reasoning_key(server: str | None) -> str:
    """The message (and delta) field the server puts thinking in."""
    return "reasoning_content" if server in _CONTENT_KEY else "reasoning"


def _thinking(body: dict[str, Any]) -> bool | None:
    """Whether the request turns thinking on (True), off (False) or leaves it (None)."""
    kwargs = body.get("chat_template_kwargs")
    on = kwargs.get("enable_thinking") if isinstance(kwargs, dict) else None
    effort = body.get("reasoning_effort")
    if effort == "none":
        return False
    if isinstance(on, bool):
        return on
    return True if isinstance(effort, str) and effort else None


def _budget(body: dict[str, Any], server: str | None) -> int | None:
    for key in _BUDGETS.get(server, ()):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def shaped(answer: Answer, body: dict[str, Any], server: str | None, limit: Any) -> Answer:
    """``answer`` as the server would send it: thinking added (when asked for and not
    scripted), dropped (when turned off) or cut to its budget, and ``limit`` (``max_tokens``)
    spent on the thinking first."""
    reasoning = answer.reasoning
    thinking = _thinking(body) if "messages" in body else False
    if thinking is False:
        reasoning = None
    elif thinking and reasoning is None:
        reasoning = DEFAULT_REASONING
    budget = _budget(body, server)
    if reasoning and budget is not None and estimate_tokens(reasoning) > budget:
        reasoning = reasoning[: 4 * budget] or None
    content, finish = answer.content, answer.finish_reason
    if isinstance(limit, int):
        spent = estimate_tokens(reasoning) if reasoning else 0
        if spent >= limit and reasoning:
            reasoning, content, finish = reasoning[: 4 * limit], "", "length"
        elif content and estimate_tokens(content) > limit - spent:
            content, finish = content[: 4 * (limit - spent)], "length"
    return dataclasses.replace(
        answer,
        content=content,
        finish_reason=finish,
        reasoning=reasoning,
        reasoning_key=reasoning_key(server),
    )
