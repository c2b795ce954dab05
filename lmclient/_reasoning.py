"""Reasoning controls: the per-call ``thinking``, ``thinking_budget`` and ``reasoning_effort``
as each server reads them, in one table (`CONTROLS`), and the ``max_tokens`` they need.

Every spelling is read from the server's own request handling:

* vLLM (`chat_completion/protocol.py`): ``chat_template_kwargs.enable_thinking``,
  ``thinking_token_budget`` (a 400 unless the server runs with ``--reasoning-config``),
  ``reasoning_effort``. The releases of the ``vllm-guided`` dialect (before 0.10.2) have no
  thinking budget and, but for 0.10.1, no ``reasoning_effort``: a field their request model
  does not declare is dropped with a log line, so lmclient refuses both there.
* SGLang (`entrypoints/openai/protocol.py`): ``chat_template_kwargs.enable_thinking`` and
  ``reasoning_effort``; its thinking budget is a custom logit processor the server must be
  started to allow, not a request field, so it is refused.
* llama.cpp (`server-common.cpp::oaicompat_chat_params_parse`, build b11434):
  ``chat_template_kwargs.enable_thinking``, ``reasoning_budget_tokens`` and
  ``reasoning_effort`` (``"none"`` turns thinking off).
* Ollama (`openai/openai.go::FromChatRequest`): only ``reasoning_effort`` (``"none"`` is
  ``think: false``, a level is ``think: level``); it has no "on" switch without a level and no
  budget, so ``thinking=True`` and ``thinking_budget`` are refused.
* OpenAI, and the dialects of unknown servers (generic, LM Studio): ``reasoning_effort``, the
  one spelling the OpenAI API defines. TGI has none.

All act through the chat template or the chat handler: the completions endpoint sends raw
text, so every control is refused there. ``thinking=True`` reaches the model's chat template,
which decides what ``enable_thinking`` means (Qwen3 and most thinking models read it; a
template that does not read it ignores it, which no server can report).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Literal

from .errors import UnsupportedConstraintError

__all__ = [
    "CONTROLS",
    "EFFORTS",
    "IN_REASONING",
    "REASONING_PARAMS",
    "THINK_MARKUP_TOKENS",
    "Controls",
    "Effort",
    "answer_in_reasoning",
    "reasoning_fields",
    "reasoning_params",
    "thinking_room",
]

Effort = Literal["low", "medium", "high"]
EFFORTS: tuple[str, ...] = ("low", "medium", "high")
REASONING_PARAMS = frozenset({"thinking", "thinking_budget", "reasoning_effort"})
Fields = dict[str, Any]

# The tokens around a bounded thinking section that its budget does not count: the tags that
# open and close it, and what a server inserts when it cuts thinking short (llama.cpp's
# ``reasoning_budget_message``, vLLM's forced end-of-thinking tokens).
THINK_MARKUP_TOKENS = 16


@dataclasses.dataclass(frozen=True)
class Controls:
    """How one dialect's server is told each control; ``None`` where it has no field. A
    ``thinking`` function returns ``None`` for a value it cannot express."""

    thinking: Callable[[bool], Fields | None] | None = None
    budget: Callable[[int], Fields] | None = None
    effort: Callable[[str], Fields] | None = None


def _template_kwargs(on: bool) -> Fields:
    return {"chat_template_kwargs": {"enable_thinking": on}}


def _only_off(on: bool) -> Fields | None:
    return None if on else {"reasoning_effort": "none"}


def _top(key: str) -> Callable[[Any], Fields]:
    return lambda value: {key: value}


_EFFORT = _top("reasoning_effort")

CONTROLS: dict[str, Controls] = {
    "vllm": Controls(_template_kwargs, _top("thinking_token_budget"), _EFFORT),
    "vllm-guided": Controls(_template_kwargs),
    "sglang": Controls(_template_kwargs, None, _EFFORT),
    "llamacpp": Controls(_template_kwargs, _top("reasoning_budget_tokens"), _EFFORT),
    "tgi": Controls(),
    "generic": Controls(effort=_EFFORT),
    "ollama": Controls(_only_off, None, _EFFORT),
    "lmstudio": Controls(effort=_EFFORT),
    "sglang-gateway": Controls(effort=_EFFORT),  # forwarded; the budgets are dropped
    "openai": Controls(effort=_EFFORT),
}

_NAMES = {"thinking": "thinking", "budget": "thinking_budget", "effort": "reasoning_effort"}


def reasoning_params(params: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The reasoning controls a call sets (its own over the client's ``defaults``); empty for
    the usual call, which sets none."""
    found = {k: v for k, v in defaults.items() if k in REASONING_PARAMS and v is not None}
    found.update((k, v) for k, v in params.items() if k in REASONING_PARAMS and v is not None)
    return found


