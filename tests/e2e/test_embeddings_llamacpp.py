"""Embeddings and token counts end to end, against a real llama-server started with
``--embeddings`` (the ``llama_embeddings`` fixture: Gemma 3 270M, mean pooling) and, for the
refusal of a server without them, the session's plain llama-server."""

from __future__ import annotations

import json
import math
import urllib.request

import pytest

import lmclient
from scripts import llamacpp

TEXTS = ["The cat sat on the mat.", "A dog barked.", "The cat sat on the mat.", "Bonjour"]
GEMMA_3_270M_WIDTH = 640  # the model's hidden size: what mean pooling returns


def _norm(vector: object) -> float:
    return math.sqrt(sum(v * v for v in vector))  # type: ignore[attr-defined]


def test_vectors_have_the_models_size_and_are_deterministic(
    llama_embeddings: llamacpp.LlamaServer,
) -> None:
    with lmclient.Client(llama_embeddings.base_url) as client:  # auto: llama.cpp, base64
        result = client.create_embeddings(TEXTS)
        again = client.embed(TEXTS[:1])
    vectors = result.vectors
    assert client.dialect == "llamacpp"
    assert [len(v) for v in vectors] == [GEMMA_3_270M_WIDTH] * len(TEXTS)
    assert vectors[0] == vectors[2]  # identical texts, identical vectors
    assert vectors[0] != vectors[1]
    assert again[0] == vectors[0]  # and across requests
    assert all(math.isclose(_norm(v), 1.0, rel_tol=1e-4) for v in vectors)  # llama.cpp's L2
    assert result.usage is not None and result.usage.prompt_tokens
    assert result.model == llama_embeddings.model


def test_base64_decodes_to_exactly_the_float_answer(
    llama_embeddings: llamacpp.LlamaServer,
) -> None:
    url = llama_embeddings.base_url
    model = llama_embeddings.model
    with lmclient.Client(url, model=model, dialect="llamacpp") as packed:
        as_base64 = packed.embed(TEXTS)
    with lmclient.Client(url, model=model, dialect="generic") as plain:  # asks for floats
        as_floats = plain.embed(TEXTS)
    assert as_base64 == as_floats


async def test_async_batches_in_order(llama_embeddings: llamacpp.LlamaServer) -> None:
    with lmclient.Client(llama_embeddings.base_url) as client:
        expected = client.embed(TEXTS)
    async with lmclient.AsyncClient(llama_embeddings.base_url) as client:
        vectors = await client.embed(TEXTS, batch_size=1, concurrency=2)
    assert vectors == expected  # one text per request, two at once: the same, in order


def test_dimensions_is_refused_before_the_request(
    llama_embeddings: llamacpp.LlamaServer,
) -> None:
    with (
        lmclient.Client(llama_embeddings.base_url) as client,
        pytest.raises(lmclient.UnsupportedConstraintError, match="ignore dimensions"),
    ):
        client.embed(TEXTS, dimensions=64)


def test_a_server_without_embeddings_says_so(llama: llamacpp.LlamaServer) -> None:
    with (
        lmclient.Client(llama.base_url) as client,
        pytest.raises(lmclient.APIStatusError, match="--embeddings") as caught,
    ):
        client.embed(["a"])
    assert caught.value.status_code == 501


def _detokenize(server: llamacpp.LlamaServer, tokens: list[int]) -> str:
    request = urllib.request.Request(
        server.root_url + "/detokenize",
        data=json.dumps({"tokens": tokens}).encode(),
        headers={"content-type": "application/json"},
    )
    with llamacpp._NO_PROXY.open(request, timeout=30) as answer:
        content: str = json.loads(answer.read())["content"]
    return content


def test_tokenize_and_count_tokens(llama: llamacpp.LlamaServer) -> None:
    text = "Hello world, this is lmclient."
    with lmclient.Client(llama.base_url) as client:
        tokens = client.tokenize(text)
        count = client.count_tokens(text)
        with_bos = client.tokenize(text, add_special_tokens=True)
    assert tokens and all(isinstance(t, int) for t in tokens)
    assert count == len(tokens)
    assert with_bos[1:] == tokens and len(with_bos) == len(tokens) + 1
    assert _detokenize(llama, tokens) == text  # the server's own tokens: they read back


async def test_tokenize_async(llama: llamacpp.LlamaServer) -> None:
    async with lmclient.AsyncClient(llama.base_url) as client:
        assert await client.count_tokens("") == 0
        assert await client.count_tokens("one two three") > 0


def test_count_tokens_of_messages_is_the_chat_prompts(llama: llamacpp.LlamaServer) -> None:
    messages = [{"role": "user", "content": "Hello world, this is lmclient."}]
    with lmclient.Client(llama.base_url) as client:
        count = client.count_tokens(messages)
        text = client.count_tokens("Hello world, this is lmclient.")
        # what the server counted for the same prompt as a chat completion
        usage = client.create(messages, max_tokens=1).usage
    assert usage is not None
    assert count == usage.prompt_tokens
    assert count > text  # the chat template's turn markers and generation prompt
