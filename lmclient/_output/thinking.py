"""Reasoning before a grammar's answer: the GBNF that lets a model think first and then answer
under the grammar's rules unchanged, and where an answer written so begins.

llama.cpp (b11434) applies a request's ``grammar`` from the first token it generates, reasoning
included, and does not feed the grammar the generation prompt (``common/sampling.cpp``: only
its own output-format and tool-call grammars are prefilled). A thinking model under the
answer's grammar cannot think; with a chat template that opens the reasoning in the prompt
(``<think>``), the whole answer is written inside the reasoning. So a call that asks for
thinking is sent `thinking_grammar`: an optional reasoning block (its start marker optional,
as a template may have written it; free text in which the end marker cannot occur; the end
marker; a little whitespace), then the answer's grammar. llama.cpp's reasoning budget
(``reasoning_budget_tokens``) forces the end marker after that many tokens, which this grammar
accepts at any point.

The markers: llama.cpp learns them per request from its analysis of the chat template
(``common/chat.cpp``: ``thinking_start_tag``, ``thinking_end_tags``) and tells a client none of
them (``/props`` has the template, not its markers): so `START` and `END`, those of most
thinking models (Qwen3, DeepSeek-R1, QwQ, GLM...), sent only where the template is not known to
lack ``</think>`` (`ServerInfo.thinks`: a model would never close a block its template does not
write). The rules that keep the end marker out of the free text are generated for any marker
(`gbnf_ir.text_until`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .gbnf_ir import Node

__all__ = [
    "END",
    "START",
    "past_space",
    "split_reasoning",
    "thinking_grammar",
]

START = "<think>"
END = "</think>"
# What may follow the end marker before the answer: templates write "</think>\n\n"; bounded, as
# every repeat the model writes must be (and counted in `THINK_MARKUP_TOKENS`).
_SPACE = " \t\n"
_MOST_SPACE = 4
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")


def thinking_grammar(grammar: str, start: str = START, end: str = END) -> str:
    """``grammar`` (GBNF, its start rule ``root``) with an optional reasoning block before its
    sentences: ``(start? free end space{0,4})? answer``, where ``free`` is any text in which
    ``end`` does not occur. The grammar's own rules are kept as written, but for ``root``,
    renamed apart with the new rules (llama.cpp starts at ``root``)."""
    from .gbnf_ir import Lit, Ref, chars, opt, render, rep, seq, text_until

    names = _names(grammar)
    prefix = next(p for p in _prefixes() if _free(p, names))
    answer = f"{prefix}-answer"
    rules: dict[str, Node] = {
        "root": seq(opt(Ref(prefix)), Ref(answer)),
        prefix: seq(opt(Lit(start)), Ref(f"{prefix}-text"), rep(chars(_SPACE), 0, _MOST_SPACE)),
        **text_until(end, f"{prefix}-text", ends_with_marker=True),
    }
    return render(rules) + _renamed_root(grammar, answer)


def split_reasoning(text: str, start: str = START, end: str = END) -> tuple[str, str] | None:
    """``(reasoning, answer)`` of a text written under `thinking_grammar` that holds its
    reasoning block (a server whose reasoning parser is off, or does not know the template's
    markers, leaves it in the content); ``None`` for a text without one. The block ends at the
    first ``end``: the free text cannot hold it."""
    at = text.find(end)
    if at < 0:
        return None
    reasoning = text[:at].strip()
    if reasoning.startswith(start):
        reasoning = reasoning[len(start) :].strip()
    return reasoning, past_space(text[at + len(end) :])


def past_space(text: str) -> str:
    """``text`` past the whitespace the grammar allows after the reasoning block: what a server
    whose reasoning parser split the block off leaves before the answer (llama.cpp b11434 sent
    ``"  \nxylo-7"`` for a choice)."""
    spaces = len(text) - len(text.lstrip(_SPACE))
    return text[min(spaces, _MOST_SPACE) :]


def _names(grammar: str) -> set[str]:
    """The words of a GBNF text outside its strings, classes and comments: its rule names (and
    repeat counts, which no rule name of `thinking_grammar` can be)."""
    return {word for word, _ in _words(grammar)}


def _prefixes() -> Iterator[str]:
    yield "think"
    yield from (f"think{i}" for i in itertools.count())


def _free(prefix: str, names: set[str]) -> bool:
    return all(name != prefix and not name.startswith(prefix + "-") for name in names)


def _renamed_root(grammar: str, name: str) -> str:
    """``grammar`` with its rule ``root`` (its definition and every reference) named ``name``."""
    out: list[str] = []
    last = 0
    for word, at in _words(grammar):
        if word == "root":
            out.append(grammar[last:at])
            out.append(name)
            last = at + len(word)
    out.append(grammar[last:])
    return "".join(out)


def _words(grammar: str) -> list[tuple[str, int]]:
    """Each word (``[a-zA-Z0-9-]+``, llama.cpp's rule names) of a GBNF text outside its string
    literals, character classes and comments, with where it starts."""
    found: list[tuple[str, int]] = []
    i, n = 0, len(grammar)
    while i < n:
        c = grammar[i]
        if c == "#":
            newline = grammar.find("\n", i)
            i = n if newline < 0 else newline
        elif c in '"[':
            close = '"' if c == '"' else "]"
            i += 1
            while i < n and grammar[i] != close:
                i += 2 if grammar[i] == "\\" else 1
            i += 1
        elif c in _WORD:
            begin = i
            while i < n and grammar[i] in _WORD:
                i += 1
            found.append((grammar[begin:i], begin))
        else:
            i += 1
    return found
