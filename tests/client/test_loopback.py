"""Both clients over real sockets against the loopback fake server (`lmclient.testing`)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import httpx
import msgspec
import pytest
import respx

import lmclient
from lmclient._dialects import Endpoint
from lmclient.testing import FakeLLM
from tests.helpers import EXAMPLES, checked_out, gated_fake
from tests.kinds import (
    DIALECTS,
    KINDS,
    Kind,
    expected_budget,
    expected_fields,
    expected_watch,
    reply_text,
)

MODEL = "fake-model"


def pool_connections(client: lmclient.Client | lmclient.AsyncClient) -> list[Any]:
    """The open connections of the client's own transport, idle and checked out."""
    return client._transport._pool.connections()


def _prompt(endpoint: str) -> dict[str, Any]:
    if endpoint == "chat":
        return {"messages": [{"role": "user", "content": "Q"}]}
    return {"prompt": "Q"}


def _supported(kind: Kind, dialect: str, endpoint: str) -> bool:
    try:
        expected_fields(kind, dialect, endpoint)
    except lmclient.UnsupportedConstraintError:
        return False
    return True


CASES = [
    (kind, dialect, endpoint)
    for kind in KINDS
    for dialect in DIALECTS
    for endpoint in ("chat", "completions")
    if _supported(kind, dialect, endpoint)
]
IDS = [f"{k.id}-{d}-{e}" for k, d, e in CASES]


@pytest.mark.parametrize(("kind", "dialect", "endpoint"), CASES, ids=IDS)
def test_sync_scripted_reply_over_sockets(
    kind: Kind, dialect: str, endpoint: Endpoint, fake: FakeLLM, url: str
) -> None:
    fake.reply(reply_text(kind, dialect, endpoint))
    with lmclient.Client(url, model=MODEL, dialect=dialect) as client:
        response = client.create("Q", kind.output_type, endpoint=endpoint)
    assert response.value == kind.value
    assert fake.last_request.body == {
        "model": MODEL,
        **_prompt(endpoint),
        **expected_fields(kind, dialect, endpoint),
        **expected_budget(kind, dialect, endpoint),
        **expected_watch(kind, dialect, endpoint),
    }


@pytest.mark.parametrize(("kind", "dialect", "endpoint"), CASES, ids=IDS)
async def test_async_scripted_reply_over_sockets(
    kind: Kind, dialect: str, endpoint: Endpoint, fake: FakeLLM, url: str
) -> None:
    fake.reply(reply_text(kind, dialect, endpoint))
    async with lmclient.AsyncClient(url, model=MODEL, dialect=dialect) as client:
        response = await client.create("Q", kind.output_type, endpoint=endpoint)
    assert response.value == kind.value
    assert fake.last_request.body == {
        "model": MODEL,
        **_prompt(endpoint),
        **expected_fields(kind, dialect, endpoint),
        **expected_budget(kind, dialect, endpoint),
        **expected_watch(kind, dialect, endpoint),
    }


def _fake_can_generate(kind: Kind, dialect: str) -> bool:
    """FakeLLM generates from schemas, regexes and choices; of grammars, only alternations."""
    if not _supported(kind, dialect, "chat") or kind.id == "pydantic":
        return False
    fields = expected_fields(kind, dialect)
    return kind.native != "grammar" and ("grammar" not in fields or kind.native == "choice")


GENERATED = [(k, d) for k in KINDS for d in DIALECTS if _fake_can_generate(k, d)]


@pytest.mark.parametrize(("kind", "dialect"), GENERATED, ids=[f"{k.id}-{d}" for k, d in GENERATED])
def test_fake_generates_replies_that_validate(kind: Kind, dialect: str, url: str) -> None:
    """No script: the fake answers from the constraint the request carried."""
    with lmclient.Client(url, model=MODEL, dialect=dialect) as client:
        value = client.generate("Q", kind.output_type)
    assert type(value) is type(kind.value) or kind.id in ("optional", "union", "any", "jsonschema")


