"""A typed turn: ``create(prompt, Answer, tools=[...])``, tools and a typed answer in one request.

The model either calls tools (each call's arguments validated into its tool's type) or gives the
answer (validated into ``Answer``), and nothing else: one grammar holds both ways
(`lmclient._output.turn`). This module decides, once per output type, tools and ``tool_choice``
(`Plans.turn`), what the request carries, and refuses before sending what a server cannot hold.

What each server is sent, from its source (the tools go with the grammar so that the chat
template renders them; the ``tool_choice`` sent is the one under which the server neither
refuses the grammar nor replaces it, and its tool parser, on or off, cannot change the answer's
shape, which lmclient reads itself):

* vLLM (0.32 ``chat_completion/protocol.py``): ``structured_outputs.grammar`` is not counted
  against tools, and ``tool_choice: "none"`` needs no ``--enable-auto-tool-choice`` and leaves
  the tools in the prompt (``--exclude-tools-when-tool-choice-none`` is off by default); the
  answer is not parsed for calls. The older ``guided_grammar`` the same.
* llama.cpp (b11434 ``server-common.cpp``): a grammar with tools is a 400 unless
  ``tool_choice`` is ``"none"``, which still renders the tools and returns the raw text.
* SGLang (0.5.23 ``serving_chat.py``): ``"none"`` leaves the tools out of the prompt, so
  ``"auto"``: non-strict tools make no tool constraint, the ``ebnf`` holds, and the calls come
  back parsed by its tool parser where one is on, or as text.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from ._dialects import Budget, Dialect
from ._media import prompt_messages
from ._output.turn import MAX_CALLS, OPEN, turn_grammar
from ._output.types import OutputSpec
from ._response import Response
from ._tools import STRICT_TOOLS, Tool, ToolCall
from ._usage import counted
from .errors import APITimeoutError, NoValueError, TokenBudgetExceeded, UnsupportedConstraintError

if TYPE_CHECKING:
    from ._output.gbnf_ir import Node

__all__ = ["TURN_CHOICE", "Loop", "Turn", "turn_key"]

_encode = msgspec.json.Encoder().encode

# The ``tool_choice`` a typed turn is sent with, per dialect whose server takes lmclient's
# grammar beside tools (the module's docstring says why each).
TURN_CHOICE: dict[str, str] = {
    "vllm": "none",
    "vllm-guided": "none",
    "llamacpp": "none",
    "sglang": "auto",
}


def turn_key(tools: Sequence[Tool[Any]], choice: Any, parallel: bool) -> tuple[Any, ...]:
    """What a turn's grammar depends on beside the output type: the tools (by identity: a
    `Tool` is its own), which way ``tool_choice`` points, and whether calls may be several."""
    return (*tools, choice, parallel)


class Turn:
    """A typed turn on one dialect: its request fields, encoded once (they replace the plan's
    constraint in the body), its token budget where every way is bounded, and the tools its
    calls are decoded with."""

    __slots__ = ("_grammar", "_thinking", "budget", "fields", "tools")

    def __init__(
        self,
        where: str,
        spec: OutputSpec[Any],
        dialect: Dialect,
        tools: Sequence[Tool[Any]],
        choice: Any,
        parallel: bool,
    ) -> None:
        wire = TURN_CHOICE.get(dialect.name)
        if wire is None or dialect.compact is None:
            raise UnsupportedConstraintError(
                f"{where}(): tools with an output type ({spec.name}) need a server that takes "
                f"lmclient's grammar beside tools (vLLM, SGLang, llama.cpp); dialect "
                f"{dialect.name!r} cannot hold both in one request: call without an output "
                "type, then ask for the typed value in the next call"
            )
        if isinstance(choice, Tool):
            called: Sequence[Tool[Any]] = [choice]
        else:
            called = () if choice == "none" else tools
        answer = None if choice == "required" or isinstance(choice, Tool) else _answer(where, spec)
        grammar = turn_grammar(
            answer,
            [(tool.name, _arguments(where, tool)) for tool in called],
            MAX_CALLS if parallel else 1,
        )
        if grammar is None:
            raise UnsupportedConstraintError(
                f"{where}(): the turn's grammar repeats more than llama.cpp takes; bound the "
                "answer's or the tools' lists (msgspec.Meta(max_length=...))"
            )
        # What the longest turn may cost where every way is bounded (the answer, each tool's
        # arguments; the calls are at most `MAX_CALLS`): its `max_tokens`, as a bounded type's.
        longest = grammar.longest
        self.budget = None if longest is None else Budget.of(grammar.shortest, longest)
        strict = dialect.name in STRICT_TOOLS
        self.fields: dict[str, msgspec.Raw] = {
            name: msgspec.Raw(_encode(value))
            for name, value in dialect.compact(grammar.text).items()
        }
        self.fields["tools"] = msgspec.Raw(_encode([tool.param(strict=strict) for tool in tools]))
        self.fields["tool_choice"] = msgspec.Raw(_encode(wire))
        self.tools = {tool.name: tool for tool in tools}
        self._grammar = grammar.text
        self._thinking: Turn | None = None

    def thinking(self, field: str) -> Turn:
        """This turn for a call that asks for thinking where the server applies its grammar
        (``field``) from the first token: the grammar after lmclient's reasoning block
        (`thinking_grammar`); made once."""
        found = self._thinking
        if found is None:
            from ._output.thinking import thinking_grammar

            found = copy.copy(self)
            found.fields = {
                **self.fields,
                field: msgspec.Raw(_encode(thinking_grammar(self._grammar))),
            }
            found._thinking = found
            self._thinking = found
        return found


def _answer(where: str, spec: OutputSpec[Any]) -> Mapping[str, Node]:
    """The compact rules of a turn's answer: a JSON value's, or a choice's options."""
    from ._output.gbnf import compact_rules  # (as `turn_grammar`: loaded by the first turn)
    from ._output.gbnf_ir import Lit, alt

    if spec.kind == "choice":
        starts = [option for option in spec.options if option.startswith(OPEN[0])]
        if starts:
            raise UnsupportedConstraintError(
                f"{where}(): the option {starts[0]!r} begins as a tool call does ({OPEN[0]!r}): "
                "a turn's answer and its calls would not be told apart"
            )
        return {"root": alt(*(Lit(option) for option in spec.options))}
    scalar = spec.output_type in (int, float, bool)  # (a regex plan; the same JSON text)
    json = spec.kind in ("json", "any") or scalar
    rules = compact_rules(spec.schema) if json and spec.schema is not None else None
    if rules is None:
        raise UnsupportedConstraintError(
            f"{where}(): {spec.name} cannot be the answer of a turn with tools: the answer is a "
            "JSON type (a Struct, dataclass, list, int...) or a choice (Literal, Enum) that "
            "lmclient's grammar covers (see docs/output-types.md)"
        )
    return rules


