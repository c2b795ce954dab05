"""End to end against a real llama.cpp server and a real (tiny) model.

A 270M base model writes poor content, but constrained decoding plus client-side validation
make every value well formed: these tests assert validity and types, never content.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

import msgspec
import pytest

import lmclient
from tests.e2e.helpers import DIGITS, KINDS, SMALL, Person, Pet, Pets


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize(("name", "output_type", "expected"), KINDS, ids=[k[0] for k in KINDS])
def test_every_kind_sync(
    name: str, output_type: Any, expected: type, endpoint: Any, base_url: str
) -> None:
    with lmclient.Client(base_url) as client:  # model=None and dialect="auto"
        response = client.create("Answer briefly.", output_type, endpoint=endpoint, **SMALL)
        assert client.dialect == "llamacpp"
    assert isinstance(response.value, expected)
    assert response.finish_reason == "stop"
    if name == "grammar":
        value = response.value
        assert isinstance(value, str) and len(value) == 3 and value.isdigit()


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize(("name", "output_type", "expected"), KINDS, ids=[k[0] for k in KINDS])
async def test_every_kind_async(
    name: str, output_type: Any, expected: type, endpoint: Any, base_url: str
) -> None:
    async with lmclient.AsyncClient(base_url) as client:
        response = await client.create("Answer briefly.", output_type, endpoint=endpoint, **SMALL)
    assert isinstance(response.value, expected)


class Code(msgspec.Struct):
    code: Annotated[str, msgspec.Meta(pattern="^zz[0-9]", max_length=8)]  # a search: `^`, no `$`


def test_a_search_pattern_in_a_struct_is_enforced(base_url: str) -> None:
    # llama.cpp skips, without a word, a schema pattern that is not `^…$`; lmclient anchors it
    with lmclient.Client(base_url) as client:
        assert client.generate("Answer briefly.", Code, **SMALL).code[:2] == "zz"


def test_auto_detection_and_model_discovery(llama: Any) -> None:
    with lmclient.Client(llama.base_url) as client:
        client.generate("Hi", max_tokens=4)
        info = client.server_info
    assert info is not None
    assert (info.kind, info.dialect, client.model) == ("llamacpp", "llamacpp", llama.model)
    assert info.version and info.models == [llama.model]


def test_stream_items_sync(base_url: str) -> None:
    with lmclient.Client(base_url) as client, client.stream("List pets.", Pets, **SMALL) as s:
        items = list(s.items())
    assert items and all(isinstance(p, Pet) for p in items)
    assert s.value == items
    assert s.usage is not None and s.usage.completion_tokens


async def test_stream_items_async(base_url: str) -> None:
    async with (
        lmclient.AsyncClient(base_url) as client,
        client.stream("List pets.", Pets, endpoint="completions", **SMALL) as s,
    ):
        items = [p async for p in s.items()]
    assert items and s.value == items


def test_stream_text(base_url: str) -> None:
    with (
        lmclient.Client(base_url) as client,
        client.stream("Say hello.", max_tokens=16, seed=1) as s,
    ):
        deltas = list(s)
    assert "".join(deltas) == s.value and s.finish_reason in ("stop", "length")


def test_invalid_grammar_is_a_bad_request(base_url: str) -> None:
    with (
        lmclient.Client(base_url) as client,
        pytest.raises(lmclient.BadRequestError, match="grammar"),
    ):
        client.generate("Q", lmclient.Grammar("root ::= ( unclosed"), max_tokens=8)


def test_max_tokens_too_small_is_truncated(base_url: str) -> None:
    with lmclient.Client(base_url) as client, pytest.raises(lmclient.TruncatedError) as info:
        client.generate("Invent a person.", Person, max_tokens=3, temperature=0.0)
    assert info.value.text and info.value.usage is not None


async def test_sixteen_concurrent_calls_all_validate(base_url: str) -> None:
    """Grammar-bounded types: a tiny model may pad JSON with whitespace until max_tokens (the
    JSON grammar llama.cpp builds allows it), which is not what this test is about."""
    kinds: list[Any] = [int, Literal["cat", "dog", "bird"], bool, DIGITS]
    async with lmclient.AsyncClient(base_url) as client:
        values = await asyncio.gather(
            *(
                client.generate(f"Question {i}.", kinds[i % 4], max_tokens=32, seed=i)
                for i in range(16)
            )
        )
    assert [type(v) for v in values] == [int, str, bool, str] * 4