@pytest.mark.parametrize(
    ("name", "status", "cls"),
    [
        ("vllm_error_nested_0.10.1_plus.json", 400, lmclient.BadRequestError),
        ("vllm_error_flat_pre_0.10.1.json", 400, lmclient.BadRequestError),
        ("llamacpp_error_auth.json", 401, lmclient.AuthenticationError),
        ("llamacpp_error_invalid_grammar.json", 400, lmclient.BadRequestError),
        ("lmstudio_error_json_object.json", 400, lmclient.BadRequestError),
        ("openai_error_unknown_parameter.json", 400, lmclient.BadRequestError),
    ],
)
def test_error_envelopes_over_sockets(
    name: str, status: int, cls: type[lmclient.APIError], fake: FakeLLM, url: str
) -> None:
    body = (EXAMPLES / name).read_bytes()
    fake.reply_error(status, json.loads(body))
    with lmclient.Client(url, model=MODEL) as client, pytest.raises(cls) as info:
        client.generate("Q")
    assert info.value.message == lmclient._status.api_error(status, {}, body).message


def test_unknown_model_is_not_found() -> None:
    fake = FakeLLM(models=[MODEL])  # a fake restricted to its models, as a real server is
    with (
        fake.serve() as url,
        lmclient.Client(url, model="nope") as client,
        pytest.raises(lmclient.NotFoundError),
    ):
        client.generate("Q")


def test_model_none_and_truncation_over_sockets(fake: FakeLLM, url: str) -> None:
    class Person(msgspec.Struct):
        name: str
        age: int

    with lmclient.Client(url) as client:
        with pytest.raises(lmclient.TruncatedError):
            client.generate("Q", Person, max_tokens=2)
        assert client.model == MODEL
        assert isinstance(client.generate("Q", Person, max_tokens=200), Person)


def test_retry_after_503_over_sockets(fake: FakeLLM, url: str) -> None:
    fake.reply_error(503, "busy", headers={"retry-after-ms": "5"}, times=2)
    fake.reply("ok")
    with lmclient.Client(url, model=MODEL) as client:
        response = client.create("Q")
    assert (response.value, response.retries) == ("ok", 2)


# -- streaming over sockets ------------------------------------------------------------------


class Person(msgspec.Struct):
    name: str
    age: int


PEOPLE = [Person(f"P{i}", i) for i in range(5)]


def test_sync_stream_text_usage_and_events(fake: FakeLLM, url: str) -> None:
    fake.reply("Hello there, world.", keepalive=True)
    with lmclient.Client(url, model=MODEL) as client:
        with client.stream("Q") as s:
            deltas = list(s)
        assert "".join(deltas) == "Hello there, world." and len(deltas) > 1
        assert s.usage is not None and s.usage.completion_tokens
        assert s.finish_reason == "stop" and s.events >= len(deltas)
        assert checked_out(client) == 0


async def test_async_stream_items_over_sockets(fake: FakeLLM, url: str) -> None:
    fake.reply(PEOPLE)
    async with lmclient.AsyncClient(url, model=MODEL) as client:
        async with client.stream("Q", list[Person]) as s:
            assert [p async for p in s.items()] == PEOPLE
        assert s.value == PEOPLE
        assert checked_out(client) == 0


def test_first_item_arrives_before_the_last_chunk_is_sent() -> None:
    """The server is held at a gate before its last chunk; the first item must already be out."""
    fake, gate = gated_fake(PEOPLE)
    with (
        fake.serve() as base_url,
        lmclient.Client(base_url, model=MODEL) as client,
        client.stream("Q", list[Person]) as s,
    ):
        items = s.items()
        assert next(items) == PEOPLE[0]
        gate.set()  # only now may the server send its last chunk
        assert list(items) == PEOPLE[1:]


def test_mid_stream_error_event_over_sockets(fake: FakeLLM, url: str) -> None:
    fake.reply("x" * 100, error_after=2)
    with lmclient.Client(url, model=MODEL) as client:
        with pytest.raises(lmclient.ServerError), client.stream("Q") as s:
            list(s)
        assert checked_out(client) == 0


def test_early_close_without_done_is_a_protocol_error(fake: FakeLLM, url: str) -> None:
    fake.reply("x" * 100, close_after=2)
    with lmclient.Client(url, model=MODEL) as client:
        with pytest.raises(lmclient.ProtocolError), client.stream("Q") as s:
            list(s)
        assert checked_out(client) == 0


# -- resource safety: every way out of a stream releases its connection -----------------------

