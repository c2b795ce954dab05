"""Never weaker than the server (issue 28): for every output type family the compact compiler
handles, three acceptors judge the same compact strings — lmclient's compact grammar (compiled
by xgrammar, vLLM's grammar engine), the server's own schema grammar for the type (xgrammar's
``Grammar.from_json_schema`` with compact separators, as vLLM builds it from
``structured_outputs.json``) and msgspec's validation.

The strings: msgspec's encodings of values drawn by hypothesis, and mutations that push each
one across a bound (a number one step, one ulp or one unit either way, or negated, or scaled; a
string a character longer or shorter; a list an item longer or shorter; an extra key; a
date/uuid spoiled).

The test fails on a *weaker* string — the compact grammar accepts it, the schema grammar
rejects it, and msgspec rejects it too: a value the server's schema mode would have stopped —
and on a *blocked* one — msgspec's own encoding of a valid value the compact grammar rejects.

The third case — the schema grammar itself rejects a string msgspec accepts, as msgspec
encodes it — is counted and reported (printed with the number of strings judged), not failed.
xgrammar's bounded ``number`` has no exponent and at most six fraction digits, so it refuses
``1e-7`` in ``[0, 1]``, a value msgspec writes just so and validates. The compact grammar
accepting it does not make it weaker: "weaker" is about constraints — a string the type
forbids that gets through where the server would have stopped it — and every string counted
here is one the type allows. Refusing those too would be the other failure: a grammar that
blocks msgspec's own encoding of a valid value (the model is then pushed to another value, or
to no end at all). So on the strings the type forbids, the compact grammar refuses at least
what the schema grammar refuses; on the strings it allows, it follows msgspec, not the
server's narrower number syntax.
"""

from __future__ import annotations

import json
import math
import random
import re
import subprocess
from typing import Any

import httpx
import msgspec
import pytest
from hypothesis import given, settings

from lmclient._output.gbnf import compact_grammar
from lmclient._output.types import compile_output
from scripts import llamacpp, vllm
from tests.gbnf_cases import CASES
from tests.gbnf_match import Grammar
from tests.keyword_table import GRAMMAR, IGNORED, KEYWORDS

pytestmark = pytest.mark.timeout(600, func_only=True)

_SAMPLES = 25  # values per output type
_MUTANTS = 6  # boundary mutations per value

_ORACLE = """
import json, sys
import xgrammar as xgr
batch = json.load(sys.stdin)
compiler = xgr.GrammarCompiler(xgr.TokenizerInfo([]), cache_enabled=False)

def verdicts(grammar, strings):
    compiled = compiler.compile_grammar(grammar)
    row = []
    for s in strings:
        matcher = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
        row.append(matcher.accept_string(s) and matcher.is_terminated())
    return row

out = []
for text, schema, strings in batch:
    compact = verdicts(xgr.Grammar.from_ebnf(text, root_rule_name="root"), strings)
    try:
        server = xgr.Grammar.from_json_schema(
            json.dumps(schema), any_whitespace=False, separators=(",", ":")
        )
    except Exception as exc:  # the server refuses the schema: reported, not compared
        out.append([compact, None, str(exc)[:200]])
        continue
    out.append([compact, verdicts(server, strings), None])
json.dump(out, sys.stdout)
"""

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e-?\d+)?")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def _neighbours(token: str, rng: random.Random) -> str:
    """A number moved across whatever bound is near: by one ulp, one unit, sign, or scale."""
    value = float(token)
    moved = rng.choice(
        [
            math.nextafter(value, math.inf),
            math.nextafter(value, -math.inf),
            value + 1,
            value - 1,
            -value,
            value * 10,
            value / 10,
            value + 0.5,
            value - 0.25,
        ]
    )
    if "." not in token and "e" not in token and rng.random() < 0.5:
        return str(int(token) + rng.choice([-1, 1, 2, -5, 5, 7]))
    return msgspec.json.encode(moved).decode() if math.isfinite(moved) else token


def _mutate(text: str, rng: random.Random) -> str:
    numbers = list(_NUMBER.finditer(text))
    strings = list(_STRING.finditer(text))
    ops = ["key", "item"] + ["number"] * 3 * bool(numbers) + ["string"] * bool(strings)
    op = rng.choice(ops)
    if op == "number":
        m = rng.choice(numbers)
        return text[: m.start()] + _neighbours(m.group(), rng) + text[m.end() :]
    if op == "string":
        m = rng.choice(strings)
        inner = m.group()[1:-1]
        inner = rng.choice(
            [inner + "x", inner[:-1], inner[1:], inner.upper(), inner.replace("-", "/"), "z" * 30]
        )
        return text[: m.start()] + '"' + inner + '"' + text[m.end() :]
    if op == "key" and text.startswith("{"):
        return '{"zz":1' + ("," if text != "{}" else "") + text[1:]
    if text.startswith("[") and text != "[]":  # one item more, or fewer
        body = text[1:-1]
        return rng.choice(["[" + body + "," + body + "]", "[]", "[" + body + "," + "0" + "]"])
    return text + rng.choice(["", "0", "1"])


