"""The fake's scoring routes: ``/rerank``, ``/score``, ``/classify``, as the imitated server
has them (the table is the client's, `lmclient._scoring.SCORING`): at its paths, in its answer
shapes, 404 where it has none. A query and a document score by the words they share, so that a
test knows which order to expect."""

from __future__ import annotations

import zlib
from typing import Any

from ._embeddings import embeddings_response, tokenize_response
from ._models import Models
from ._recording import Endpoint, RecordedRequest
from ._wire import FakeResponse, error_response, estimate_tokens, json_response

__all__ = ["API_ROUTES", "ROOT_ROUTES", "fake_classes", "fake_score", "pooling_response"]

# Under the API's base path (``/v1/rerank``, ...), and at the server's root.
API_ROUTES: dict[str, Endpoint] = {
    "/rerank": "scoring",
    "/score": "scoring",
    "/classify": "scoring",
}
ROOT_ROUTES: dict[str, Endpoint] = {"/tokenize": "tokenize", **API_ROUTES}
LABELS = ("negative", "positive")  # the fake classifier's classes


def fake_score(a: str, b: str) -> float:
    """The fake cross-encoder: the share of the two texts' words (lower-cased) they have in
    common, from 0 (none) to 1 (the same words)."""
    first, second = set(a.lower().split()), set(b.lower().split())
    either = first | second
    return len(first & second) / len(either) if either else 0.0


def fake_classes(text: str) -> list[float]:
    """The fake classifier's probabilities of `LABELS` for ``text``: a pure function of it."""
    positive = (zlib.crc32(text.encode()) % 1001) / 1000
    return [1.0 - positive, positive]


def pooling_response(
    request: RecordedRequest, body: Any, server: str | None, models: Models
) -> FakeResponse:
    """The pooling routes: embeddings, tokenize and scoring, as the imitated server has them."""
    if request.endpoint == "embeddings":
        return embeddings_response(request, body, server, models)
    if request.endpoint == "tokenize":
        return tokenize_response(request, body, server)
    from lmclient._scoring import SCORING  # on first use: it imports the client's core

    routes = SCORING["vllm" if server is None else server]
    kind = next((k for k, route in routes.items() if route.path == request.path), None)
    if kind is None:
        message = f"Route {request.method} {request.path} not found"
        return error_response(404, message, "not_found_error", code=404)
    if not isinstance(body, dict):
        return _bad_request("The request body is not a JSON object")
    refused = models.refusal(body)
    if refused is not None:
        return refused
    model = models.asked(body)
    if kind == "rerank":
        return _rerank(body, server, model)
    if kind == "score":
        return _score(body, model)
    return _classify(body, model)


def _texts(value: Any) -> list[str] | None:
    """A str or a non-empty list of str, as a list; ``None`` for anything else."""
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        return None
    return texts


def _rerank(body: dict[str, Any], server: str | None, model: str) -> FakeResponse:
    """vLLM's Jina shape (``top_n`` 0: all), llama.cpp's (cut to ``top_n``, no documents) or
    SGLang's bare array (no ``top_n``), best first."""
    query, documents = body.get("query"), body.get("documents")
    if not isinstance(query, str) or not isinstance(documents, list) or not documents:
        return _bad_request("query (a string) and documents (a non-empty list) are required")
    if not all(isinstance(d, str) for d in documents):
        return _bad_request("documents: each must be a string")
    top_n = body.get("top_n", 0)
    if server == "sglang":
        top_n = 0  # SGLang reads no top_n
    elif isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 0:
        return _bad_request("top_n must be a non-negative integer")
    ranked = sorted(
        ((fake_score(query, d), i, d) for i, d in enumerate(documents)), key=lambda r: -r[0]
    )
    if top_n:
        ranked = ranked[:top_n]
    tokens = sum(estimate_tokens(query + d) for d in documents)
    if server == "sglang":
        array = [{"score": s, "document": d, "index": i, "meta_info": {}} for s, i, d in ranked]
        return json_response(200, array)
    if server == "llamacpp":
        results: list[dict[str, Any]] = [{"index": i, "relevance_score": s} for s, i, _ in ranked]
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        return json_response(
            200, {"model": model, "object": "list", "usage": usage, "results": results}
        )
    results = [{"index": i, "document": {"text": d}, "relevance_score": s} for s, i, d in ranked]
    answer = {"id": "rerank-fake", "model": model, "usage": {"total_tokens": tokens}}
    return json_response(200, {**answer, "results": results})


def _score(body: dict[str, Any], model: str) -> FakeResponse:
    """vLLM's ``{text_1, text_2}``: one to one, one to many, or many to as many."""
    firsts, seconds = _texts(body.get("text_1")), _texts(body.get("text_2"))
    if firsts is None or seconds is None:
        return _bad_request("text_1 and text_2: a string or a non-empty list of strings")
    if len(firsts) == 1:
        firsts *= len(seconds)
    if len(firsts) != len(seconds):
        return _bad_request("Input lengths must be either 1:1, 1:N or N:N")
    pairs = list(zip(firsts, seconds, strict=True))
    data = [
        {"index": i, "object": "score", "score": fake_score(a, b)} for i, (a, b) in enumerate(pairs)
    ]
    return _listed(data, model, sum(estimate_tokens(a + b) for a, b in pairs))


def _classify(body: dict[str, Any], model: str) -> FakeResponse:
    """vLLM's and SGLang's ``{input}``: a class per text."""
    texts = _texts(body.get("input"))
    if texts is None:
        return _bad_request("input: a string or a non-empty list of strings is required")
    data = []
    for index, text in enumerate(texts):
        probs = fake_classes(text)
        label = LABELS[probs.index(max(probs))]
        data.append({"index": index, "label": label, "probs": probs, "num_classes": len(probs)})
    return _listed(data, model, sum(estimate_tokens(t) for t in texts))


def _listed(data: list[dict[str, Any]], model: str, tokens: int) -> FakeResponse:
    usage = {"prompt_tokens": tokens, "total_tokens": tokens, "completion_tokens": 0}
    return json_response(200, {"object": "list", "model": model, "data": data, "usage": usage})


def _bad_request(message: str) -> FakeResponse:
    return error_response(400, message, "BadRequestError", param=None, code=400)
