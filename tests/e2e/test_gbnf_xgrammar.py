"""The compact grammars against xgrammar, the grammar engine of vLLM (``structured_outputs``):
xgrammar must read every grammar `lmclient._output.gbnf` writes, and accept exactly the strings the
test recognizer (`tests.gbnf_match`) accepts: msgspec's encodings of many output types, their
near-miss mutations, and each grammar's shortest and longest sentences.

One subprocess in the vLLM venv (where xgrammar is installed) checks the whole batch: it
compiles each grammar once and matches every string with a fresh matcher.
"""

from __future__ import annotations

import json
import random
import subprocess
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings

from lmclient._output.gbnf import compact_grammar
from scripts import vllm
from tests.gbnf_cases import CASES, compiled
from tests.gbnf_match import Grammar

pytestmark = pytest.mark.timeout(300, func_only=True)

_SAMPLES = 12  # values per output type
_MUTANTS = 3  # mutations per value
_SNIPPETS: list[str] = [
    *'{}[],:"\\019-.eE+tnfaZT ',
    "null",
    "\\u0000",
    "\\ud83d",
    "é",
    "😀",
    "1e999",
]

_XGRAMMAR_CHECK = """
import json, sys
import xgrammar as xgr
batch = json.load(sys.stdin)
compiler = xgr.GrammarCompiler(xgr.TokenizerInfo([]), cache_enabled=False)
verdicts = []
for text, strings in batch:
    compiled = compiler.compile_grammar(xgr.Grammar.from_ebnf(text, root_rule_name="root"))
    row = []
    for s in strings:
        matcher = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
        row.append(matcher.accept_string(s) and matcher.is_terminated())
    verdicts.append(row)
json.dump(verdicts, sys.stdout)
"""

# Grammars beyond the output types: the pieces most likely to be read differently.
_MANY = {"type": "object", "properties": {f"f{i}": {"type": "boolean"} for i in range(12)}}
_EXTRA_SCHEMAS: list[tuple[dict[str, Any], list[str]]] = [
    (
        _MANY,
        [
            "{}",
            '{"f0":true}',
            '{"f11":false}',
            '{"f3":true,"f7":false}',
            '{"f7":false,"f3":true}',
            '{,"f1":true}',
            '{"f1":true,}',
        ],
    ),
    (
        {"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 3},
        ['"ab"', '"abc"', '"a"', '"abcd"', '"aB"'],
    ),
    ({"type": "string", "pattern": "^(ab|c)*$"}, ['""', '"abc"', '"cab"', '"ba"', '"abab"']),
    (
        {"type": "integer", "minimum": -1005, "maximum": 2**64 - 1},
        ["-1005", "-1006", "0", "-0", "18446744073709551615", "18446744073709551616", "007"],
    ),
    (
        {"type": "string", "format": "date"},
        [
            '"2024-02-29"',
            '"2023-02-29"',
            '"2000-02-29"',
            '"1900-02-29"',
            '"0000-01-01"',
            '"2024-04-31"',
            '"2024-12-31"',
        ],
    ),
    (
        {"type": "string", "pattern": r"[^a\n]$"},
        ['"b"', '"a"', '"\\u0001"', '"\\n"', '"\\""', '"x\\\\"', '"\\u000b"', '"\\u000B"'],
    ),
    (
        {"type": "string", "minLength": 1, "maxLength": 2},
        ['""', '"a"', '"\\ud83d\\ude00x"', '"\\ud83d"', '"\x7f"', '"abc"', '"\\/"'],
    ),
]


def _samples() -> list[tuple[str, list[str]]]:
    """(grammar, strings) per output type: encodings of drawn values, mutations of them, and
    the grammar's extreme sentences."""
    batch: list[tuple[str, list[str]]] = []
    rng = random.Random(16)
    for name, case in sorted(CASES.items()):
        result, grammar = compiled(name)
        drawn: list[str] = []

        @settings(max_examples=_SAMPLES, derandomize=True, database=None, deadline=None)
        @given(value=case.values)
        def draw(value: Any) -> None:
            drawn.append(msgspec.json.encode(value).decode())  # noqa: B023 - runs right here

        draw()
        strings = list(dict.fromkeys(drawn))
        strings += [_mutate(s, rng) for s in drawn for _ in range(_MUTANTS)]
        strings.append(grammar.shortest())
        if result.longest is not None:
            strings.append(grammar.longest())
        batch.append((result.text, strings))
    for schema, strings in _EXTRA_SCHEMAS:
        extra = compact_grammar(schema)
        assert extra is not None
        batch.append((extra.text, strings))
    return batch


def _mutate(text: str, rng: random.Random) -> str:
    at = rng.randrange(len(text) + 1)
    piece = rng.choice(_SNIPPETS)
    op = rng.choice(["insert", "delete", "replace"])
    if op == "insert":
        return text[:at] + piece + text[at:]
    if op == "delete":
        return text[:at] + text[at + 1 :]
    return text[:at] + piece + text[at + 1 :]


def test_xgrammar_reads_the_compact_grammars_as_lmclient_means_them(
    vllm_installed: vllm.Installation,
) -> None:
    batch = _samples()
    expected = [[Grammar(text).accepts(s) for s in strings] for text, strings in batch]
    done = subprocess.run(
        [str(vllm_installed.python), "-c", _XGRAMMAR_CHECK],
        input=json.dumps(batch),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    verdicts = json.loads(done.stdout)
    disagreements = [
        (text.splitlines()[0][:80], s, want, got)
        for (text, strings), wants, gots in zip(batch, expected, verdicts, strict=True)
        for s, want, got in zip(strings, wants, gots, strict=True)
        if want != got
    ]
    assert not disagreements, disagreements[:20]
    flat = [want for wants in expected for want in wants]
    assert flat.count(True) > 300 and flat.count(False) > 100  # both sides are exercised
