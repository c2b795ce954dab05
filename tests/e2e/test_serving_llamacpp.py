"""Serving fields end to end against the real llama.cpp server: a per-call ``model``, per-call
``headers`` (a second server, started with an API key, reads ``Authorization``), and the
``request_id`` that llama.cpp has no field for, refused before anything is sent."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import pytest

import lmclient
from scripts import llamacpp

KEY = "sk-e2e-serving-3f1c"
TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture(scope="module")
def keyed() -> Iterator[llamacpp.LlamaServer]:
    with llamacpp.LlamaServer(parallel=1, ctx=1024, api_key=KEY) as server:
        yield server


def test_per_call_model_and_trace_context(llama: Any) -> None:
    with lmclient.Client(llama.base_url) as client:  # model=None: the probes find the one
        response = client.create(
            "Is the sky blue?",
            Literal["yes", "no"],
            model=llama.model,
            traceparent=TRACE,
            headers={"X-Tenant": "t1"},
            max_tokens=8,
        )
        assert response.value in ("yes", "no")
        assert response.model == llama.model
        # llama.cpp answers any name with its one model: a name it does not list is refused.
        with pytest.raises(lmclient.UnsupportedConstraintError, match="'lora-7' is not served"):
            client.generate("Q", model="lora-7")
        with pytest.raises(lmclient.UnsupportedConstraintError, match="'llamacpp'"):
            client.generate("Q", request_id="req-1")  # llama.cpp has no request id field
        # The header itself may still go, for a proxy in front that reads it.
        assert client.generate("Q", bool, headers={"X-Request-Id": "req-1"}) in (True, False)


def test_a_clients_model_the_server_would_ignore_is_refused(llama: Any) -> None:
    """llama.cpp answers any model name with its one model (``response.model`` is its own): a
    client made with another name, as the README's ``Qwen/Qwen3-0.6B``, is refused before any
    generation, naming the served model, on every call that uses it."""
    with lmclient.Client(llama.base_url, model="Qwen/Qwen3-0.6B") as client:
        for _ in range(2):
            with pytest.raises(lmclient.UnsupportedConstraintError) as info:
                client.generate("Q", bool)
            assert f"({llama.model})" in str(info.value) and "model=" in str(info.value)
        assert client.generate("Q", bool, model=llama.model) in (True, False)


def test_per_call_headers_reach_the_server(keyed: llamacpp.LlamaServer) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    with lmclient.Client(keyed.base_url, model=keyed.model, dialect="llamacpp") as client:
        with pytest.raises(lmclient.AuthenticationError):
            client.generate("Q", bool, max_retries=0)  # the client's own headers: no key
        assert client.generate("Q", bool, headers=auth) in (True, False)
        with client.stream("Q", bool, headers=auth) as stream:
            assert stream.read() in (True, False)
    keyed_client = lmclient.Client(keyed.base_url, dialect="llamacpp", api_key="x")
    with keyed_client, pytest.raises(ValueError, match="cannot replace the client's credentials"):
        keyed_client.generate("Q", model=keyed.model, headers=auth)


async def test_per_call_headers_reach_the_server_async(keyed: llamacpp.LlamaServer) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    client = lmclient.AsyncClient(keyed.base_url, model=keyed.model, dialect="llamacpp")
    async with client:
        with pytest.raises(lmclient.AuthenticationError):
            await client.generate("Q", bool, max_retries=0)
        assert await client.generate("Q", bool, headers=auth, model=keyed.model) in (True, False)
