"""The fake's scoring routes through FakeLLM.handle: each server's paths (404 elsewhere), its
answer shapes, and the 400s a server answers for what it cannot read."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from lmclient.testing import FakeLLM
from lmclient.testing._scoring import fake_score
from lmclient.testing._wire import FakeResponse

RERANK = {"query": "the cat", "documents": ["a dog", "the cat", "cat"]}


def send(fake: FakeLLM, path: str, body: Any) -> FakeResponse:
    raw = body if isinstance(body, bytes) else msgspec.json.encode(body)
    return fake.handle("POST", path, {"Content-Type": "application/json"}, raw)


def answer(response: FakeResponse) -> Any:
    assert response.status == 200, response.body
    return msgspec.json.decode(response.body)


def test_fake_score_is_the_share_of_words() -> None:
    assert fake_score("The cat", "the CAT") == 1.0
    assert fake_score("a b", "b c") == 1 / 3
    assert fake_score("", "") == 0.0


def test_each_server_answers_rerank_in_its_shape() -> None:
    vllm = answer(send(FakeLLM(), "/rerank", {**RERANK, "top_n": 2}))
    assert [r["index"] for r in vllm["results"]] == [1, 2]
    assert vllm["results"][0]["document"] == {"text": "the cat"}
    assert vllm["usage"]["total_tokens"] > 0
    llamacpp = answer(send(FakeLLM(server="llamacpp"), "/v1/rerank", {**RERANK, "top_n": 1}))
    assert llamacpp["object"] == "list" and llamacpp["results"] == [
        {"index": 1, "relevance_score": 1.0}
    ]
    sglang = answer(send(FakeLLM(server="sglang"), "/v1/rerank", {**RERANK, "top_n": 1}))
    assert [r["index"] for r in sglang] == [1, 2, 0]  # a bare array; top_n is not read
    assert sglang[0]["document"] == "the cat" and sglang[0]["meta_info"] == {}


@pytest.mark.parametrize(
    ("server", "path"),
    [
        ("tgi", "/rerank"),
        ("llamacpp", "/rerank"),  # llama.cpp's is /v1/rerank here
        ("llamacpp", "/score"),
        ("sglang", "/v1/score"),
        ("vllm", "/v1/score"),  # the client sends vLLM's current one, /score
        ("vllm-guided", "/score"),
    ],
)
def test_a_route_the_server_lacks_is_a_404(server: str, path: str) -> None:
    assert send(FakeLLM(server=server), path, RERANK).status == 404


def test_a_gateway_serves_nothing_at_the_root() -> None:
    fake = FakeLLM(gateway=True)
    assert send(fake, "/rerank", RERANK).status == 404
    assert fake.requests[-1].endpoint == "other"


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/rerank", [1], "not a JSON object"),
        ("/rerank", b"{not json", "not a JSON object"),
        ("/rerank", {"query": "q", "documents": []}, "non-empty list"),
        ("/rerank", {"query": 1, "documents": ["a"]}, "query (a string)"),
        ("/rerank", {"query": "q", "documents": ["a", 2]}, "each must be a string"),
        ("/rerank", {"query": "q", "documents": ["a"], "top_n": -1}, "top_n must be"),
        ("/rerank", {"query": "q", "documents": ["a"], "top_n": True}, "top_n must be"),
        ("/score", {"text_1": "a"}, "text_1 and text_2"),
        ("/score", {"text_1": ["a", "b"], "text_2": ["a", "b", "c"]}, "1:1, 1:N or N:N"),
        ("/classify", {"input": []}, "input: a string"),
        ("/classify", {"input": ["a", 3]}, "input: a string"),
    ],
)
def test_what_a_server_cannot_read_is_a_400(path: str, body: Any, message: str) -> None:
    response = send(FakeLLM(), path, body)
    assert response.status == 400
    assert message in msgspec.json.decode(response.body)["error"]["message"]


def test_an_unknown_model_is_a_404() -> None:
    response = send(FakeLLM(["served"]), "/classify", {"model": "other", "input": "a"})
    assert response.status == 404


def test_score_one_to_many_and_classify_a_str() -> None:
    fake = FakeLLM()
    scores = answer(send(fake, "/score", {"text_1": "the cat", "text_2": ["cat", "the cat"]}))
    assert [d["score"] for d in scores["data"]] == [0.5, 1.0]
    (only,) = answer(send(fake, "/classify", {"input": "a text"}))["data"]
    assert only["num_classes"] == 2 and only["label"] in ("negative", "positive")
    assert sum(only["probs"]) == pytest.approx(1.0)
    assert [r.endpoint for r in fake.requests] == ["scoring", "scoring"]