EXITS = ["finish", "break", "exception", "early-exit"]
# Many deltas, no span repeating (said 20 times over, even counting, it would be a runaway)
_WORDS = ["sea", "calm", "grey", "harbour", "dawn", "boat", "wind", "salt", "rope", "gull", "tide"]
LONG_ANSWER = " ".join(f"{_WORDS[i * 7 % 11]} {_WORDS[i * i % 11]}." for i in range(60))


def _stream_and_leave(client: lmclient.Client, how: str) -> None:
    class Stop(Exception):
        pass

    try:
        with client.stream("Q") as s:
            if how == "early-exit":
                return
            for _ in s:
                if how == "break":
                    break
                if how == "exception":
                    raise Stop
    except Stop:
        pass


@pytest.mark.parametrize("how", EXITS)
def test_sync_stream_releases_its_connection(how: str, fake: FakeLLM, url: str) -> None:
    fake.reply(LONG_ANSWER)
    with lmclient.Client(url, model=MODEL) as client:
        _stream_and_leave(client, how)
        assert checked_out(client) == 0
        for _ in range(100):
            assert client.generate("Q") == LONG_ANSWER
        assert checked_out(client) == 0


async def _astream_and_leave(client: lmclient.AsyncClient, how: str) -> None:
    class Stop(Exception):
        pass

    try:
        async with client.stream("Q") as s:
            if how == "early-exit":
                return
            async for _ in s:
                if how == "break":
                    break
                if how == "exception":
                    raise Stop
    except Stop:
        pass


@pytest.mark.parametrize("how", EXITS)
async def test_async_stream_releases_its_connection(how: str, fake: FakeLLM, url: str) -> None:
    fake.reply(LONG_ANSWER)
    async with lmclient.AsyncClient(url, model=MODEL) as client:
        await _astream_and_leave(client, how)
        assert checked_out(client) == 0
        for _ in range(100):
            assert await client.generate("Q") == LONG_ANSWER
        assert checked_out(client) == 0


async def test_cancelled_task_releases_its_stream() -> None:
    gate = threading.Event()
    fake = FakeLLM(on_chunk=lambda index: index >= 3 and gate.wait(10))
    fake.reply(LONG_ANSWER)
    with fake.serve() as base_url:
        async with lmclient.AsyncClient(base_url, model=MODEL) as client:
            first = asyncio.Event()

            async def consume() -> None:
                async with client.stream("Q") as s:
                    async for _ in s:
                        first.set()

            task = asyncio.create_task(consume())
            await asyncio.wait_for(first.wait(), 10)
            task.cancel()  # the server is blocked: the task is waiting for bytes
            with pytest.raises(asyncio.CancelledError):
                await task
            gate.set()
            assert checked_out(client) == 0
            fake.reply("done")
            for _ in range(100):
                assert await client.generate("Q") == "done"
            assert checked_out(client) == 0


# -- a user's respx mock intercepts lmclient, sync, async and streaming ------------------------


def test_users_default_respx_mock_intercepts_both_clients() -> None:
    body = {"choices": [{"index": 0, "message": {"content": "4"}, "finish_reason": "stop"}]}
    stream = b'data: {"choices":[{"index":0,"delta":{"content":"4"},"finish_reason":"stop"}]}\n\n'
    with respx.mock:  # default settings, as users write it
        respx.post("http://llm.test/v1/chat/completions").mock(
            side_effect=lambda request: httpx.Response(
                200,
                content=stream
                if json.loads(request.content).get("stream")
                else json.dumps(body).encode(),
            )
        )
        with lmclient.Client("http://llm.test/v1", model="m", dialect="vllm") as client:
            assert client.generate("2+2?", int) == 4
            with client.stream("2+2?", int) as s:
                assert s.value == 4

        async def run() -> None:
            async with lmclient.AsyncClient(
                "http://llm.test/v1", model="m", dialect="vllm"
            ) as aclient:
                assert await aclient.generate("2+2?", int) == 4
                async with aclient.stream("2+2?", int) as s:
                    assert await s.aread() == 4

        asyncio.run(run())


def test_fake_mock_mode_serves_the_client() -> None:
    fake = FakeLLM()
    fake.reply(PEOPLE)
    with fake.mock() as base_url, lmclient.Client(base_url, model=MODEL) as client:
        assert client.generate("Q", list[Person]) == PEOPLE
        with client.stream("Q", list[Person]) as s:
            assert list(s.items()) == PEOPLE
