"""`Client` over respx: every output kind × dialect × endpoint, parameters, errors, lifecycle."""

from __future__ import annotations

import json
from typing import Any, Literal

import httpx
import msgspec
import pytest
import respx

import lmclient
from lmclient._dialects import Endpoint
from tests.helpers import chat_body, reply
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


def _prompt_fields(endpoint: str) -> dict[str, Any]:
    if endpoint == "chat":
        return {"messages": [{"role": "user", "content": "Q"}]}
    return {"prompt": "Q"}


@pytest.mark.slow  # 40 ms a case (httpx's CA bundle); test_loopback sends the supported ones too
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.id)
def test_exact_request_body_and_validated_value(
    kind: Kind, dialect: str, endpoint: Endpoint, respx_mock: respx.MockRouter
) -> None:
    path = "/chat/completions" if endpoint == "chat" else "/completions"
    route = respx_mock.post(BASE + path)
    client = lmclient.Client(BASE, model="m", dialect=dialect)
    try:
        fields = expected_fields(kind, dialect)
    except lmclient.UnsupportedConstraintError:
        with pytest.raises(lmclient.UnsupportedConstraintError):
            client.create("Q", kind.output_type, endpoint=endpoint)
        assert not route.called  # refused before anything was sent
        return
    route.mock(return_value=reply(endpoint, reply_text(kind, dialect)))
    response = client.create("Q", kind.output_type, endpoint=endpoint)
    assert response.value == kind.value
    assert type(response.value) is type(kind.value)
    sent = json.loads(route.calls.last.request.content)
    budget = expected_budget(kind, dialect) | expected_watch(kind, dialect, endpoint)
    assert sent == {"model": "m", **_prompt_fields(endpoint), **budget, **fields}


class Person(msgspec.Struct):
    name: str
    age: int


def test_generate_and_complete_return_values(respx_mock: respx.MockRouter) -> None:
    respx_mock.post(BASE + "/chat/completions").mock(
        return_value=reply("chat", '{"name":"A","age":1}')
    )
    respx_mock.post(BASE + "/completions").mock(return_value=reply("completions", "4"))
    with lmclient.Client(BASE, model="m", dialect="vllm") as client:
        assert client.generate("Invent a person.", Person) == Person("A", 1)
        assert client.complete("2 + 2 =", int) == 4


def test_messages_are_sent_as_given(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(BASE + "/chat/completions").mock(return_value=reply("chat", "hi"))
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert lmclient.Client(BASE, model="m", dialect="vllm").generate(messages) == "hi"
    assert json.loads(route.calls.last.request.content)["messages"] == messages


def test_parameters_defaults_and_extra_body_in_the_body(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(BASE + "/chat/completions").mock(return_value=reply("chat", "x"))
    client = lmclient.Client(
        BASE, model="m", dialect="vllm", defaults={"temperature": 0, "max_tokens": 512}
    )
    client.generate(
        "Q",
        max_tokens=7,
        top_p=0.5,
        stop=["\n"],
        seed=1,
        presence_penalty=0.1,
        frequency_penalty=0.2,
        logprobs=True,
        top_logprobs=2,
        extra_body={"top_k": 20, "min_p": 0.1},
    )
    sent = json.loads(route.calls.last.request.content)
    assert sent == {
        "model": "m",
        "messages": [{"role": "user", "content": "Q"}],
        "temperature": 0,
        "max_tokens": 7,
        "top_p": 0.5,
        "stop": ["\n"],
        "seed": 1,
        "presence_penalty": 0.1,
        "frequency_penalty": 0.2,
        "logprobs": True,
        "top_logprobs": 2,
        "top_k": 20,
        "min_p": 0.1,
        # an unbounded answer (str), which vLLM stops where it loops (issue 39)
        "repetition_detection": {"max_pattern_size": 16, "min_pattern_size": 1, "min_count": 32},
    }


def test_completions_logprobs_use_the_legacy_number(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(BASE + "/completions").mock(return_value=reply("completions", "x"))
    lmclient.Client(BASE, model="m", dialect="vllm").complete("Q", logprobs=True, top_logprobs=3)
    assert json.loads(route.calls.last.request.content)["logprobs"] == 3


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"temprature": 0.5}, TypeError),
        ({"n": 2}, TypeError),
        ({"max_tokens": "10"}, TypeError),
        ({"max_tokens": 0}, ValueError),
        ({"temperature": True}, TypeError),
        ({"stop": [1]}, ValueError),
        ({"extra_body": ["top_k"]}, TypeError),
        ({"deadline": -1}, ValueError),
    ],
)
def test_bad_parameters_raise_before_any_request(
    kwargs: dict[str, Any], error: type[Exception], respx_mock: respx.MockRouter
) -> None:
    route = respx_mock.post(BASE + "/chat/completions")
    with pytest.raises(error):
        lmclient.Client(BASE, model="m", dialect="vllm").generate("Q", **kwargs)
    assert not route.called