def _arguments(where: str, tool: Tool[Any]) -> Mapping[str, Node]:
    """The compact rules of a tool's arguments (a JSON object, `Tool`'s own check)."""
    from ._output.gbnf import compact_rules

    rules = compact_rules(tool.schema)
    if rules is None:
        raise UnsupportedConstraintError(
            f"{where}(): the arguments of tool {tool.name!r} use a schema lmclient's grammar "
            "does not cover (see docs/output-types.md), and a turn with an output type needs "
            "it: simplify the arguments' type, or call without an output type"
        )
    return rules


class Loop:
    """The agent loop of `Client.run` and `AsyncClient.run`, apart from their I/O: the
    messages so far, the results of the calls made, and what is left of the loop's turns,
    deadline and token budget. A turn's answer either ends the loop (the value) or adds its
    calls and their results to the messages for the next turn.

    A call the loop has made before (the same tool, the same arguments) is not run again: its
    result is sent once more. A turn that only repeats calls has learnt nothing new, which a
    small model looping on a tool does turn after turn; the next turn is then asked for the
    answer alone (``tool_choice="none"``)."""

    __slots__ = (
        "budget",
        "deadline_at",
        "max_turns",
        "messages",
        "repeated",
        "results",
        "spent",
        "turns",
    )

    def __init__(
        self,
        where: str,
        prompt: Any,
        tools: Sequence[Tool[Any]],
        max_turns: int,
        params: Mapping[str, Any],
    ) -> None:
        unrunnable = [tool.name for tool in tools if tool.function is None]
        if unrunnable:
            raise TypeError(
                f"{where}(): tools {unrunnable} have no function to run: make them with "
                "Tool.from_function, or write the loop with create()"
            )
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ValueError(f"{where}(): max_turns must be a positive int, not {max_turns!r}")
        self.max_turns = max_turns
        # the conversation so far: the prompt's messages (a copy: the caller's are not grown)
        self.messages: list[Any] = (
            [{"role": "user", "content": prompt}]
            if isinstance(prompt, str)
            else list(prompt_messages(prompt)[0])
        )
        deadline = params.get("deadline")
        self.deadline_at = None if deadline is None else time.monotonic() + deadline
        self.budget: int | None = params.get("token_budget")
        self.spent = 0  # tokens of the turns so far (their `total_usage`)
        self.turns = 0
        self.results: dict[tuple[str, str], Any] = {}  # each call made: (name, arguments)
        self.repeated = False  # the last turn's calls were all made before

    def params(self, tools: Sequence[Tool[Any]], params: Mapping[str, Any]) -> dict[str, Any]:
        """The next turn's parameters: the tools (the answer alone after a turn of repeated
        calls), and what is left of the deadline and of the token budget."""
        if self.turns >= self.max_turns:
            raise NoValueError(
                f"the model still calls tools after max_turns={self.max_turns} turns: raise "
                "max_turns, or say in the prompt when to answer"
            )
        given = {**params, "tools": tools}
        if self.repeated:
            given["tool_choice"] = "none"
        if self.deadline_at is not None:
            left = self.deadline_at - time.monotonic()
            if left <= 0:
                raise APITimeoutError("the run's deadline expired")
            given["deadline"] = left
        if self.budget is not None:
            if self.spent >= self.budget:
                raise TokenBudgetExceeded(
                    budget=self.budget, spent=self.spent, usage=None, what="run"
                )
            given["token_budget"] = self.budget - self.spent
        self.turns += 1
        return given

    def answered(self, response: Response[Any, Any]) -> list[ToolCall[Any]] | None:
        """Count a turn's answer: ``None`` where it ends the loop (no calls: it is the value),
        else the calls to run, each new one once (`ran`, then `replied`)."""
        tokens = counted(response.total_usage)
        if tokens is None or response.unmetered:
            if self.budget is not None:  # a budget that cannot be counted is not kept
                raise TokenBudgetExceeded(
                    budget=self.budget, spent=None, usage=response.total_usage, what="run"
                )
            tokens = 0
        self.spent += tokens
        if not response.tool_calls:
            return None
        self.messages.append(response.message)
        new = {_key(call): call for call in response.tool_calls if _key(call) not in self.results}
        self.repeated = not new
        return list(new.values())

    def ran(self, call: ToolCall[Any], result: Any) -> None:
        """The result of a call the turn made."""
        self.results[_key(call)] = result

    def replied(self, response: Response[Any, Any]) -> None:
        """Every call of the turn answered, in its order (a repeated one with its result)."""
        for call in response.tool_calls:
            self.messages.append(call.result(self.results[_key(call)]))


def _key(call: ToolCall[Any]) -> tuple[str, str]:
    """What makes two calls the same call: the tool and its arguments, as validated."""
    return call.name, msgspec.json.encode(call.arguments).decode()
