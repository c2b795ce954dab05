"""`AsyncClient` over respx: the same matrix and behaviours as `Client`, awaited."""

from __future__ import annotations

import asyncio
import json

import httpx
import msgspec
import pytest
import respx

import lmclient
from lmclient._dialects import Endpoint
from tests.helpers import reply
from tests.kinds import (
    DIALECTS,
    KINDS,
    Kind,
    expected_budget,
    expected_fields,
    expected_watch,
    reply_text,
)

BASE = "http://llm.test/v1"


@pytest.mark.slow  # 40 ms a case (httpx's CA bundle); test_loopback sends the supported ones too
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.id)
async def test_exact_request_body_and_validated_value(
    kind: Kind, dialect: str, endpoint: Endpoint, respx_mock: respx.MockRouter
) -> None:
    path = "/chat/completions" if endpoint == "chat" else "/completions"
    route = respx_mock.post(BASE + path)
    async with lmclient.AsyncClient(BASE, model="m", dialect=dialect) as client:
        try:
            fields = expected_fields(kind, dialect)
        except lmclient.UnsupportedConstraintError:
            with pytest.raises(lmclient.UnsupportedConstraintError):
                await client.create("Q", kind.output_type, endpoint=endpoint)
            assert not route.called
            return
        route.mock(return_value=reply(endpoint, reply_text(kind, dialect)))
        response = await client.create("Q", kind.output_type, endpoint=endpoint)
    assert response.value == kind.value
    prompt = (
        {"messages": [{"role": "user", "content": "Q"}]} if endpoint == "chat" else {"prompt": "Q"}
    )
    budget = expected_budget(kind, dialect) | expected_watch(kind, dialect, endpoint)
    assert json.loads(route.calls.last.request.content) == {
        "model": "m",
        **prompt,
        **budget,
        **fields,
    }


class Person(msgspec.Struct):
    name: str
    age: int


async def test_generate_and_complete(respx_mock: respx.MockRouter) -> None:
    respx_mock.post(BASE + "/chat/completions").mock(
        return_value=reply("chat", '{"name":"A","age":1}')
    )
    respx_mock.post(BASE + "/completions").mock(return_value=reply("completions", "4"))
    async with lmclient.AsyncClient(BASE, model="m", dialect="vllm") as client:
        assert await client.generate("Invent a person.", Person) == Person("A", 1)
        assert await client.complete("2 + 2 =", int) == 4


async def test_bad_parameter_raises_before_any_request(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(BASE + "/chat/completions")
    async with lmclient.AsyncClient(BASE, model="m", dialect="vllm") as client:
        with pytest.raises(TypeError, match="temprature"):
            await client.generate("Q", temprature=0)  # type: ignore[call-overload]
    assert not route.called


async def test_model_none_is_resolved_once_under_concurrency(respx_mock: respx.MockRouter) -> None:
    models = respx_mock.get(BASE + "/models").mock(
        return_value=httpx.Response(200, json={"data": [{"id": "only"}]})
    )
    respx_mock.post(BASE + "/chat/completions").mock(return_value=reply("chat", "x"))
    async with lmclient.AsyncClient(BASE, dialect="vllm") as client:
        await asyncio.gather(*(client.generate("Q") for _ in range(10)))
        assert client.model == "only"
    assert models.call_count == 1


async def test_user_http_client_is_used_and_not_closed(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(BASE + "/chat/completions").mock(return_value=reply("chat", "x"))
    async with httpx.AsyncClient(headers={"x-team": "a"}) as http:
        async with lmclient.AsyncClient(
            BASE, model="m", dialect="vllm", http_client=http
        ) as client:
            await client.generate("Q")
        assert not http.is_closed
    assert route.calls.last.request.headers["x-team"] == "a"


async def test_api_key_never_in_errors(respx_mock: respx.MockRouter) -> None:
    respx_mock.post(BASE + "/chat/completions").mock(
        return_value=httpx.Response(401, json={"error": "Unauthorized"})
    )
    async with lmclient.AsyncClient(
        BASE, model="m", dialect="vllm", api_key="sk-very-secret"
    ) as client:
        assert "sk-very-secret" not in repr(client)
        with pytest.raises(lmclient.AuthenticationError) as info:
            await client.generate("Q")
    assert "sk-very-secret" not in str(info.value) + repr(vars(info.value))
