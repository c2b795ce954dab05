"""The fake's embedding and token routes: ``POST /v1/embeddings`` and ``POST /tokenize``, as the
imitated server has them (the endpoint table is the client's, `lmclient._embeddings.ENDPOINTS`),
with deterministic vectors and token ids computed from the text, so that a test can compare
answers across calls."""

from __future__ import annotations

import array
import base64
import hashlib
import math
import random
import sys
import zlib
from typing import Any

from ._models import Models
from ._recording import RecordedRequest, message_text
from ._wire import FakeResponse, error_response, estimate_tokens, json_response

__all__ = [
    "DIMENSIONS",
    "VOCABULARY",
    "chat_text",
    "embeddings_response",
    "fake_tokens",
    "fake_vector",
    "tokenize_response",
]

DIMENSIONS = 32  # the fake model's embedding size, when no ``dimensions`` is asked for
BOS = 2  # the token id the fake's tokenizer adds first when special tokens are asked for
VOCABULARY = 32_000  # the fake tokenizer's ids are below it


def fake_vector(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    """The fake's embedding of ``text``: unit length, a pure function of the text and size,
    each value a float32 (so that the float and base64 answers hold the same numbers)."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    rng = random.Random(seed)
    values = [rng.gauss(0.0, 1.0) for _ in range(dimensions)]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return list(array.array("f", [v / norm for v in values]))


def fake_tokens(text: str, add_special: bool) -> list[int]:
    """The fake tokenizer: one id per four characters (the fake's token estimate)."""
    ids = [zlib.crc32(text[i : i + 4].encode()) % VOCABULARY for i in range(0, len(text), 4)]
    assert len(ids) == estimate_tokens(text)
    return [BOS, *ids] if add_special else ids


def _endpoints(server: str | None) -> Any:
    """The imitated server's row of the client's table (imported on first use: it imports the
    client's core, and so httpx, which the fake does not need otherwise)."""
    from lmclient._embeddings import ENDPOINTS

    return ENDPOINTS["vllm" if server is None else server]


def embeddings_response(
    request: RecordedRequest, body: Any, server: str | None, models: Models
) -> FakeResponse:
    """``POST /v1/embeddings``: 404 where the imitated server has no such endpoint; 400 for
    what a server refuses; else one vector per input, as floats or base64 as asked (a server
    that does not read ``encoding_format`` or ``dimensions`` ignores them, as in production)."""
    endpoints = _endpoints(server)
    if not endpoints.embeddings:
        return _not_found(request)
    if not isinstance(body, dict):
        return _bad_request("The request body is not a JSON object")
    refused = models.refusal(body)
    if refused is not None:
        return refused
    model = models.asked(body)
    texts = body.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        return _bad_request("input: a string or a non-empty list of strings is required")
    fmt = body.get("encoding_format", "float") if endpoints.base64 else "float"
    if fmt not in ("float", "base64"):
        return _bad_request("encoding_format must be either 'float' or 'base64'")
    size = body.get("dimensions") if endpoints.dimensions else None
    if size is None:
        size = DIMENSIONS
    elif isinstance(size, bool) or not isinstance(size, int) or size < 1:
        return _bad_request("dimensions must be a positive integer")
    data = []
    for index, text in enumerate(texts):
        vector = fake_vector(text, size)
        embedding: Any = vector if fmt == "float" else _base64(vector)
        data.append({"object": "embedding", "index": index, "embedding": embedding})
    tokens = sum(max(1, estimate_tokens(t)) for t in texts)
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return json_response(200, {"object": "list", "data": data, "model": model, "usage": usage})


def tokenize_response(request: RecordedRequest, body: Any, server: str | None) -> FakeResponse:
    """``POST /tokenize``: vLLM's and SGLang's ``{prompt, add_special_tokens}`` or
    ``{messages}`` → ``{count, max_model_len, tokens}``, llama.cpp's ``{content, add_special}``
    → ``{tokens}`` (each with its server's default); llama.cpp's ``POST
    /v1/chat/completions/input_tokens`` ``{messages}`` → ``{input_tokens}``. 404 on servers
    without them."""
    shape = _endpoints(server).tokenize
    counting = request.path.endswith("/chat/completions/input_tokens")
    served = request.path == "/tokenize" or (counting and shape == "llamacpp")
    if shape is None or not served:
        return _not_found(request)
    if not isinstance(body, dict):
        return _bad_request("The request body is not a JSON object")
    messages = body.get("messages")
    if counting or (shape == "vllm" and messages is not None):
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            return _bad_request("messages: a list of messages is required")
        tokens = fake_tokens(chat_text(messages), True)
        if counting:
            return json_response(
                200, {"input_tokens": len(tokens), "object": "response.input_tokens"}
            )
        return json_response(200, {"count": len(tokens), "max_model_len": 8192, "tokens": tokens})
    if shape == "llamacpp":
        text = body.get("content", "")
        add = body.get("add_special", False)
    else:
        text = body.get("prompt")
        add = body.get("add_special_tokens", True)
    if not isinstance(text, str) or not isinstance(add, bool):
        return _bad_request("the text to tokenize must be a string")
    tokens = fake_tokens(text, add)
    if shape == "llamacpp":
        return json_response(200, {"tokens": tokens})
    return json_response(200, {"count": len(tokens), "max_model_len": 8192, "tokens": tokens})


def chat_text(messages: list[dict[str, Any]]) -> str:
    """The fake's chat template: ``<role>text`` and a newline per message, then the
    generation prompt ``<assistant>``; it is tokenized with the BOS token first."""
    turns = "".join(f"<{m.get('role')}>{message_text(m)}\n" for m in messages)
    return turns + "<assistant>"


def _base64(vector: list[float]) -> str:
    packed = array.array("f", vector)
    if sys.byteorder != "little":
        packed.byteswap()  # the wire is little-endian float32
    return base64.b64encode(packed.tobytes()).decode("ascii")


def _not_found(request: RecordedRequest) -> FakeResponse:
    message = f"Route {request.method} {request.path} not found"
    return error_response(404, message, "not_found_error", code=404)


def _bad_request(message: str) -> FakeResponse:
    return error_response(400, message, "BadRequestError", param=None, code=400)
