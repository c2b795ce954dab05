"""Which output type a request asked for: ``RecordedRequest.asks_for`` in every dialect and on
both endpoints, ``Match(output_type=...)`` and ``FakeLLM.assert_called``."""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator
from typing import Any, Literal

import msgspec
import pytest

import lmclient
from lmclient._dialects import DIALECTS
from lmclient.testing import FakeLLM, Match, RecordedRequest
from lmclient.testing._output_types import expected_constraints


class Person(msgspec.Struct):
    name: str
    age: int


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


OUTPUT_TYPES: list[Any] = [
    str,
    Person,
    list[int],
    int,
    float,
    bool,
    Literal["a", "b"],
    Literal[1, 2],
    Color,
    lmclient.Regex(r"[A-Z]\d{3}"),
    lmclient.Choice(["left", "right"]),
    Any,
    lmclient.Grammar('root ::= "q"+'),
]
NEVER_SENT = lmclient.Regex("never sent")


def _calls(client: lmclient.Client, fake: FakeLLM, tp: Any) -> Iterator[RecordedRequest]:
    """The requests ``client`` makes for ``tp`` on each endpoint the dialect can constrain."""
    for endpoint in ("chat", "completions"):
        try:
            client.create("Q", tp, endpoint=endpoint)
        except lmclient.UnsupportedConstraintError:
            continue
        yield fake.last_request


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_lmclient_requests_ask_for_their_type_in_every_dialect(dialect: str) -> None:
    fake = FakeLLM(server="generic")
    checked = 0
    with (
        fake.serve() as url,
        lmclient.Client(url, model="fake-model", dialect=dialect) as client,
    ):
        for tp in OUTPUT_TYPES:
            for request in _calls(client, fake, tp):
                assert request.asks_for(tp), (tp, request.body)
                assert not request.asks_for(NEVER_SENT)
                assert request.asks_for(str) == (tp is str)
                checked += 1
    # At least chat for each type everywhere, but where the dialect refuses a Regex and a
    # grammar on both endpoints (behind sglang-router --backend openai).
    assert checked >= len(OUTPUT_TYPES) - (2 if dialect == "sglang-gateway" else 0)


def test_equivalent_types_ask_alike() -> None:
    request = RecordedRequest(
        "POST", "/v1/chat/completions", "chat", {}, {"structured_outputs": {"choice": ["a", "b"]}}
    )
    assert request.asks_for(Literal["a", "b"])
    assert request.asks_for(lmclient.Choice(["a", "b"]))
    assert not request.asks_for(Literal["a", "c"])
    assert not request.asks_for(Literal["a"])


def test_other_clients_asking_for_the_same_schema_match() -> None:
    schema = msgspec.json.schema(Person)["$defs"]["Person"]
    body = {
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    }
    request = RecordedRequest("POST", "/v1/chat/completions", "chat", {}, body)
    assert request.asks_for(Person)
    renamed = {**schema, "title": "Somebody"}
    body["response_format"]["json_schema"]["schema"] = renamed  # type: ignore[index]
    assert not request.asks_for(Person)


def test_requests_that_are_not_calls_ask_for_nothing() -> None:
    models = RecordedRequest("GET", "/v1/models", "models", {}, None)
    assert not models.asks_for(str)
    broken = RecordedRequest("POST", "/v1/completions", "completions", {}, {"regex": 3})
    assert not broken.asks_for(str)


def test_expected_constraints_are_distinct_and_json_shaped() -> None:
    found = expected_constraints(Literal["a", "b"], "chat")
    kinds = sorted(c.kind for c in found)
    assert kinds == ["choice", "grammar", "json_schema", "json_schema", "regex"]
    assert all(isinstance(c.value, (list, str, dict)) for c in found)
    assert len({msgspec.json.encode(c.value) for c in found}) == len(found)


def test_match_by_output_type_picks_the_reply() -> None:
    fake = FakeLLM(server="sglang")
    fake.reply('{"name": "Ada", "age": 36}', when=Match(output_type=Person))
    fake.reply("7", when=Match(output_type=int))
    with fake.serve() as url, lmclient.Client(url) as client:
        assert client.generate("Who?", Person) == Person("Ada", 36)
        assert client.generate("How many?", int) == 7
        assert client.generate("Hi") == fake.default_text


# -- assert_called ------------------------------------------------------------------------------


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    fake = FakeLLM()
    fake.reply("yes", when=Match(output_type=Literal["yes", "no"]))
    with fake.serve() as url, lmclient.Client(url) as client:
        client.generate("Invent somebody.", Person)
        client.generate("Positive?", Literal["yes", "no"])
        client.generate("Positive, really?", Literal["yes", "no"])
        yield fake


def test_assert_called_counts_calls_not_probes(fake: FakeLLM) -> None:
    assert len(fake.requests) > len(fake.calls) == 3  # the client probed the server first
    assert fake.assert_called() == fake.calls
    assert fake.assert_called(times=3) == fake.calls


def test_assert_called_selects_by_output_type_and_when(fake: FakeLLM) -> None:
    assert [c.prompt for c in fake.assert_called(times=1, with_output_type=Person)] == [
        "Invent somebody."
    ]
    assert len(fake.assert_called(times=2, with_output_type=Literal["yes", "no"])) == 2
    assert len(fake.assert_called(times=1, when="really")) == 1
    assert fake.assert_called(times=0, with_output_type=int) == []
    selected = fake.assert_called(with_output_type=Literal["yes", "no"], when=re.compile("^Pos"))
    assert len(selected) == 2


def test_assert_called_failures_list_the_calls(fake: FakeLLM) -> None:
    with pytest.raises(AssertionError) as failure:
        fake.assert_called(with_output_type=int)
    message = str(failure.value)
    assert message.startswith("expected at least 1 call(s) asking for <class 'int'>, got 0")
    assert "chat 'Invent somebody.': grammar \"root ::= " in message  # compact JSON
    assert 'chat \'Positive?\': choice ["yes","no"]' in message
    with pytest.raises(AssertionError, match=r"expected 2 call\(s\) matching 'really', got 1"):
        fake.assert_called(times=2, when="really")


def test_assert_called_without_calls() -> None:
    with pytest.raises(AssertionError, match=r"got 0; calls received:\n  \(none\)"):
        FakeLLM().assert_called()
    FakeLLM().assert_called(times=0)
