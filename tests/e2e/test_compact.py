"""Compact constraints on the real servers: lmclient's own grammar, without free whitespace, is
parsed and enforced by llama.cpp (``grammar``) and by vLLM's xgrammar
(``structured_outputs.grammar``), and bounded types get a ``max_tokens`` they cannot outrun.

The same call with the server's own JSON converter (``whitespace="server"``) is run next to it
as a recorded comparison (``record_property``), never as a test that fails: a 270M model pads
JSON with whitespace there, which is what the compact default avoids.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable
from typing import Annotated, Any, Literal

import msgspec
import pytest

import lmclient
from lmclient._dialects import get_dialect
from lmclient._output.types import compile_output

Name = Annotated[str, msgspec.Meta(max_length=20)]
Age = Annotated[int, msgspec.Meta(ge=0, le=30)]


class Pet(msgspec.Struct):
    name: Name
    species: Literal["cat", "dog"]
    age: Age


class Owner(msgspec.Struct):
    name: Name
    pets: Annotated[list[Pet], msgspec.Meta(max_length=2)]
    nickname: Name | None = None


class Tree(msgspec.Struct):
    label: Name
    children: Annotated[list[Tree], msgspec.Meta(max_length=2)] = []


class Cat(msgspec.Struct, tag=True):
    lives: Annotated[int, msgspec.Meta(ge=1, le=9)]


class Dog(msgspec.Struct, tag=True):
    good: bool


class Event(msgspec.Struct):
    day: datetime.date
    at: datetime.time
    id: uuid.UUID


# Every shape the compiler produces: each must be parsed by the real grammar engine and its
# answer must validate.
TYPES: list[tuple[str, Any]] = [
    ("struct", Pet),
    ("nested-optional", Owner),
    ("recursive", Tree),
    ("tagged-union", Cat | Dog),
    ("dates", Event),
    ("dict", Annotated[dict[Name, Age], msgspec.Meta(max_length=3)]),
    ("tuple", tuple[Age, bool, Literal["x", "y"]]),
    ("negative-range", Annotated[int, msgspec.Meta(ge=-40, le=-3)]),
    ("float", Annotated[list[float], msgspec.Meta(max_length=2)]),
    (
        "bounded-float",
        Annotated[
            list[Annotated[float, msgspec.Meta(gt=-10.5, le=0.75)]], msgspec.Meta(max_length=2)
        ],
    ),
    (
        "multiple-of",
        Annotated[list[Annotated[int, msgspec.Meta(multiple_of=7)]], msgspec.Meta(max_length=2)],
    ),
    ("any", Any),
]
GREEDY: lmclient.CallParams = {"temperature": 0.0, "seed": 1, "max_tokens": 300}


def _whitespace_outside_strings(text: str) -> bool:
    in_string = escaped = False
    for char in text:
        if escaped:
            escaped = False
        elif in_string:
            escaped = char == "\\"
            in_string = char != '"'
        elif char == '"':
            in_string = True
        elif char in " \t\r\n":
            return True
    return False


def _sent_budget(output_type: Any, dialect: str) -> int | None:
    plan = get_dialect(dialect).plan(compile_output(output_type), "chat")
    assert plan.compact
    return None if plan.budget is None else plan.budget.most


@pytest.mark.parametrize(("name", "output_type"), TYPES, ids=[t[0] for t in TYPES])
def test_every_compiled_shape_is_parsed_and_enforced_by_llamacpp(
    name: str, output_type: Any, base_url: str
) -> None:
    with lmclient.Client(base_url) as client:
        response = client.create(f"Invent one example ({name}).", output_type, **GREEDY)
    assert response.compact
    assert response.finish_reason == "stop"
    assert not _whitespace_outside_strings(response.text)
    assert msgspec.json.encode(response.value) == msgspec.json.encode(
        msgspec.json.decode(response.text, type=output_type)
    )


def test_list_of_pets_finishes_compact_where_the_server_whitespace_runs_on(
    base_url: str, record_property: Callable[[str, object], None]
) -> None:
    """The issue's measurement: `list[Pet]` at temperature 0 ran to ``max_tokens`` under the
    server's JSON grammar (its indentation grows), and finishes in a few dozen tokens compact."""
    with lmclient.Client(base_url) as client:
        response = client.create("List three pets as JSON.", list[Pet], **GREEDY)
        assert response.compact and response.finish_reason == "stop"
        assert response.values[0] and all(isinstance(p, Pet) for p in response.value)
        tokens = response.usage.completion_tokens if response.usage else None
        assert tokens is not None and tokens < 150
        record_property("compact", f"{tokens} tokens: {response.text}")
    with lmclient.Client(base_url, whitespace="server") as server_client:
        try:
            padded = server_client.create("List three pets as JSON.", list[Pet], **GREEDY)
        except lmclient.TruncatedError as exc:
            record_property("server_whitespace", f"truncated at max_tokens: {exc.text[:80]!r}")
        else:
            assert not padded.compact
            spent = padded.usage.completion_tokens if padded.usage else None
            record_property("server_whitespace", f"{spent} tokens: {padded.text[:80]!r}")


def test_a_bounded_type_gets_its_budget_and_stays_within_it(base_url: str) -> None:
    most = _sent_budget(Pet, "llamacpp")
    assert most is not None
    with lmclient.Client(base_url) as client:  # no max_tokens: the budget is sent
        response = client.create("Invent a pet.", Pet, temperature=0.7, seed=3)
    tokens = response.usage.completion_tokens if response.usage else None
    assert response.finish_reason == "stop" and tokens is not None and tokens <= most


def test_bounded_types_never_truncate_at_temperature(base_url: str) -> None:
    bounded: list[Any] = [Pet, Owner, Annotated[list[Pet], msgspec.Meta(max_length=3)]]
    with lmclient.Client(base_url) as client:
        for seed in range(4):
            for output_type in bounded:
                response = client.create("Invent one.", output_type, temperature=0.9, seed=seed)
                assert response.finish_reason == "stop"


def test_a_max_tokens_below_the_shortest_value_is_refused_before_sending(base_url: str) -> None:
    long_keys = msgspec.defstruct(
        "LongKeys", [(f"a_rather_long_field_name_{i}", bool) for i in range(8)]
    )
    with lmclient.Client(base_url) as client, pytest.raises(ValueError, match="max_tokens=2"):
        client.create("Q", long_keys, max_tokens=2)


@pytest.mark.parametrize(
    ("name", "output_type"), [TYPES[0], TYPES[2], TYPES[5]], ids=[TYPES[i][0] for i in (0, 2, 5)]
)
def test_vllm_enforces_the_compact_grammar(name: str, output_type: Any, vllm_url: str) -> None:
    with lmclient.Client(vllm_url) as client:
        response = client.create(f"Invent one example ({name}).", output_type, **GREEDY)
        assert client.dialect == "vllm"
    assert response.compact and response.finish_reason == "stop"
    msgspec.json.decode(response.text, type=output_type)
    assert not _whitespace_outside_strings(response.text)
