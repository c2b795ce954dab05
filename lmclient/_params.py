"""The per-call keyword parameters: as TypedDicts, so type checkers see them on every method,
and as the table `check_params` enforces at run time (a test keeps the two in step). A misspelt
parameter must be a TypeError, never a field a server silently ignores.

Timeout defaults, with their precedents: 5 s to connect, 600 s between bytes. A connect to a
local server is instant, but a model may think for minutes before its first byte (the OpenAI SDK
also reads for 600 s).
"""

from __future__ import annotations

import difflib
import functools
import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypedDict

import httpx

from ._media import Media
from ._request import Timeouts
from ._runaway import Runaway, RunawaySetting
from ._serving import SERVING_PARAMS, serving_problem
from ._tools import Tool

__all__ = [
    "AS_GIVEN",
    "CALL_PARAMS",
    "MAX_SECONDS",
    "NO_PROMPT",
    "PARAMS",
    "RESPELT",
    "CallParams",
    "CreateParams",
    "FileParams",
    "Prompt",
    "Timeouts",
    "ToolCallParams",
    "ToolCreateParams",
    "as_given",
    "check_params",
    "env_api_key",
    "env_base_url",
]

# A str, messages, or a list of text and media parts (one user message); one list is either
# (checked when called), in one union so that type checkers infer a list literal's items.
Prompt = str | Sequence[Mapping[str, Any] | str | Media]


class _BodyParams(TypedDict, total=False):
    """`FileParams` but ``tools``, which `create` takes apart to bind its calls' type."""

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
    reask_history: Literal["full", "last"]
    token_budget: int
    extra_body: dict[str, Any]
    # Reasoning controls, translated per server (`_reasoning`): chat only.
    thinking: bool
    thinking_budget: int
    reasoning_effort: Literal["low", "medium", "high"]
    # The tool the model must call, or whether it may (`_tools`): with ``tools``.
    tool_choice: Literal["auto", "required", "none"] | Tool[Any]
    # Whether a typed turn (tools beside an output type) may make several calls (`_turn`).
    parallel_tool_calls: bool
    # Serving fields (`_serving`): sent where each server reads them, refused elsewhere.
    priority: int
    cache_salt: str
    session_id: str  # one conversation's or agent run's, across its calls (vLLM)


class FileParams(_BodyParams, total=False):
    """The per-call parameters but the model, those that travel outside the body (headers, the
    trace context), the request id (a line's ``custom_id`` names it) and the runaway watch (no
    one reads a line's answer as it comes): what a batch file's request lines can be given
    (`lmclient.batch`)."""

    # Tools the model may call (`_tools`): chat only, without an output type.
    tools: Sequence[Tool[Any]]


class _OneCallParams(TypedDict, total=False):
    model: str  # this call's, over the client's (a LoRA adapter is a model name on vLLM)
    request_id: str  # one request's: not in defaults, nor in the *_many methods
    headers: Mapping[str, str]  # merged over the client's
    traceparent: str  # W3C trace context, sent as headers
    tracestate: str
    # The watch over an answer that loops (`_runaway`): "on" (the client's default), "off", or
    # thresholds; not a batch file's, whose answers no one reads as they come.
    runaway: RunawaySetting


class CallParams(FileParams, _OneCallParams, total=False):
    """Keyword parameters accepted by every call method (also usable in ``defaults=``)."""


class _CreateOnlyParams(TypedDict, total=False):
    n: int
    probabilities: bool


class CreateParams(CallParams, _CreateOnlyParams, total=False):
    """`create` also takes ``n``: several choices, each validated; and ``probabilities``: each
    option of a choice output's probability, from the server's logprobs
    (`Response.probabilities`)."""


class ToolCallParams(_BodyParams, _OneCallParams, total=False):
    """`CallParams` but ``tools``: what `stream` takes beside its own ``tools`` parameter, in
    the overload that types the calls' arguments by the tools' (``Stream[str, W]``)."""


class ToolCreateParams(ToolCallParams, _CreateOnlyParams, total=False):
    """`CreateParams` but ``tools``: what `create` takes beside its own ``tools`` parameter, in
    the overload that types the calls' arguments by the tools' (``Response[str, W]``)."""


def env_base_url(base_url: str | None) -> str | None:
    return base_url or os.environ.get("LMCLIENT_BASE_URL") or os.environ.get("OPENAI_BASE_URL")


def env_api_key(api_key: str | None) -> str | None:
    return api_key or os.environ.get("LMCLIENT_API_KEY") or os.environ.get("OPENAI_API_KEY")


