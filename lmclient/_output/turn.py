"""A typed turn's grammar: the model calls tools or gives the typed answer, under one constraint.

An agent's turn ends one of two ways: the model calls tools, or it answers. Servers constrain
one or the other, not both (vLLM refuses a named tool with structured outputs, SGLang drops the
tool-call constraint, llama.cpp refuses a grammar with tools), so a client that wants a typed
answer after tools pays a second request. lmclient writes both ways into one grammar: the calls
in the syntax chat templates render (Hermes and Qwen 2.5's, which vLLM's ``hermes`` parser and
llama.cpp's read), one (or, with ``parallel_tool_calls=True``, several on their own lines), each
call's arguments in its tool's compact grammar; or the answer in its own. The same text on every
server that takes a grammar, read by lmclient (`lmclient._tools.calls_in_text`): the turn does
not depend on whether the server's tool parser is on. An answer never starts with ``<`` (JSON
does not, and a choice whose option would is refused), so the first character tells the branch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from .gbnf import CompactGrammar
    from .gbnf_ir import Node

__all__ = ["CLOSE", "MAX_CALLS", "OPEN", "turn_grammar"]

OPEN = "<tool_call>\n"
CLOSE = "\n</tool_call>"
# The calls one answer may make with ``parallel_tool_calls=True`` (else one): bounded, as every
# repeat the model writes must be. Small models fill every slot with the same call (Gemma 3 270M
# wrote 8 calls of weather("") a turn on llama.cpp, and took about four minutes for them on
# vLLM on 2 cores), so one call a turn is the default, as `client.run` loops anyway.
MAX_CALLS = 8


def turn_grammar(
    answer: Mapping[str, Node] | None,
    tools: Sequence[tuple[str, Mapping[str, Node]]],
    most_calls: int,
) -> CompactGrammar | None:
    """The grammar of a turn: one to ``most_calls`` calls of ``tools`` (each a name and its
    arguments' compact rules), or the ``answer`` (its compact rules); either may be left out
    (``tools`` empty, ``answer`` None: ``tool_choice`` "none" or one that requires a call).
    ``None`` where a repeat count is more than llama.cpp takes."""
    # (imported here: the grammar compiler is loaded when a turn is first made, as for a type)
    from .gbnf import finished
    from .gbnf_ir import Lit, Ref, alt, prefixed, rep, seq

    rules: dict[str, Node] = {}
    branches: list[Node] = []
    if tools:
        calls = []
        for i, (name, arguments) in enumerate(tools, 1):
            rules.update(prefixed(arguments, f"tool{i}"))
            head = f'{OPEN}{{"name": {msgspec.json.encode(name).decode()}, "arguments": '
            calls.append(seq(Lit(head), Ref(f"tool{i}"), Lit("}" + CLOSE)))
        rules["call"] = alt(*calls)
        branches.append(seq(Ref("call"), rep(seq(Lit("\n"), Ref("call")), 0, most_calls - 1)))
    if answer is not None:
        rules.update(prefixed(answer, "answer"))
        branches.append(Ref("answer"))
    rules["root"] = alt(*branches)
    return finished(rules)