def test_bad_defaults_raise_at_construction() -> None:
    with pytest.raises(TypeError, match="temprature"):
        lmclient.Client(BASE, model="m", dialect="vllm", defaults={"temprature": 0})


def test_bad_output_type_raises_before_any_request(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(BASE + "/chat/completions")
    with pytest.raises(TypeError, match="output type"):
        lmclient.Client(BASE, model="m", dialect="vllm").generate("Q", object)
    with pytest.raises(TypeError):
        lmclient.Client(BASE, model="m", dialect="vllm").generate(42)  # type: ignore[call-overload]
    assert not route.called


def test_model_none_asks_the_server_once(respx_mock: respx.MockRouter) -> None:
    models = respx_mock.get(BASE + "/models").mock(
        return_value=httpx.Response(200, json={"object": "list", "data": [{"id": "only"}]})
    )
    route = respx_mock.post(BASE + "/chat/completions").mock(return_value=reply("chat", "x"))
    client = lmclient.Client(BASE, dialect="vllm")
    client.generate("a")
    client.generate("b")
    assert models.call_count == 1
    assert client.model == "only"
    assert json.loads(route.calls.last.request.content)["model"] == "only"


def test_model_none_with_several_models_is_a_clear_error(respx_mock: respx.MockRouter) -> None:
    respx_mock.get(BASE + "/models").mock(
        return_value=httpx.Response(200, json={"data": [{"id": "a"}, {"id": "b"}]})
    )
    with pytest.raises(lmclient.LMClientError, match="a, b"):
        lmclient.Client(BASE, dialect="vllm").generate("Q")


def test_env_fallbacks(monkeypatch: pytest.MonkeyPatch, respx_mock: respx.MockRouter) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://other.test/v1")
    monkeypatch.setenv("LMCLIENT_BASE_URL", BASE)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("LMCLIENT_API_KEY", "sk-lmclient")
    route = respx_mock.post(BASE + "/chat/completions").mock(return_value=reply("chat", "x"))
    lmclient.Client(model="m", dialect="vllm").generate("Q")
    assert route.calls.last.request.headers["authorization"] == "Bearer sk-lmclient"


def test_no_base_url_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LMCLIENT_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="LMCLIENT_BASE_URL"):
        lmclient.Client()


def test_api_key_never_in_repr_or_errors(respx_mock: respx.MockRouter) -> None:
    respx_mock.post(BASE + "/chat/completions").mock(
        return_value=httpx.Response(401, json={"error": "Unauthorized"})
    )
    client = lmclient.Client(BASE, model="m", dialect="vllm", api_key="sk-very-secret")
    assert "sk-very-secret" not in repr(client)
    with pytest.raises(lmclient.AuthenticationError) as info:
        client.generate("Q")
    assert "sk-very-secret" not in repr(info.value) + str(info.value) + repr(vars(info.value))


def test_user_http_client_is_used_and_not_closed(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(BASE + "/chat/completions").mock(return_value=reply("chat", "x"))
    with httpx.Client(headers={"x-team": "a"}) as http:
        with lmclient.Client(BASE, model="m", dialect="vllm", http_client=http) as client:
            client.generate("Q")
        assert not http.is_closed
    assert route.calls.last.request.headers["x-team"] == "a"


def test_n_choices_are_all_validated(respx_mock: respx.MockRouter) -> None:
    body = chat_body("1", n=3)
    body["choices"][2]["message"]["content"] = "x"
    respx_mock.post(BASE + "/chat/completions").mock(return_value=httpx.Response(200, json=body))
    with pytest.raises(lmclient.ValidationError) as info:
        lmclient.Client(BASE, model="m", dialect="vllm").create("Q", int, n=3)
    assert info.value.attempts == ["1", "1", "x"]


def test_response_fields(respx_mock: respx.MockRouter) -> None:
    body = chat_body("yes", n=2, reasoning="thinking...")
    body["choices"][0]["logprobs"] = {
        "content": [
            {"token": "yes", "logprob": -0.1, "top_logprobs": [{"token": "yes", "logprob": -0.1}]}
        ]
    }
    respx_mock.post(BASE + "/chat/completions").mock(return_value=httpx.Response(200, json=body))
    response = lmclient.Client(BASE, model="m", dialect="vllm").create(
        "Q", Literal["yes", "no"], n=2
    )
    assert response.values == ["yes", "yes"] and response.texts == ["yes", "yes"]
    assert (
        response.finish_reason == "stop" and response.id == "chatcmpl-1" and response.model == "m"
    )
    assert response.usage == lmclient.Usage(3, 5, 8)
    assert response.reasoning == "thinking..."
    assert response.logprobs == [
        lmclient.TokenLogprob("yes", -0.1, [lmclient.TopLogprob("yes", -0.1)])
    ]
    assert response.raw == body  # every field, as sent
