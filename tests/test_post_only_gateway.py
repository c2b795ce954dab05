"""Detection never fails a call: behind a gateway that serves only the POST routes (no probe
route, no ``GET /v1/models``), the default client works as ``generic``, over real sockets
against the fake's gateway mode; every error names the request it came from."""

from __future__ import annotations

import pytest

import lmclient
from lmclient.testing import FakeLLM


def test_a_gateway_is_generic_and_the_call_works() -> None:
    fake = FakeLLM(gateway=True)
    fake.reply("hi")
    with fake.serve() as url, lmclient.Client(url, model="m") as client:
        assert client.generate("Q") == "hi"
        assert "".join(client.stream("Q")) == "hi"
        assert client.dialect == "generic"
        assert client.server_info is not None and client.server_info.kind == "unknown"
    posts = [r for r in fake.requests if r.method == "POST"]
    assert [r.path for r in posts] == ["/v1/chat/completions"] * 2


async def test_a_gateway_is_generic_and_the_call_works_async() -> None:
    fake = FakeLLM(gateway=True)
    fake.reply("hi")
    with fake.serve() as url:
        async with lmclient.AsyncClient(url, model="m") as client:
            assert await client.generate("Q") == "hi"
            assert "".join([d async for d in client.stream("Q")]) == "hi"
            assert client.dialect == "generic"


def test_model_none_behind_a_gateway_takes_the_calls_model() -> None:
    fake = FakeLLM(gateway=True)
    fake.reply("hi")
    with fake.serve() as url, lmclient.Client(url) as client:
        assert client.generate("Q", model="m") == "hi"
        assert client.model is None
    assert [r.body["model"] for r in fake.requests if r.method == "POST"] == ["m"]


async def test_model_none_behind_a_gateway_takes_the_defaults_model_async() -> None:
    fake = FakeLLM(gateway=True)
    fake.reply("hi")
    with fake.serve() as url:
        async with lmclient.AsyncClient(url, defaults={"model": "m"}) as client:
            assert await client.generate("Q") == "hi"


def test_no_model_anywhere_behind_a_gateway_is_a_configuration_error() -> None:
    fake = FakeLLM(gateway=True)
    with fake.serve() as url, lmclient.Client(url) as client:
        with pytest.raises(lmclient.ConfigurationError, match=r"GET /v1/models .*model=") as e:
            client.generate("Q")
        assert isinstance(e.value.__cause__, lmclient.NotFoundError)
        with pytest.raises(lmclient.ConfigurationError, match="/v1/models"):
            next(iter(client.stream("Q")))
    assert not [r for r in fake.requests if r.method == "POST"]


async def test_no_model_anywhere_behind_a_gateway_is_a_configuration_error_async() -> None:
    fake = FakeLLM(gateway=True)
    with fake.serve() as url:
        async with lmclient.AsyncClient(url) as client:
            with pytest.raises(lmclient.ConfigurationError, match=r"GET /v1/models"):
                await client.generate("Q")


def test_errors_name_the_request_they_came_from() -> None:
    fake = FakeLLM(gateway=True)
    fake.fail(404, times=None)
    with fake.serve() as url, lmclient.Client(url, model="m", max_retries=0) as client:
        with pytest.raises(lmclient.NotFoundError, match=r"\(GET /v1/models\)$"):
            client.models()
        with pytest.raises(lmclient.NotFoundError, match=r"\(POST /v1/chat/completions\)$"):
            client.generate("Q")
        with pytest.raises(lmclient.NotFoundError, match=r"\(POST /v1/completions\)$"):
            client.complete("Q")
        with pytest.raises(lmclient.NotFoundError, match=r"\(POST /v1/chat/completions\)$"):
            next(iter(client.stream("Q")))


async def test_errors_name_the_request_they_came_from_async() -> None:
    fake = FakeLLM(gateway=True)
    fake.fail(404, times=None)
    with fake.serve() as url:
        async with lmclient.AsyncClient(url, model="m", max_retries=0) as client:
            with pytest.raises(lmclient.NotFoundError, match=r"\(GET /v1/models\)$"):
                await client.models()
            with pytest.raises(lmclient.NotFoundError, match=r"\(POST /v1/chat/completions\)$"):
                await client.generate("Q")
            with pytest.raises(lmclient.NotFoundError, match=r"\(POST /v1/chat/completions\)$"):
                await anext(aiter(client.stream("Q")))


@pytest.mark.parametrize("model", ["m", None])
def test_an_unreachable_server_fails_with_a_named_error_and_learns_nothing(
    model: str | None,
) -> None:
    with FakeLLM().serve() as url:
        pass  # the server is gone: its port refuses connections
    with lmclient.Client(url, model=model, max_retries=0) as client:
        with pytest.raises(lmclient.APIConnectionError, match=r"\(GET /v1/models\)$"):
            client.generate("Q")
        assert client.dialect == "auto" and client.server_info is None


async def test_an_unreachable_server_fails_and_learns_nothing_async() -> None:
    with FakeLLM().serve() as url:
        pass
    async with lmclient.AsyncClient(url, model="m", max_retries=0) as client:
        with pytest.raises(lmclient.APIConnectionError, match=r"\(GET /v1/models\)$"):
            await client.generate("Q")
        assert client.dialect == "auto" and client.server_info is None


def test_a_stream_broken_midway_names_its_request() -> None:
    fake = FakeLLM(chunk_size=1)
    fake.disconnect("body", after=2)
    fake.reply("a long enough answer")
    with (
        fake.serve() as url,
        lmclient.Client(url, model="m") as client,
        pytest.raises(lmclient.APIConnectionError, match=r"\(POST /v1/chat/completions\)$"),
    ):
        "".join(client.stream("Q"))


async def test_a_stream_broken_midway_names_its_request_async() -> None:
    fake = FakeLLM(chunk_size=1)
    fake.disconnect("body", after=2)
    fake.reply("a long enough answer")
    with fake.serve() as url:
        async with lmclient.AsyncClient(url, model="m") as client:
            with pytest.raises(
                lmclient.APIConnectionError, match=r"\(POST /v1/chat/completions\)$"
            ):
                "".join([d async for d in client.stream("Q")])
