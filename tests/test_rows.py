"""`lmclient._rows`: a batch's outcomes as the columns `lmclient.ray` writes, from real answers
of the fake over sockets. Pure (no Arrow, no Ray), so it runs on every Python; the stage itself
runs on a Ray cluster in tests/e2e/test_ray_data.py."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Annotated, Any, Literal, NamedTuple

import msgspec
import pydantic
import pytest
from typing_extensions import TypedDict

import lmclient
from lmclient._rows import Columns, record_fields
from lmclient.testing import FakeLLM


class Person(msgspec.Struct):
    name: str
    age: Annotated[int, msgspec.Meta(ge=0, le=150)]


class Pet(msgspec.Struct):
    kind: Literal["cat", "dog"]
    born: datetime.date


class Owner(msgspec.Struct):
    name: str
    pets: list[Pet]


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Pair(NamedTuple):
    left: str
    right: str


class Movie(TypedDict, total=False):
    title: str
    year: int


def outcomes(fake: FakeLLM, output_type: Any, count: int = 3) -> list[Any]:
    """`generate_many`'s machinery with whole responses, as the stage runs it."""
    with fake.serve() as url, lmclient.Client(url, max_retries=0) as client:
        prompts = [f"row {i}" for i in range(count)]
        return client._many(
            "generate", "chat", prompts, output_type, 4, True, None, None, {}, whole=True
        )


def test_a_struct_gives_one_column_per_field_then_usage_and_errors() -> None:
    fake = FakeLLM()
    fake.reply(Person("Ada", 36))
    columns = Columns(Person)
    assert columns.names == (
        "name",
        "age",
        "prompt_tokens",
        "completion_tokens",
        "error_type",
        "error_message",
    )
    out = columns.split(outcomes(fake, Person))
    assert out["name"] == ["Ada"] * 3 and out["age"] == [36] * 3
    assert out["prompt_tokens"] == [2] * 3  # "row i": 5 characters, one token per 4
    assert out["completion_tokens"] == [6] * 3  # {"name":"Ada","age":36}: 23 characters
    assert out["error_type"] == out["error_message"] == [None] * 3


def test_nested_records_become_dicts_and_dates_stay_dates() -> None:
    fake = FakeLLM()
    fake.reply(Owner("Bo", [Pet("cat", datetime.date(2020, 1, 2))]))
    out = Columns(Owner).split(outcomes(fake, Owner, 1))
    assert out["pets"] == [[{"kind": "cat", "born": datetime.date(2020, 1, 2)}]]


@pytest.mark.parametrize(
    ("output_type", "reply", "expected"),
    [
        (Point, Point(1, 2), {"x": [1], "y": [2]}),
        (Pair, Pair("a", "b"), {"left": ["a"], "right": ["b"]}),
        (Movie, {"title": "Heat"}, {"title": ["Heat"], "year": [None]}),  # a key left out
    ],
)
def test_dataclasses_namedtuples_and_typeddicts_are_records(
    output_type: Any, reply: Any, expected: dict[str, list[Any]]
) -> None:
    fake = FakeLLM()
    fake.reply(reply)
    out = Columns(output_type).split(outcomes(fake, output_type, 1))
    assert {name: out[name] for name in expected} == expected


def test_a_pydantic_model_is_a_record() -> None:
    class Film(pydantic.BaseModel):
        title: str
        pair: Pair

    fake = FakeLLM()
    fake.reply({"title": "Heat", "pair": ["a", "b"]})
    out = Columns(Film).split(outcomes(fake, Film, 1))
    assert out["title"] == ["Heat"] and list(out["pair"][0]) == ["a", "b"]


@pytest.mark.parametrize(
    ("output_type", "reply", "value"),
    [
        (int, 7, 7),
        (Literal["yes", "no"], "yes", "yes"),
        (list[Person], [Person("Ada", 36)], [{"name": "Ada", "age": 36}]),
        (str, "free text", "free text"),
    ],
)
def test_any_other_type_is_one_value_column(output_type: Any, reply: Any, value: Any) -> None:
    assert record_fields(output_type) is None
    fake = FakeLLM()
    fake.reply(reply)
    out = Columns(output_type).split(outcomes(fake, output_type, 1))
    assert out["value"] == [value]


def test_a_failed_row_keeps_its_place_its_error_and_the_usage_it_spent() -> None:
    fake = FakeLLM()
    fake.reply(Person("Ada", 36))
    fake.reply('{"name": 1}', when="row 1")  # invalid: a ValidationError carrying its usage
    fake.fail(503, when="row 2", times=1)
    out = Columns(Person).split(outcomes(fake, Person))
    assert out["name"] == ["Ada", None, None]
    assert out["error_type"] == [None, "ValidationError", "ServerError"]
    assert out["error_message"][0] is None and "503" in out["error_message"][2]
    assert out["prompt_tokens"] == [2, 2, None]  # an error status reports no usage
    assert out["completion_tokens"] == [6, 3, None]


def test_an_integer_arrow_cannot_hold_is_that_rows_error_not_the_batchs() -> None:
    """lmclient's grammar lets a plain ``int`` reach 2**64 - 1 (a valid value), which Arrow's
    int64 cannot store: converting the column would fail the whole batch."""
    fake = FakeLLM()
    fake.reply({"x": -(2**63), "y": 1})
    fake.reply({"x": 2**64 - 1, "y": 1}, when="row 0")  # sticky replies: the newest first
    out = Columns(Point).split(outcomes(fake, Point, 2))
    assert out["x"] == [None, -(2**63)]
    assert out["error_type"] == ["OverflowError", None]
    assert str(2**64 - 1) in out["error_message"][0]


def test_a_field_named_like_a_usage_or_error_column_is_refused() -> None:
    class Clash(msgspec.Struct):
        error_type: str

    with pytest.raises(ValueError, match="error_type"):
        Columns(Clash)
