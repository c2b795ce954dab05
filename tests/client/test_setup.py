"""What the first call's set-up learns and refuses, as a user sees it: a client's model that the
server would answer with another model, a `generic` client that only a respx mock (or no
answer) made so, a server not reached while lmclient detected it, a base URL without ``/v1``,
``probe()`` on a closed client; and an error page's text bounded in a message."""

from __future__ import annotations

from typing import Any, Literal

import httpx
import pytest
import respx

import lmclient
from lmclient.testing import FakeLLM

# A vLLM answer for Literal["high", "low"], as vLLM sends it under its structured outputs (the
# choice itself, not JSON): what a suite records and replays.
VLLM_CHOICE = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "high"},
            "finish_reason": "stop",
        }
    ],
}
POST = "http://llm.test/v1/chat/completions"


# -- a client's model the server would ignore ------------------------------------------------


def test_a_clients_model_that_llamacpp_would_ignore_is_refused_on_every_call() -> None:
    fake = FakeLLM(server="llamacpp")
    with fake.serve() as url, lmclient.Client(url, model="prod-model") as client:
        for call in (
            lambda: client.generate("Q"),
            lambda: client.generate("Q"),  # not only the first call: every one
            lambda: "".join(client.stream("Q")),
            lambda: client.generate_many(["a", "b"]),
        ):
            with pytest.raises(lmclient.UnsupportedConstraintError) as info:
                call()
            message = str(info.value)
            assert "model='prod-model' is not served at" in message
            assert "(fake-model)" in message and "model= one of them" in message
        assert not [r for r in fake.requests if r.method == "POST"]  # nothing generated
        # a call naming a served model is the user's choice, and goes
        assert client.generate("Q", model="fake-model")
        assert client.model == "prod-model"


async def test_a_clients_model_that_llamacpp_would_ignore_is_refused_async() -> None:
    fake = FakeLLM(server="llamacpp")
    with fake.serve() as url:
        async with lmclient.AsyncClient(url, model="Qwen/Qwen3-0.6B") as client:
            for _ in range(2):
                with pytest.raises(lmclient.UnsupportedConstraintError, match=r"Qwen3-0\.6B"):
                    await client.generate("Q")
            assert await client.generate("Q", model="fake-model")
    assert [r.body["model"] for r in fake.requests if r.method == "POST"] == ["fake-model"]


def test_a_served_client_model_and_vllms_names_are_not_refused() -> None:
    fake = FakeLLM(server="llamacpp")
    fake.reply("hi")
    with fake.serve() as url, lmclient.Client(url, model="fake-model") as client:
        assert client.generate("Q") == "hi"
    # vLLM refuses an unknown name itself (404): a LoRA adapter or an alias is its to judge
    vllm = FakeLLM(server="vllm")
    with vllm.serve() as url, lmclient.Client(url, model="an-adapter") as client:
        client.generate("Q")
    assert [r.body["model"] for r in vllm.requests if r.method == "POST"] == ["an-adapter"]


# -- a generic client that only a respx mock made so -------------------------------------------


def test_a_respx_suite_mocking_only_the_post_is_told_it_ran_as_generic() -> None:
    with respx.mock:
        respx.post(POST).respond(json=VLLM_CHOICE)
        with lmclient.Client("http://llm.test/v1", model="m") as client:
            with pytest.raises(lmclient.ConstraintIgnoredError) as info:
                client.generate("Level?", Literal["high", "low"])
            assert client.dialect == "generic"
    message = str(info.value)
    assert "came through a respx mock" in message
    assert "ran as dialect 'generic'" in message
    assert "dialect='vllm'" in message and "mock the probe routes" in message


async def test_a_respx_suite_mocking_only_the_post_is_told_it_ran_as_generic_async() -> None:
    with respx.mock:
        respx.post(POST).respond(json=VLLM_CHOICE)
        async with lmclient.AsyncClient("http://llm.test/v1", model="m") as client:
            with pytest.raises(lmclient.ConstraintIgnoredError, match="respx mock"):
                await client.generate("Level?", Literal["high", "low"])


def test_a_respx_suite_with_the_servers_dialect_replays_productions_answer() -> None:
    """What docs/testing.md says to do: the dialect given, the body is the production one."""
    with respx.mock:
        route = respx.post(POST).respond(json=VLLM_CHOICE)
        with lmclient.Client("http://llm.test/v1", model="m", dialect="vllm") as client:
            assert client.generate("Level?", Literal["high", "low"]) == "high"
    sent: Any = httpx.Response(200, content=route.calls.last.request.content).json()
    assert sent["structured_outputs"] == {"choice": ["high", "low"]}


def test_a_generic_server_that_answered_its_model_list_gets_no_note() -> None:
    fake = FakeLLM(server="generic")
    fake.reply("maybe")
    with (
        fake.serve() as url,
        lmclient.Client(url, model="fake-model") as client,
        pytest.raises(lmclient.ValidationError) as info,
    ):
        client.generate("Level?", Literal["high", "low"])
    assert "note:" not in str(info.value)


