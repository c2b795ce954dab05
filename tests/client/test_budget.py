"""Token budgets from the type: a bounded type held to its exact text (the compact grammar, a
choice) gets ``max_tokens`` from the length of its longest answer when the call gives none, and a
``max_tokens`` that cannot hold its shortest answer is refused before anything is sent."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import msgspec
import pytest

import lmclient
from lmclient._dialects import MAX_TOKEN_BYTES, Budget, get_dialect
from lmclient._output.types import compile_output
from lmclient.testing import FakeLLM
from tests.helpers import make_core


class Tag(msgspec.Struct):
    id: Annotated[int, msgspec.Meta(ge=0, le=9)]
    ok: bool


class Note(msgspec.Struct):  # not bounded: a str without max_length
    text: str


LONGEST_TAG = '{"id":9,"ok":false}'
SHORTEST_TAG = '{"id":0,"ok":true}'


def sent(output_type: Any, dialect: str = "vllm", **kw: Any) -> dict[str, Any]:
    params = kw.pop("params", {})
    call = make_core(dialect=dialect, **kw).prepare("create", "Q", output_type, "chat", params)
    assert call.request.body is not None
    body: dict[str, Any] = json.loads(call.request.body)
    return body


def test_the_budget_is_one_more_token_than_the_longest_answer_has_bytes() -> None:
    assert sent(Tag)["max_tokens"] == len(LONGEST_TAG) + 1
    grammar = compile_output(Tag).compact
    assert grammar is not None
    assert (grammar.shortest, grammar.longest) == (len(SHORTEST_TAG), len(LONGEST_TAG))


def test_a_choice_is_budgeted_by_its_longest_option_in_bytes() -> None:
    assert sent(Literal["ja", "nein", "übel"])["max_tokens"] == len("übel".encode()) + 1
    assert sent(Literal["ja", "nein"], dialect="llamacpp")["max_tokens"] == 5


@pytest.mark.parametrize(
    ("output_type", "kw"),
    [
        (Note, {}),  # unbounded
        (Tag, {"whitespace": "server"}),  # the server's grammar may pad: no bound holds
        (Tag, {"params": {"max_tokens": 7}}),  # the caller's wins
        (Tag, {"defaults": {"max_tokens": 7}}),
        (str, {}),
        (Literal["a", "b"], {"dialect": "generic"}),  # a JSON-schema enum: may be padded too
        (Tag, {"dialect": "openai"}),  # no compact grammar there
    ],
)
def test_no_budget_where_none_holds_or_the_caller_chose(output_type: Any, kw: Any) -> None:
    body = sent(output_type, **kw)
    assert body.get("max_tokens") in (None, 7)


def test_a_bounded_answer_fits_its_budget_over_sockets() -> None:
    """The fake cuts its answers at ``max_tokens``, as servers do: the budget leaves room for
    the whole value."""
    fake = FakeLLM()
    with fake.serve() as url, lmclient.Client(url, model="fake-model") as client:
        value = client.generate("Q", Tag)
    assert isinstance(value, Tag)
    assert fake.last_request.body["max_tokens"] == len(LONGEST_TAG) + 1


def test_a_max_tokens_below_the_shortest_answer_is_refused_before_sending() -> None:
    wide = msgspec.defstruct("Wide", [(f"field_number_{i}", bool) for i in range(10)])
    grammar = compile_output(wide).compact
    assert grammar is not None
    fewest = -(-grammar.shortest // MAX_TOKEN_BYTES)
    fake = FakeLLM()
    with fake.serve() as url, lmclient.Client(url, model="fake-model", dialect="vllm") as client:
        with pytest.raises(ValueError, match=f"max_tokens={fewest - 1} cannot hold any Wide"):
            client.generate("Q", wide, max_tokens=fewest - 1)
        with pytest.raises(lmclient.TruncatedError):  # enough in principle: sent, and cut
            client.generate("Q", wide, max_tokens=fewest)
    assert len(fake.calls) == 1


def test_the_refusal_reads_the_defaults_too() -> None:
    with pytest.raises(ValueError, match="max_tokens=1 cannot hold"):
        make_core(defaults={"max_tokens": 1}).validate("generate", "Q", Tag, "chat", {})


def test_budget_arithmetic() -> None:
    assert Budget.of(shortest=1, longest=1) == Budget(most=2, fewest=1)
    assert Budget.of(shortest=MAX_TOKEN_BYTES + 1, longest=40) == Budget(most=41, fewest=2)


def test_every_dialect_with_a_grammar_field_budgets_a_bounded_type() -> None:
    spec = compile_output(Tag)
    budgeted = {
        name
        for name in ("vllm", "vllm-guided", "sglang", "llamacpp", "tgi", "generic", "openai")
        if get_dialect(name).plan(spec, "chat").budget is not None
    }
    assert budgeted == {"vllm", "vllm-guided", "sglang", "llamacpp"}
