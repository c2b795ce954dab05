"""The reasoning block before a grammar's answer (`lmclient._output.thinking`): the whole
grammar, read by the testing toolkit's GBNF recognizer (llama.cpp's parser's rules), and the
split of an answer written under it. Its free text (`gbnf_ir.text_until`) is held to a brute
force in tests/output/test_gbnf.py."""

from __future__ import annotations

import pytest

from lmclient._output.thinking import (
    END,
    START,
    split_reasoning,
    thinking_grammar,
)
from lmclient.testing._grammar import gbnf_accepts

ANSWER = 'root ::= "{" digit "}"\ndigit ::= [0-9]'


@pytest.mark.parametrize(
    ("text", "accepted"),
    [
        ("{1}", True),  # no reasoning: the answer at once
        ("<think>\nLet me see.\n</think>\n\n{1}", True),
        ("Let me see.</think>{1}", True),  # the template opened the reasoning
        ("</think>{1}", True),  # empty reasoning (a budget of 0)
        ("<think>a < b, </thin k></think> \t\n {1}", True),  # almost the marker, and 4 spaces
        ("<think>x</think>     {1}", False),  # 5 spaces
        ("<think>x</think>{1}</think>{1}", False),  # one block
        ("<think>x {1}", False),  # never closed
        ("{1}</think>", False),
        ("<think>x</think>", False),  # no answer
        ("<think>{1}", False),
    ],
)
def test_the_grammar_lets_the_model_reason_first(text: str, accepted: bool) -> None:
    assert gbnf_accepts(thinking_grammar(ANSWER), text) is accepted


def test_the_answer_grammar_is_kept_but_its_root_renamed() -> None:
    """Every reference to ``root`` follows it (a recursive grammar); names in strings, classes
    and comments do not; a grammar that already uses ``think-...`` names gets others."""
    recursive = (
        '# root is the start\nroot ::= "(" root ")" | "root" | [r-t]\n'
        'think ::= "x"\nthink-0 ::= "y"'
    )
    grammar = thinking_grammar(recursive)
    assert grammar.startswith("root ::= think0? think0-answer\n")
    assert 'think0-answer ::= "(" think0-answer ")" | "root" | [r-t]' in grammar
    assert "# root is the start" in grammar
    for text in ["((root))", "<think>((</think>((s))", "s"]:
        assert gbnf_accepts(grammar, text), text
    assert not gbnf_accepts(grammar, "((x))")


@pytest.mark.parametrize(
    ("text", "split"),
    [
        ("{1}", None),
        ("<think>\nLet me see.\n</think>\n\n{1}", ("Let me see.", "{1}")),
        ("Let me see.</think>{1}", ("Let me see.", "{1}")),
        ("</think>{1}", ("", "{1}")),
        ('hm</think>  \n\n {"a":" x"}', ("hm", ' {"a":" x"}')),  # at most 4 spaces go
        ("a</think>b</think>c", ("a", "b</think>c")),  # the free text cannot hold the marker
    ],
)
def test_split(text: str, split: tuple[str, str] | None) -> None:
    assert split_reasoning(text) == split


def test_the_markers_are_those_of_most_thinking_models() -> None:
    assert (START, END) == ("<think>", "</think>")
    assert split_reasoning("[T]x[/T]y", "[T]", "[/T]") == ("x", "y")