def test_a_gateway_that_answers_no_probe_is_said_to_make_the_client_generic() -> None:
    fake = FakeLLM(gateway=True)
    fake.reply("high")
    with (
        fake.serve() as url,
        lmclient.Client(url, model="m") as client,
        pytest.raises(lmclient.ConstraintIgnoredError) as info,
    ):
        client.generate("Level?", Literal["high", "low"])
    message = str(info.value)
    assert "runs as dialect 'generic'" in message and "was answered" in message
    assert "respx" not in message


# -- a server not reached, a base URL without /v1 -----------------------------------------------


def _gone() -> str:
    with FakeLLM().serve() as url:
        return url  # the server is gone: its port refuses connections


def test_a_server_not_reached_while_detecting_says_so() -> None:
    url = _gone()
    with (
        lmclient.Client(url, model="m", max_retries=0) as client,
        pytest.raises(lmclient.APIConnectionError) as info,
    ):
        client.generate("Q")
    message = str(info.value)
    assert message.startswith(f"the server at {url} could not be reached while lmclient detected")
    assert message.endswith("(GET /v1/models)")  # the request it was, still named


async def test_a_server_not_reached_for_the_model_list_says_so_async() -> None:
    url = _gone()
    async with lmclient.AsyncClient(url, dialect="vllm", max_retries=0) as client:
        with pytest.raises(lmclient.APIConnectionError) as info:
            await client.generate("Q")
    assert "could not be reached while lmclient asked for its model list" in str(info.value)


def test_a_base_url_without_v1_is_named_as_the_cause() -> None:
    fake = FakeLLM()
    with fake.serve() as url:
        root = url.removesuffix("/v1")
        with (
            lmclient.Client(root + "/", max_retries=0) as client,
            pytest.raises(lmclient.ConfigurationError) as info,
        ):
            client.generate("Q")
    message = str(info.value)
    assert "GET /models lists no models" in message and "//models" not in message
    assert f"lacks the /v1 under which OpenAI-compatible servers answer (base_url='{url}')" in (
        message
    )


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_a_404_at_an_openai_path_without_v1_names_the_cause(endpoint: Any) -> None:
    """A client with its model named never lists the models: its call's own 404 says it."""
    fake = FakeLLM()
    with fake.serve() as url:
        root = url.removesuffix("/v1")
        with (
            lmclient.Client(root, model="m", dialect="vllm", max_retries=0) as client,
            pytest.raises(lmclient.NotFoundError) as info,
        ):
            client.create("Q", endpoint=endpoint)
    path = "/chat/completions" if endpoint == "chat" else "/completions"
    assert str(info.value).endswith(
        f"(POST {path}): the base URL likely lacks the /v1 under which OpenAI-compatible "
        f"servers answer (base_url='{url}')"
    )


def test_a_404_under_v1_is_the_servers_alone() -> None:
    fake = FakeLLM(models=["a"])
    with (
        fake.serve() as url,
        lmclient.Client(url, model="b", max_retries=0) as client,
        pytest.raises(lmclient.NotFoundError) as info,
    ):
        client.generate("Q")
    assert "lacks the /v1" not in str(info.value)


def test_a_base_url_with_an_empty_path_segment_is_refused() -> None:
    with pytest.raises(lmclient.ConfigurationError, match="single slashes"):
        lmclient.Client("http://127.0.0.1:8000//v1", model="m")


# -- probe() on a closed client ---------------------------------------------------------------


def test_probe_on_a_closed_client_raises_even_once_probed() -> None:
    with FakeLLM().serve() as url:
        client = lmclient.Client(url)
        assert client.probe().kind == "vllm"
        client.close()
        with pytest.raises(lmclient.ClientClosedError):
            client.probe()
        assert client.server_info is not None  # what it learnt stays readable


async def test_probe_on_a_closed_client_raises_even_once_probed_async() -> None:
    with FakeLLM().serve() as url:
        client = lmclient.AsyncClient(url)
        assert (await client.probe()).kind == "vllm"
        await client.aclose()
        with pytest.raises(lmclient.ClientClosedError):
            await client.probe()


# -- an error page in a message ----------------------------------------------------------------


def test_a_proxys_html_page_is_named_by_its_title_and_kept_whole() -> None:
    page = "<html><head><title>502 Bad Gateway</title></head><body>" + "<p>x</p>" * 5000
    with respx.mock:
        respx.post(POST).respond(502, text=page, headers={"content-type": "text/html"})
        with (
            lmclient.Client("http://llm.test/v1", model="m", dialect="vllm") as client,
            pytest.raises(lmclient.ServerError) as info,
        ):
            client.generate("Q", max_retries=0)
    message = str(info.value)
    assert message.startswith("502: 502 Bad Gateway (an HTML page of 40055 characters")
    assert "<p>" not in message and len(message) < 300
    assert info.value.body == page  # whole, for debugging
