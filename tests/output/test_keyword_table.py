"""The keyword table of docs/output-types.md: its lmclient-compact column is what
`lmclient._output.gbnf` does with each keyword's probe, the page shows exactly
`tests.keyword_table`, and no keyword a server's schema mode holds is left unheld by the compact
grammar."""

from __future__ import annotations

import pathlib

import pytest

from lmclient._output.gbnf import compact_grammar
from tests.gbnf_match import Grammar
from tests.keyword_table import GRAMMAR, IGNORED, KEYWORDS, SCHEMA, Keyword, render

_DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "output-types.md"


def compact_cell(row: Keyword) -> str:
    result = compact_grammar(row.schema)
    if result is None:
        return SCHEMA
    grammar = Grammar(result.text)
    assert grammar.accepts(row.good), (row.name, row.good)
    return IGNORED if grammar.accepts(row.bad) else GRAMMAR


@pytest.mark.parametrize("row", KEYWORDS, ids=lambda row: row.name)
def test_the_compact_grammar_holds_what_a_server_s_schema_mode_holds(row: Keyword) -> None:
    cell = compact_cell(row)
    if GRAMMAR in (row.xgrammar, row.llamacpp):
        assert cell in (GRAMMAR, SCHEMA), row.name


def test_the_docs_show_the_table() -> None:
    table = render({row.name: compact_cell(row) for row in KEYWORDS})
    assert table in _DOCS.read_text(), "regenerate with: python -m tests.output.test_keyword_table"


if __name__ == "__main__":
    print(render({row.name: compact_cell(row) for row in KEYWORDS}), end="")