def _batch() -> list[tuple[str, str, dict[str, Any], list[str]]]:
    rng = random.Random(28)
    batch = []
    for name, case in sorted(CASES.items()):
        schema = compile_output(case.tp).schema
        assert schema is not None
        result = compact_grammar(schema)
        assert result is not None, name
        drawn: list[str] = []

        @settings(max_examples=_SAMPLES, derandomize=True, database=None, deadline=None)
        @given(value=case.values)
        def draw(value: Any) -> None:
            drawn.append(msgspec.json.encode(value).decode())  # noqa: B023 - runs right here

        draw()
        strings = list(dict.fromkeys(drawn))
        strings += [_mutate(s, rng) for s in drawn for _ in range(_MUTANTS)]
        batch.append((name, result.text, schema, list(dict.fromkeys(strings))))
    return batch


def _beyond_64_bits(text: str) -> bool:
    """An integer the grammar does not offer (it stops at int64/uint64: see
    lmclient._output.gbnf)."""
    return any(
        not -(2**63) <= int(m.group()) <= 2**64 - 1
        for m in _NUMBER.finditer(text)
        if m.group().lstrip("-").isdigit()
    )


def _valid(name: str, text: str) -> tuple[bool, bool]:
    """(msgspec accepts it, and it is msgspec's own encoding of the value)."""
    try:
        value = msgspec.json.decode(text.encode(), type=CASES[name].tp)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return False, False
    return True, msgspec.json.encode(value).decode() == text


def test_the_compact_grammar_is_never_weaker_than_the_server_s_schema_mode(
    vllm_installed: vllm.Installation,
) -> None:
    batch = _batch()
    done = subprocess.run(
        [str(vllm_installed.python), "-c", _ORACLE],
        input=json.dumps([(text, schema, strings) for _, text, schema, strings in batch]),
        capture_output=True,
        text=True,
        timeout=500,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    weaker, blocked, refused = [], [], []
    server_blocks: list[tuple[str, str]] = []
    judged = 0
    for (name, text, _, strings), (compact, server, error) in zip(
        batch, json.loads(done.stdout), strict=True
    ):
        local = Grammar(text)
        for s, ours in zip(strings, compact, strict=True):
            assert ours == local.accepts(s), (name, s)  # llama.cpp's reading: tests.gbnf_match
            valid, canonical = _valid(name, s)
            if canonical and not ours and not _beyond_64_bits(s):
                blocked.append((name, s))
            if server is None:
                continue
            judged += 1
            theirs = server[strings.index(s)]
            if ours and not theirs and not valid:
                weaker.append((name, s))
            if canonical and not theirs:
                server_blocks.append((name, s))
        if error is not None:
            refused.append((name, error))
    assert not weaker, weaker[:20]
    assert not blocked, blocked[:20]
    assert judged > 2000, judged
    print(
        f"judged {judged}; the schema grammar blocked {len(server_blocks)} valid encodings "
        f"(the compact grammar takes them: valid values, not a weaker bound), e.g.",
        server_blocks[:5],
    )
    print("schemas xgrammar refuses:", refused)


def test_the_keyword_table_s_xgrammar_column_is_what_xgrammar_does(
    vllm_installed: vllm.Installation,
) -> None:
    """docs/output-types.md's table (tests.keyword_table): each keyword's probe through
    xgrammar's schema mode — it holds the keyword when it takes the allowed string and
    refuses the forbidden one."""
    rows = [(row.schema, [row.good, row.bad]) for row in KEYWORDS]
    done = subprocess.run(
        [str(vllm_installed.python), "-c", _SCHEMA_ONLY],
        input=json.dumps(rows),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = {
        row.name: GRAMMAR if good and not bad else IGNORED if good else "refuses the good"
        for row, (good, bad) in zip(KEYWORDS, json.loads(done.stdout), strict=True)
    }
    assert found == {row.name: row.xgrammar for row in KEYWORDS}


_SCHEMA_ONLY = """
import json, sys
import xgrammar as xgr
compiler = xgr.GrammarCompiler(xgr.TokenizerInfo([]), cache_enabled=False)
out = []
for schema, strings in json.load(sys.stdin):
    grammar = xgr.Grammar.from_json_schema(
        json.dumps(schema), any_whitespace=False, separators=(",", ":")
    )
    compiled = compiler.compile_grammar(grammar)
    row = []
    for s in strings:
        matcher = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
        row.append(matcher.accept_string(s) and matcher.is_terminated())
    out.append(row)
json.dump(out, sys.stdout)
"""


def test_the_keyword_table_s_llamacpp_column_is_what_llamacpp_does(
    llama: llamacpp.LlamaServer,
) -> None:
    """docs/output-types.md's table (tests.keyword_table): each keyword's probe schema through
    the real server's own converter — ``json_schema`` on ``/completion``, whose answer carries
    the grammar the server made of it (``generation_settings.grammar``) — and the allowed and
    forbidden strings through that grammar, read as llama.cpp reads GBNF (lmclient.testing's
    recognizer, which the compact grammars' tests check against xgrammar). The server's
    grammar adds optional spaces; the probes are compact, so they need none."""
    found = {}
    with httpx.Client(base_url=llama.root_url, timeout=120) as client:
        for row in KEYWORDS:
            body = {"prompt": "JSON:", "json_schema": row.schema, "n_predict": 1}
            answer = client.post("/completion", json=body)
            assert answer.status_code == 200, (row.name, answer.text[:500])
            grammar = Grammar(answer.json()["generation_settings"]["grammar"])
            good, bad = grammar.accepts(row.good), grammar.accepts(row.bad)
            found[row.name] = GRAMMAR if good and not bad else IGNORED if good else "refuses good"
    assert found == {row.name: row.llamacpp for row in KEYWORDS}
