"""The values the fake generates look like what a model writes, on every server it plays.

An app stores what the fake answers: an ``int`` past int64, an empty name or an empty list
fails it in tests for reasons of the fake. Whatever the constraint's form (vLLM's compact
grammar, llama.cpp's, SGLang's regex, a JSON schema), a generated value has small integers
within int64, short words for strings and 1-3 items for a list, within the type's bounds, and
is the same for the same seed.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import msgspec
import pytest

import lmclient
from lmclient.testing import FakeLLM
from lmclient.testing._answers import grammar_text
from lmclient.testing._gbnf_gen import MAX_EXTRA

SERVERS = ["vllm", "llamacpp", "sglang", "generic"]
SEEDS = range(40)
INT64 = range(-(2**63), 2**63)


class Address(msgspec.Struct):
    city: str
    zip: int | None = None


class Record(msgspec.Struct):
    name: str
    age: int
    tags: list[str]
    counts: list[int]
    score: float
    address: Address | None
    level: Annotated[int, msgspec.Meta(ge=5, le=9)]
    code: Annotated[str, msgspec.Meta(min_length=3, max_length=5)]
    many: Annotated[list[int], msgspec.Meta(min_length=4, max_length=6)]
    note: str | None = None
    kind: Literal["low", "high"] | None = None  # an optional field of fixed texts only


def _values(server: str, tp: Any, seed: int = 0) -> list[Any]:
    """The values of one call for ``len(SEEDS)`` choices: choice ``i`` is generated from
    ``seed + i``, as a fake with that seed would."""
    with FakeLLM(server=server, seed=seed).mock() as url, lmclient.Client(url) as client:
        return client.create("Invent one.", tp, n=len(SEEDS)).values


def _plausible_int(value: int) -> bool:
    return value in INT64 and abs(value) < 10**6


@pytest.mark.parametrize("server", SERVERS)
def test_generated_values_are_plausible(server: str) -> None:
    records: list[Record] = _values(server, Record)
    for record in records:
        assert all(_plausible_int(n) for n in (record.age, *record.counts, *record.many)), record
        assert record.name and record.code and all(record.tags), record  # non-empty strings
        assert all(text.isalpha() for text in (record.name, record.code, *record.tags)), record
        assert 1 <= len(record.tags) <= 3 and 1 <= len(record.counts) <= 3, record
        assert 4 <= len(record.many) <= 6 and 3 <= len(record.code) <= 5, record
        assert 5 <= record.level <= 9, record
        assert abs(record.score) < 1e15, record
        assert record.address is not None and record.address.city, record  # not null
        assert record.note and record.kind, record  # every optional field
    assert len({record.name for record in records}) > 3  # and they vary with the seed
    assert len({record.age for record in records}) > 3


@pytest.mark.parametrize("server", SERVERS)
def test_scalars_are_plausible(server: str) -> None:
    ints, floats, lists = (_values(server, tp) for tp in (int, float, list[str]))
    assert all(_plausible_int(n) for n in ints), ints
    assert all(abs(x) < 1e15 for x in floats), floats
    assert all(math.copysign(1, x) > 0 for x in floats if x == 0), floats  # no -0.0
    assert all(1 <= len(words) <= 3 and all(words) for words in lists), lists


@pytest.mark.parametrize("server", SERVERS)
def test_the_same_seed_gives_the_same_values(server: str) -> None:
    assert _values(server, Record, seed=7) == _values(server, Record, seed=7)
    assert _values(server, Record, seed=7) != _values(server, Record, seed=8)


# the integer rule of lmclient's compact grammar: it admits uint64, which msgspec decodes
_UINT64_TAIL = '"1" [0-7] [0-9]{18}'


def test_an_integer_grammar_that_admits_uint64_is_answered_within_int64() -> None:
    grammar = f'root ::= "[" integer ("," integer)* "]"\ninteger ::= [0-9] | {_UINT64_TAIL}'
    for seed in range(200):
        values = msgspec.json.decode(grammar_text(grammar, seed))
        assert all(value in INT64 for value in values), values


def test_a_grammar_of_only_uint64_is_still_answered() -> None:
    """Plausibility never overrides the constraint: when nothing else matches, it is sent."""
    text = grammar_text(f"root ::= {_UINT64_TAIL}", 0)
    assert len(text) == 20 and int(text) not in INT64


@pytest.mark.parametrize(
    ("tp", "check"),
    [
        (Annotated[str, msgspec.Meta(min_length=12, max_length=14)], lambda s: 12 <= len(s) <= 14),
        (Annotated[str, msgspec.Meta(max_length=2)], lambda s: 1 <= len(s) <= 2),
        (Annotated[list[int], msgspec.Meta(min_length=5)], lambda v: 5 <= len(v) <= 5 + MAX_EXTRA),
        (Annotated[int, msgspec.Meta(ge=10**16, le=10**16 + 5)], lambda n: n >= 10**16),
    ],
    ids=["long-str", "short-str", "min-items", "big-bounds"],
)
@pytest.mark.parametrize("server", SERVERS)
def test_bounds_are_kept(server: str, tp: Any, check: Any) -> None:
    values = _values(server, tp)
    assert all(check(value) for value in values), values
