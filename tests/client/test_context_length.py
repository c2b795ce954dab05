"""`ContextLengthError`: a 400 that says the prompt (with the tokens asked for) does not fit the
model's context, with the numbers the server stated. Recorded answers first (their origin in
each folder's README), then the wordings read in the servers' sources, then over sockets."""

from __future__ import annotations

import json
from typing import Any

import pytest

import lmclient
from lmclient import _status, errors
from lmclient.testing import FakeLLM
from tests.helpers import EXAMPLES, FIXTURES, LLAMACPP_LIVE

RECORDED = [
    # (file, context length, prompt tokens, requested tokens)
    (LLAMACPP_LIVE / "err_context_overflow.response.json", 4096, 6009, None),
    (FIXTURES / "vllm" / "err_context_overflow.response.json", 2048, 2049, None),
    (FIXTURES / "vllm" / "err_max_tokens_over_context.response.json", 2048, None, 4096),
    (EXAMPLES / "vllm_error_flat_pre_0.10.1.json", 2048, 1699, 1024),
    (EXAMPLES / "vllm_error_nested_0.10.1_plus.json", 32768, 39197, None),
    (EXAMPLES / "vllm_error_max_tokens_too_large.json", 4096, 2778, 8000),
    (EXAMPLES / "sglang_error_context_input.json", 4096, 4200, None),
    (EXAMPLES / "sglang_error_context_total.json", 4096, 1000, 3500),
    (EXAMPLES / "openai_error_context_length_exceeded.json", 4097, 4294, None),
]


@pytest.mark.parametrize(
    ("path", "context", "prompt", "requested"), RECORDED, ids=[r[0].name for r in RECORDED]
)
def test_recorded_answers(
    path: Any, context: int, prompt: int | None, requested: int | None
) -> None:
    body = path.read_bytes()
    exc = _status.api_error(400, {"x-request-id": "r1"}, body)
    assert type(exc) is errors.ContextLengthError
    assert isinstance(exc, errors.BadRequestError)  # code that catches 400s still does
    assert (exc.context_length, exc.prompt_tokens, exc.requested_tokens) == (
        context,
        prompt,
        requested,
    )
    assert exc.status_code == 400 and exc.body == json.loads(body) and exc.request_id == "r1"


def envelope(message: str, **fields: Any) -> bytes:
    return json.dumps({"error": {"message": message, "type": "BadRequestError", **fields}}).encode()


@pytest.mark.parametrize(
    ("message", "numbers"),
    [
        # vLLM 0.32, renderers/params.py: a text too long to tokenize, in characters
        (
            "This model's maximum context length is 2048 tokens. However, your prompt contains "
            "90000 characters (more than 81920 characters, which is the upper bound for 2048 "
            "input tokens). Please reduce the length of the input prompt. "
            "(parameter=input_text, value=90000)",
            (2048, None, None),
        ),
        # vLLM 0.32, serve/utils/api_utils.py::get_max_tokens
        ("Input length (5000) exceeds model's maximum context length (4096).", (4096, 5000, None)),
        # vLLM 0.5, serving_engine.py, no max_tokens given
        (
            "This model's maximum context length is 2048 tokens. However, you requested 2100 "
            "tokens in the messages, Please reduce the length of the messages.",
            (2048, 2100, None),
        ),
        # vLLM between, as users quote it
        (
            "This model's maximum context length is 4096 tokens. However, you requested 100 "
            "output tokens and your prompt contains at least 4097 input tokens, for a total of "
            "at least 4197 tokens.",
            (4096, 4097, 100),
        ),
        (
            "This model's maximum context length is 4096 tokens. However, your request has 5000 "
            "input tokens. Please reduce the length of the input messages.",
            (4096, 5000, None),
        ),
        # OpenAI's legacy completions
        (
            "This model's maximum context length is 4097 tokens, however you requested 4231 "
            "tokens (3975 in your prompt; 256 for the completion). Please reduce your prompt; "
            "or completion length.",
            (4097, 3975, 256),
        ),
        # llama.cpp builds before the numbers were stated
        ("the request exceeds the available context size, try increasing it", (None, None, None)),
    ],
)
def test_wordings(message: str, numbers: tuple[int | None, ...]) -> None:
    kind = "exceed_context_size_error" if "available context" in message else None
    exc = _status.api_error(400, {}, envelope(message, type=kind))
    assert isinstance(exc, errors.ContextLengthError), message
    assert (exc.context_length, exc.prompt_tokens, exc.requested_tokens) == numbers


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, envelope("Failed to parse grammar")),
        # vLLM 0.32: a truncation parameter over the context is not a prompt that does not fit
        (
            400,
            envelope(
                "truncate_prompt_tokens=5000 cannot be greater than max_model_len = 4096. "
                "Please request a smaller truncation size."
            ),
        ),
        (500, envelope("This model's maximum context length is 2048 tokens.")),
        (404, envelope("The model `m` does not exist.", code="context_length_exceeded")),
    ],
)
def test_other_errors_stay_what_they_were(status: int, body: bytes) -> None:
    exc = _status.api_error(status, {}, body)
    assert not isinstance(exc, errors.ContextLengthError)


def test_code_alone_is_enough() -> None:
    exc = _status.api_error(400, {}, envelope("too long", code="context_length_exceeded"))
    assert isinstance(exc, errors.ContextLengthError)
    assert (exc.context_length, exc.prompt_tokens, exc.requested_tokens) == (None, None, None)


def test_raised_by_calls_and_streams_over_sockets(fake: FakeLLM, url: str) -> None:
    recorded = (LLAMACPP_LIVE / "err_context_overflow.response.json").read_bytes()
    fake.reply_error(400, recorded, times=None)
    with lmclient.Client(url, "fake-model") as client:
        with pytest.raises(lmclient.ContextLengthError) as info:
            client.generate("Q")
        assert (info.value.context_length, info.value.prompt_tokens) == (4096, 6009)
        with pytest.raises(lmclient.ContextLengthError), client.stream("Q") as stream:
            stream.read()
    assert len(fake.calls) == 2  # a 400 is not retried


async def test_async(fake: FakeLLM, url: str) -> None:
    fake.reply_error(400, "Input length (5000) exceeds model's maximum context length (4096).")
    async with lmclient.AsyncClient(url, "fake-model") as client:
        with pytest.raises(lmclient.ContextLengthError) as info:
            await client.generate("Q")
    assert (info.value.context_length, info.value.prompt_tokens) == (4096, 5000)
