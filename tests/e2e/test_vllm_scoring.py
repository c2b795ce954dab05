"""rerank, score and classify end to end against a real vLLM 0.32 serving Gemma 3 270M as a
one-class sequence classifier (``vllm_scoring`` below): ``--runner pooling --convert classify``,
the head made from the ``no`` and ``yes`` rows of the output layer (vLLM's way of serving a
generative reranker). The scores mean nothing (the model was never trained to rank); what is
tested is the client against the server's own answers: paths, order, cut, the same pair's
score on both endpoints, one class per text. Answers of this server are recorded in
tests/fixtures/scoring."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

import lmclient
from scripts import vllm

pytestmark = pytest.mark.timeout(300, func_only=True)  # the server's start is bounded apart

QUERY = "Where is the cat?"
DOCUMENTS = ["A dog barked.", "The cat sat on the mat.", "Bonjour", "Cats sleep a lot."]
CLASSIFIER = (
    "--runner",
    "pooling",
    "--convert",
    "classify",
    "--hf-overrides",
    json.dumps({"classifier_from_token": ["no", "yes"], "method": "from_2_way_softmax"}),
)


@pytest.fixture(scope="module")
def vllm_scoring(vllm_installed: vllm.Installation) -> Iterator[vllm.VllmServer]:
    """A second vLLM, serving the model as a classifier (minutes to start on 2 cores, bounded
    by its readiness deadline); stopped, by its process group, with the module."""
    with vllm.VllmServer(extra_args=CLASSIFIER) as server:
        yield server


def test_rerank_and_score_agree(vllm_scoring: vllm.VllmServer) -> None:
    with lmclient.Client(vllm_scoring.base_url) as client:  # auto: vllm, /rerank and /score
        ranked = client.rerank(QUERY, DOCUMENTS)
        best_two = client.rerank(QUERY, DOCUMENTS, top_n=2)
        scores = client.score(QUERY, DOCUMENTS)
        pairwise = client.score([QUERY] * 2, DOCUMENTS[:2])
    assert client.dialect == "vllm"
    assert sorted(r.index for r in ranked) == list(range(len(DOCUMENTS)))
    assert [r.score for r in ranked] == sorted((r.score for r in ranked), reverse=True)
    assert [r.document for r in ranked] == [DOCUMENTS[r.index] for r in ranked]
    assert best_two == ranked[:2]  # cut by the server (top_n sent), the same two
    assert {r.index: r.score for r in ranked} == pytest.approx(dict(enumerate(scores)))
    assert pairwise == pytest.approx(scores[:2])
    assert all(0.0 <= s <= 1.0 for s in scores)  # a sigmoid over the two rows' difference


def test_classify_one_class_per_text(vllm_scoring: vllm.VllmServer) -> None:
    with lmclient.Client(vllm_scoring.base_url) as client:
        classes = client.classify(["I loved it", "Never again", "I loved it"])
    assert [len(c.probabilities) for c in classes] == [1, 1, 1]  # one class: num_classes 1
    assert {c.label for c in classes} == {"LABEL_0"}
    assert classes[0].probabilities == pytest.approx(classes[2].probabilities)


async def test_async_reads_the_same(vllm_scoring: vllm.VllmServer) -> None:
    with lmclient.Client(vllm_scoring.base_url) as client:
        ranked = client.rerank(QUERY, DOCUMENTS, top_n=3)
        scores = client.score(QUERY, DOCUMENTS)
    async with lmclient.AsyncClient(vllm_scoring.base_url) as client:
        assert [r.index for r in await client.rerank(QUERY, DOCUMENTS, top_n=3)] == [
            r.index for r in ranked
        ]
        assert await client.score(QUERY, DOCUMENTS) == pytest.approx(scores)
        (only,) = await client.classify(["I loved it"])
    assert only.label == "LABEL_0"


def test_the_first_releases_score_path_is_still_answered(vllm_scoring: vllm.VllmServer) -> None:
    """``vllm-guided`` (the releases before structured outputs) sends score to ``/v1/score``,
    where they served it; this release answers there too, with the same scores."""
    with lmclient.Client(vllm_scoring.base_url) as client:
        expected = client.score(QUERY, DOCUMENTS)
    model = vllm_scoring.model
    with lmclient.Client(vllm_scoring.base_url, model=model, dialect="vllm-guided") as client:
        assert client.score(QUERY, DOCUMENTS) == pytest.approx(expected)