_NUMBER = (int, float)
# Per-call parameters sent to the server, with the types they accept.
_BODY_PARAMS: dict[str, tuple[type, ...]] = {
    "max_tokens": (int,),
    "temperature": _NUMBER,
    "top_p": _NUMBER,
    "n": (int,),
    "stop": (str, list, tuple),
    "seed": (int,),
    "logprobs": (bool,),
    "top_logprobs": (int,),
    "presence_penalty": _NUMBER,
    "frequency_penalty": _NUMBER,
}
# Per-call parameters lmclient itself reads, or translates per server: never sent as such.
CALL_PARAMS: dict[str, tuple[type, ...]] = {
    "timeout": (int, float, httpx.Timeout),
    "deadline": _NUMBER,
    "max_retries": (int,),
    "max_reasks": (int,),
    "reask_history": (str,),
    "token_budget": (int,),
    "extra_body": (dict,),
    "thinking": (bool,),
    "thinking_budget": (int,),
    "reasoning_effort": (str,),
    "tools": (list, tuple),
    "tool_choice": (str, Tool),
    "parallel_tool_calls": (bool,),
    "model": (str,),
    "headers": (Mapping,),
    "request_id": (str,),
    "priority": (int,),
    "cache_salt": (str,),
    "session_id": (str,),
    "traceparent": (str,),
    "tracestate": (str,),
    "probabilities": (bool,),
    "runaway": (str, Runaway),
}
# The body parameters spelt per endpoint (`lmclient._core._add_params`).
RESPELT = frozenset({"stop", "logprobs", "top_logprobs"})
# The body parameters sent as they are: not respelt, nor read by lmclient (`CALL_PARAMS`).
AS_GIVEN = frozenset(_BODY_PARAMS) - RESPELT
_CREATE_ONLY = ("n", "probabilities")  # `check_params`'s ``allow_n``
_IN_EXTRA_BODY = "pass it in extra_body={{{name!r}: ...}}, which lmclient sends as given"
# What an unknown parameter is told to do instead (`check_params`): the ones a user of the
# OpenAI SDK, or of a server's own extensions, passes by habit, and create()'s own elsewhere.
_INSTEAD: dict[str, str] = {
    **dict.fromkeys(_CREATE_ONLY, "{name} is a parameter of create() only"),
    "response_format": (
        "pass the output type as the second argument instead, as in generate(prompt, Person); "
        "lmclient.JsonSchema(schema) for a JSON schema, typing.Any for any JSON"
    ),
    "messages": (
        "pass the messages as the prompt instead, as in "
        "generate([{{'role': 'user', 'content': 'Hi'}}])"
    ),
    "max_completion_tokens": "lmclient spells it max_tokens=",
    "max_output_tokens": "lmclient spells it max_tokens=",
    "stream": "call stream(prompt, ...) instead, a context manager",
    "functions": "pass tools=[lmclient.Tool(...)] instead",
    "function_call": "pass tool_choice= instead: 'auto', 'required', 'none' or one of the tools",
    "extra_headers": "lmclient spells it headers=",
    **dict.fromkeys(
        ("guided_json", "guided_regex", "guided_choice", "guided_grammar"),
        "pass the output type as the second argument instead: "
        "lmclient.JsonSchema(...), Regex(...), Choice([...]) or Grammar(...)",
    ),
    **dict.fromkeys(("top_k", "min_p", "repetition_penalty"), _IN_EXTRA_BODY),
}
# The default of the prompt in the methods' own signatures (their overloads, what type checkers
# read, require it): a call written the OpenAI SDK's way, ``create(messages=[...])`` with no
# prompt, then reaches `check_params` and is told to pass the messages as the prompt, rather
# than Python's bare "missing 1 required positional argument". With no prompt and nothing to
# tell, the prompt's own check says one is required.
NO_PROMPT: Any = None
_EFFORTS = ("low", "medium", "high")
_CHOICES = ("auto", "required", "none")
PARAMS = {**_BODY_PARAMS, **CALL_PARAMS}


def check_params(where: str, params: Mapping[str, Any], *, allow_n: bool = False) -> None:
    """Reject misspelt or mistyped per-call parameters before anything is sent: each is one
    look-up in `_CHECKS` (`_CALL_CHECKS` where ``n`` and ``probabilities`` are not taken), its
    type one set look-up when it is exactly an accepted type (a subclass is checked with
    `isinstance`), its value checked where its entry says how: a count against its least
    value (`_LEAST`, a comparison: ``max_tokens`` is in most calls), another by a function.
    What the checked parameters ask of the request is `as_given`'s to tell."""
    checks = _CHECKS if allow_n else _CALL_CHECKS
    for name, value in params.items():
        check = checks.get(name)
        if check is None:
            if value is None and name in _CREATE_ONLY:  # (``n=None``: the default, taken
                continue  # everywhere)
            raise TypeError(
                f"{where}() got an unexpected keyword argument {name!r}{_instead(name, checks)}"
            )
        if value is None:  # left out of the body
            continue
        exact, accepted, least, value_problem = check
        if type(value) not in exact and (
            (isinstance(value, bool) and bool not in accepted) or not isinstance(value, accepted)
        ):
            names = " or ".join(t.__name__ for t in accepted)
            raise TypeError(f"{where}(): {name} must be {names}, not {type(value).__name__}")
        if least is not None and value < least:
            problem: str | None = _TOO_LOW[least]
        else:
            problem = None if value_problem is None else value_problem(value)
        if problem:
            shown = "" if name == "headers" else f", not {value!r}"  # may hold a credential
            raise ValueError(f"{where}(): {name} {problem}{shown}")


