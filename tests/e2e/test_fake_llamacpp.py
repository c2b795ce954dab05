"""`FakeLLM(server="llamacpp")` against the real llama.cpp server it plays: the same request
gets the same kind of answer from both, where a test of an app relies on it (a model name the
server does not serve, the shape of logprobs)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from lmclient.testing import FakeLLM
from scripts import llamacpp

GRAMMAR = 'root ::= "yes" | "no"'
MESSAGES = [{"role": "user", "content": "Is the sky blue? Answer yes or no."}]


def _both(server: llamacpp.LlamaServer, path: str, body: dict[str, Any]) -> list[Any]:
    """The JSON answers of the real server and of the fake playing it (the real one's model
    name its own), each a 200."""
    fake = FakeLLM(models=[server.model], server="llamacpp")
    answers = []
    with fake.serve() as fake_url:
        for url in (server.base_url, fake_url):
            response = httpx.post(url + path, json=body, timeout=120)
            assert response.status_code == 200, response.text
            answers.append(response.json())
    return answers


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/chat/completions", {"messages": MESSAGES, "max_tokens": 4}),
        ("/completions", {"prompt": "Is the sky blue?", "max_tokens": 4}),
    ],
)
def test_a_model_it_does_not_serve_is_answered_by_its_own(
    llama: llamacpp.LlamaServer, path: str, body: dict[str, Any]
) -> None:
    real, fake = _both(llama, path, {"model": "prod-model", **body})
    assert real["model"] == fake["model"] == llama.model


def test_embeddings_echo_the_name_asked_for(llama_embeddings: llamacpp.LlamaServer) -> None:
    body = {"model": "prod-embedder", "input": "a text"}
    real, fake = _both(llama_embeddings, "/embeddings", body)
    assert real["model"] == fake["model"] == "prod-embedder"


def _shape(logprobs: Any) -> tuple[set[str], set[str], set[str]]:
    token = logprobs["content"][0]
    return set(logprobs), set(token), set(token["top_logprobs"][0])


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/chat/completions", {"messages": MESSAGES, "logprobs": True, "top_logprobs": 3}),
        ("/completions", {"prompt": "Is the sky blue? Answer yes or no:", "logprobs": 3}),
    ],
)
def test_logprobs_have_the_real_server_s_shape(
    llama: llamacpp.LlamaServer, path: str, body: dict[str, Any]
) -> None:
    asked = {**body, "grammar": GRAMMAR, "temperature": 0.0, "max_tokens": 4}
    real, fake = _both(llama, path, asked)
    real_logprobs, fake_logprobs = (answer["choices"][0]["logprobs"] for answer in (real, fake))
    assert _shape(real_logprobs) == _shape(fake_logprobs)
    assert len(fake_logprobs["content"][0]["top_logprobs"]) <= 3
