"""The fake answers with values that validate (issue 28): for output types with bounds —
bounded floats, ``multiple_of``, formats, constrained structs and pydantic models — every
answer it generates decodes into the type, whichever constraint the client sent (the compact
grammar, or the JSON schema with ``whitespace="server"``)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Annotated, Any

import msgspec
import pydantic
import pytest

import lmclient
from lmclient._output.types import compile_output
from lmclient.testing import FakeLLM
from lmclient.testing._answers import grammar_text
from lmclient.testing._schema_instance import schema_instance

_ANSWERS = 2_000  # generated answers per type and constraint


class Reading(msgspec.Struct):
    score: Annotated[float, msgspec.Meta(ge=0, le=1)]


class Sensor(msgspec.Struct):
    temperature: Annotated[float, msgspec.Meta(gt=-10.5, lt=40)]
    step: Annotated[int, msgspec.Meta(ge=0, le=1000, multiple_of=5)]
    ratios: Annotated[
        list[Annotated[float, msgspec.Meta(ge=0.25, le=0.75)]], msgspec.Meta(max_length=3)
    ]
    at: Annotated[dt.datetime, msgspec.Meta(tz=True)]
    day: dt.date
    id: uuid.UUID
    tag: Annotated[str, msgspec.Meta(pattern="^[a-z]{2}-[0-9]{1,3}$")]


class Review(pydantic.BaseModel):
    stars: int = pydantic.Field(ge=1, le=5)
    weight: float = pydantic.Field(gt=0, le=2.5)
    title: str = pydantic.Field(min_length=1, max_length=12)


TYPES: dict[str, Any] = {
    "struct-unit-float": Reading,
    "struct-bounds-formats": Sensor,
    "pydantic": Review,
    "float-upper": Annotated[float, msgspec.Meta(le=-1)],
    "multiple-of": Annotated[int, msgspec.Meta(multiple_of=7)],
    "multiple-of-range": Annotated[int, msgspec.Meta(ge=-100, le=10**6, multiple_of=3)],
    "float-multiple-of": Annotated[float, msgspec.Meta(multiple_of=0.5, ge=0, le=100)],
    "dict-min-length": Annotated[dict[str, bool], msgspec.Meta(min_length=2, max_length=4)],
    "dict-int-keys": Annotated[dict[int, str], msgspec.Meta(max_length=3)],
}


def _answers(tp: Any, mode: str) -> list[str]:
    """What the fake answers to the constraint the client sends for ``tp``: the compact
    grammar where the type has one, else the schema."""
    spec = compile_output(tp)
    grammar = spec.compact if mode == "compact" else None
    if grammar is not None:
        return [grammar_text(grammar.text, seed) for seed in range(_ANSWERS)]
    schema = spec.schema
    return [msgspec.json.encode(schema_instance(schema, seed=s)).decode() for s in range(_ANSWERS)]


@pytest.mark.slow  # 2,000 answers a case: ~3 s on 2 cores
@pytest.mark.parametrize("mode", ["compact", "server"])
@pytest.mark.parametrize("name", sorted(TYPES))
def test_every_generated_answer_validates(name: str, mode: str) -> None:
    tp = TYPES[name]
    decode = compile_output(tp).decode
    answers = _answers(tp, mode)
    invalid = []
    for text in answers:
        try:
            decode(text)
        except (msgspec.ValidationError, pydantic.ValidationError, ValueError) as exc:
            invalid.append((text, str(exc)[:80]))
    assert not invalid, invalid[:5]
    from_grammar = mode == "compact" and compile_output(tp).compact is not None
    assert not from_grammar or len(set(answers)) > 100  # the grammar's answers explore the range


@pytest.mark.slow  # 1,000 calls: ~15 s on 2 cores
def test_a_user_test_of_a_bounded_float_passes_a_thousand_times_in_a_row() -> None:
    """The issue's user: a struct with a bounded float, nothing scripted, each run its seed."""
    with lmclient.Client("http://fake/v1", model="m", dialect="llamacpp") as client:
        for seed in range(1_000):
            with FakeLLM(seed=seed).mock():
                reading = client.generate("Rate it", Reading)
            assert 0 <= reading.score <= 1


def test_over_a_real_socket_too() -> None:
    with (
        FakeLLM(seed=28).serve() as base_url,
        lmclient.Client(base_url, model="m", dialect="vllm") as client,
    ):
        for _ in range(20):
            response = client.create("Rate it", Reading)
            assert response.compact  # the grammar was sent, and answered
            assert 0 <= response.value.score <= 1
