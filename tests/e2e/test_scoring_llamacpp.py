"""rerank, score and classify end to end against real llama-servers: one started with
``--reranking`` (the ``llama_reranking`` fixture below), the session's plain one and the
embeddings one (``--embeddings --pooling mean``).

Gemma 3 270M has no ranking head: with ``--reranking`` this build still answers, with a score
per document read from the model's output, so these tests hold the client to the server's
answer (its order, its cut to ``top_n``, its scores unchanged, the documents as given), not to
the scores' meaning (its answer to one request is recorded in tests/fixtures/scoring). Without
``--reranking`` the server answers 501, raised as it comes; its body is the one recorded
there. score and classify, which llama.cpp does not
have, are refused."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

import lmclient
from scripts import llamacpp

RECORDED = Path(__file__).parents[1] / "fixtures" / "scoring"
QUERY = "Where is the cat?"
DOCUMENTS = ["A dog barked.", "The cat sat on the mat.", "Bonjour", "Cats sleep a lot."]


@pytest.fixture(scope="module")
def llama_reranking() -> Iterator[llamacpp.LlamaServer]:
    """A llama-server started with ``--reranking`` (rank pooling); one slot, so that a
    document's score does not depend on what it was batched with. Stopped with the module."""
    llamacpp.ensure_installed()
    with llamacpp.LlamaServer(parallel=1, extra_args=("--reranking",)) as server:
        yield server


def _raw_rerank(server: llamacpp.LlamaServer, documents: list[str]) -> list[dict[str, float]]:
    """The server's own answer, asked without lmclient."""
    body = json.dumps({"model": server.model, "query": QUERY, "documents": documents}).encode()
    request = urllib.request.Request(
        server.base_url + "/rerank", body, {"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        results: list[dict[str, float]] = json.loads(answer.read())["results"]
    return results


def test_rerank_is_the_servers_answer_best_first(
    llama_reranking: llamacpp.LlamaServer,
) -> None:
    with lmclient.Client(llama_reranking.base_url) as client:  # auto: llama.cpp, /v1/rerank
        ranked = client.rerank(QUERY, DOCUMENTS)
        again = client.rerank(QUERY, DOCUMENTS)
    assert client.dialect == "llamacpp"
    assert sorted(r.index for r in ranked) == list(range(len(DOCUMENTS)))
    assert [r.document for r in ranked] == [DOCUMENTS[r.index] for r in ranked]
    scores = [r.score for r in ranked]
    assert scores == sorted(scores, reverse=True)
    raw = {
        item["index"]: item["relevance_score"] for item in _raw_rerank(llama_reranking, DOCUMENTS)
    }
    assert {r.index: r.score for r in ranked} == raw  # the server's scores, unchanged
    assert again == ranked  # one slot: the same answer each time


def test_top_n_is_sent_and_the_best_kept(llama_reranking: llamacpp.LlamaServer) -> None:
    with lmclient.Client(llama_reranking.base_url) as client:
        everything = client.rerank(QUERY, DOCUMENTS)
        best_two = client.rerank(QUERY, DOCUMENTS, top_n=2)
    assert best_two == everything[:2]


async def test_async_rerank_reads_the_same(llama_reranking: llamacpp.LlamaServer) -> None:
    with lmclient.Client(llama_reranking.base_url) as client:
        expected = client.rerank(QUERY, DOCUMENTS, top_n=3)
    async with lmclient.AsyncClient(llama_reranking.base_url) as client:
        assert await client.rerank(QUERY, DOCUMENTS, top_n=3) == expected
        assert await client.rerank(QUERY, []) == []


@pytest.mark.parametrize("which", ["llama", "llama_embeddings"])
def test_rerank_without_reranking_is_the_servers_501(
    which: str, request: pytest.FixtureRequest
) -> None:
    server: llamacpp.LlamaServer = request.getfixturevalue(which)
    with (
        lmclient.Client(server.base_url) as client,
        pytest.raises(lmclient.APIStatusError, match="--reranking") as caught,
    ):
        client.rerank(QUERY, DOCUMENTS, top_n=1)
    assert client.dialect == "llamacpp"
    assert caught.value.status_code == 501
    recorded = json.loads((RECORDED / "llamacpp_rerank_not_supported_501.json").read_bytes())
    assert caught.value.body == recorded  # the recorded body is what this build answers


async def test_async_rerank_without_reranking_is_the_servers_501(
    llama: llamacpp.LlamaServer,
) -> None:
    async with lmclient.AsyncClient(llama.base_url) as client:
        with pytest.raises(lmclient.APIStatusError, match="--reranking") as caught:
            await client.rerank(QUERY, DOCUMENTS)
    assert caught.value.status_code == 501


def test_score_and_classify_are_refused_once_the_server_is_detected(
    llama_reranking: llamacpp.LlamaServer,
) -> None:
    with lmclient.Client(llama_reranking.base_url) as client:
        with pytest.raises(lmclient.UnsupportedConstraintError, match="no score endpoint"):
            client.score("a", ["b"])
        with pytest.raises(lmclient.UnsupportedConstraintError, match="no classify endpoint"):
            client.classify(["a"])
        assert client.dialect == "llamacpp"


async def test_async_score_and_classify_are_refused(llama: llamacpp.LlamaServer) -> None:
    async with lmclient.AsyncClient(llama.base_url, model=llama.model, dialect="llamacpp") as c:
        with pytest.raises(lmclient.UnsupportedConstraintError, match="no score endpoint"):
            await c.score(["a"], ["b"])
        with pytest.raises(lmclient.UnsupportedConstraintError, match="no classify endpoint"):
            await c.classify(["a"])