def as_given(params: Mapping[str, Any]) -> bool:
    """Whether every parameter, checked by `check_params`, goes in the body as it is (each one
    of `AS_GIVEN`, none ``None``), as in the usual call (``temperature``, ``max_tokens``): then
    building the request reads them no more than that, and the call's settings are the
    client's. Two passes in C (a set's, then the values' identity with ``None`` first), not a
    Python loop: the usual call pays for them about what a flag set in `check_params`' loop
    cost. (A value whose ``==`` claims it is ``None`` only sends the call the general way.)"""
    return AS_GIVEN.issuperset(params) and None not in params.values()


def _instead(name: str, checks: Mapping[str, object]) -> str:
    """What a parameter lmclient does not take is told to do instead: its entry in `_INSTEAD`,
    else the parameter it may be a misspelling of (called only on the way to the error)."""
    instead = _INSTEAD.get(name)
    if instead is not None:
        return f" ({instead.format(name=name)})"
    close = difflib.get_close_matches(name, checks, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _strings(value: str | Sequence[Any]) -> str | None:
    if isinstance(value, str) or all(isinstance(s, str) for s in value):
        return None
    return "must be a str or list of str"


def _reask_history(value: str) -> str | None:
    return None if value in ("full", "last") else "must be 'full' or 'last'"


def _tools(value: Sequence[Any]) -> str | None:
    if all(isinstance(tool, Tool) for tool in value):
        return None
    return "must be a list of lmclient.Tool"


def _tool_choice(value: Any) -> str | None:
    if isinstance(value, str) and value not in _CHOICES:
        return "must be 'auto', 'required', 'none' or one of the tools"
    return None


def _effort(value: str) -> str | None:
    return None if value in _EFFORTS else "must be one of " + ", ".join(map(repr, _EFFORTS))


# The longest finite timeout or deadline taken, in seconds: a year. Far longer, a wait fails in
# the system instead of ending: ``socket.settimeout`` raises `OverflowError` past about 292 years
# (nanoseconds in 64 bits), in the middle of a call. A year is far from that, and beyond any wait
# a call needs; one bound for both clients (asyncio takes any float), ``math.inf`` for none.
MAX_SECONDS = 365 * 24 * 3600
_A_YEAR = f"{MAX_SECONDS} seconds (a year)"


def _seconds(value: Any) -> str | None:
    """A timeout or deadline: more than zero seconds (NaN is not, and would wait forever), at
    most `MAX_SECONDS` or infinite; an `httpx.Timeout` the same in each phase it bounds (None:
    no limit). Its 0, which httpx takes as "time out at once", is refused rather than read as no
    limit."""
    if isinstance(value, httpx.Timeout):
        phases = [s for s in (value.connect, value.read, value.write, value.pool) if s is not None]
        if any(not seconds > 0 for seconds in phases):
            return "must bound each phase by a positive number of seconds, or None"
        if any(MAX_SECONDS < seconds < math.inf for seconds in phases):
            return f"must bound each phase by at most {_A_YEAR}, or None for no limit"
        return None
    if not value > 0:
        return "must be a positive number of seconds"
    if MAX_SECONDS < value < math.inf:
        return f"must be at most {_A_YEAR}, or math.inf for no limit"
    return None


# The counts, with their least values, and what a smaller one is told (`check_params`).
_LEAST = {
    "max_tokens": 1,
    "n": 1,
    "token_budget": 1,
    "top_logprobs": 0,
    "max_retries": 0,
    "max_reasks": 0,
    "thinking_budget": 0,
}
_TOO_LOW = {0: "must not be negative", 1: "must be at least 1"}
# The other parameters whose values are checked beyond their types, and how: the rest
# (temperature, top_p, ...) cost a call nothing more.
_VALUE_CHECKS: dict[str, Callable[[Any], str | None]] = {
    "stop": _strings,
    "reask_history": _reask_history,
    "tools": _tools,
    "tool_choice": _tool_choice,
    "reasoning_effort": _effort,
    "deadline": _seconds,
    "timeout": _seconds,
    **{name: functools.partial(serving_problem, name) for name in SERVING_PARAMS},
}
# Each parameter's checks (`check_params`): its accepted types, as a set and as a tuple, and its
# least value or the check of its value, if any.
_CHECKS: dict[
    str, tuple[frozenset[type], tuple[type, ...], int | None, Callable[[Any], str | None] | None]
] = {
    name: (frozenset(types), types, _LEAST.get(name), _VALUE_CHECKS.get(name))
    for name, types in PARAMS.items()
}
# The same without `_CREATE_ONLY`'s: the checks of every method but create().
_CALL_CHECKS = {name: check for name, check in _CHECKS.items() if name not in _CREATE_ONLY}