def reasoning_fields(
    dialect: str, endpoint: str, controls: Mapping[str, Any], where: str = "call"
) -> Fields:
    """The request fields for ``controls`` on ``dialect``; raises `UnsupportedConstraintError`
    for one the server has no field for (it would be ignored) and ValueError for a
    contradiction (``thinking=False`` with a budget or an effort)."""
    thinking = controls.get("thinking")
    budget = controls.get("thinking_budget")
    effort = controls.get("reasoning_effort")
    if thinking is False and (budget is not None or effort is not None):
        given = "thinking_budget" if budget is not None else "reasoning_effort"
        raise ValueError(f"{where}(): thinking=False contradicts {given}; pass one of them")
    if endpoint != "chat":
        raise UnsupportedConstraintError(
            f"{where}(): {', '.join(sorted(controls))} act through the chat template: the "
            "completions endpoint has none; use endpoint='chat'"
        )
    table = CONTROLS.get(dialect, Controls())
    fields: Fields = {}
    for key, value in (("thinking", thinking), ("budget", budget), ("effort", effort)):
        if value is None:
            continue
        spell = getattr(table, key)
        out = None if spell is None else spell(value)
        if out is None:
            raise UnsupportedConstraintError(_refusal(dialect, _NAMES[key], value))
        fields.update(out)
    return fields


def _refusal(dialect: str, name: str, value: Any) -> str:
    able = [d for d, c in CONTROLS.items() if _can(c, name, value)]
    hint = "; reasoning_effort='low' asks for less" if name == "thinking_budget" else ""
    if dialect == "ollama" and name == "thinking":
        hint = "; Ollama's OpenAI API turns thinking on with a level: pass reasoning_effort"
    return (
        f"dialect {dialect!r} has no request field for {name}={value!r} (the server would "
        f"ignore it, or has no such control); dialects that do: {', '.join(able)}{hint}"
    )


def _can(controls: Controls, name: str, value: Any) -> bool:
    spell = getattr(controls, {v: k for k, v in _NAMES.items()}[name])
    return spell is not None and spell(value) is not None


def thinking_room(controls: Mapping[str, Any]) -> int | None:
    """The tokens a bounded answer's ``max_tokens`` must add for thinking: the budget and its
    markup; ``None`` when thinking is asked for without a budget (unbounded: lmclient then
    sends no ``max_tokens`` of its own, which would only cut the thinking short); 0 when
    thinking is not asked for."""
    budget = controls.get("thinking_budget")
    if budget is not None:
        return int(budget) + THINK_MARKUP_TOKENS if budget else 0
    if controls.get("thinking") or controls.get("reasoning_effort") is not None:
        return None
    return 0


# What a `ConstraintIgnoredError` says of a constrained answer found in the reasoning channel
IN_REASONING = "the answer came back as reasoning, the content empty"

# What splits a server's answer into reasoning and content, and how a constrained answer ends
# up in the reasoning, from each server's source: the advice of the error that says so.
_PARSERS: dict[str, str] = {
    "vllm": (
        "vLLM's --reasoning-parser took it for thinking (the constraint applies only after the "
        "parser's end marker, so an answer written before it goes unconstrained into "
        "`reasoning`): pass thinking=False, or start vLLM with the reasoning parser of this "
        "model, or without one"
    ),
    "sglang": (
        "SGLang's --reasoning-parser took it for thinking: pass thinking=False, or start SGLang "
        "with the reasoning parser of this model, or without one"
    ),
    "llamacpp": (
        "llama.cpp's --reasoning-format (deepseek by default) took it for thinking, and its "
        "grammar applies from the first token, thinking included: pass thinking=False, or a "
        "thinking_budget (lmclient's grammar then lets the model reason up to </think> first, "
        "and llama.cpp closes the reasoning after that many tokens), or start llama-server "
        "with --reasoning-format none"
    ),
}
# The same on llama.cpp where the call's grammar let the model reason first (`thinking_grammar`):
# the model wrote its answer inside its reasoning and never closed it.
_UNCLOSED = (
    "llama.cpp's --reasoning-format (deepseek by default) took it for thinking: lmclient's "
    "grammar lets the model reason up to </think> first, but it answered without closing its "
    "reasoning (or the chat template's reasoning markers are not <think> and </think>): pass "
    "a thinking_budget (llama.cpp then closes the reasoning after that many tokens), or "
    "thinking=False, or start llama-server with --reasoning-format none"
)


def answer_in_reasoning(dialect: str, reasoned: bool = False) -> str:
    """What to change where a constrained answer came back as reasoning with empty content:
    the server's reasoning parser, named (`ConstraintIgnoredError`'s advice); ``reasoned``: the
    call's grammar let the model reason first (`Plan.reasoned`)."""
    if reasoned and dialect == "llamacpp":
        return _UNCLOSED
    return _PARSERS.get(
        dialect,
        "the server's reasoning parser took it for thinking: pass thinking=False, or start the "
        "server without a reasoning parser",
    )
