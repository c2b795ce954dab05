"""Shared fixtures: recorded server bytes (``tests/fixtures``) and response-body builders."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from lmclient.testing import FakeLLM

# Loopback servers are reached directly, even where the environment sets a proxy (lmclient, like
# httpx, honours HTTP_PROXY); other traffic (pip, in the plugin test) keeps the proxy.
for _name in ("no_proxy", "NO_PROXY"):
    os.environ[_name] = ",".join(filter(None, [os.environ.get(_name), "127.0.0.1", "localhost"]))

FIXTURES = pathlib.Path(__file__).parent / "fixtures"  # recorded server bytes: see its README
EXAMPLES = FIXTURES / "examples"
LLAMACPP_LIVE = FIXTURES / "llamacpp-live"


@pytest.fixture
def fake() -> FakeLLM:
    return FakeLLM()


@pytest.fixture
def url(fake: FakeLLM) -> Iterator[str]:
    """The fake served on 127.0.0.1 for the test's duration."""
    with fake.serve() as base_url:
        yield base_url


def chat_body(
    content: str | None,
    *,
    finish_reason: str | None = "stop",
    n: int = 1,
    **message: Any,
) -> dict[str, Any]:
    """A vLLM-shaped chat completion body."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": i,
                "message": {"role": "assistant", "content": content, **message},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
            for i in range(n)
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8},
    }


def completion_body(text: str, *, finish_reason: str | None = "stop") -> dict[str, Any]:
    """A vLLM-shaped text completion body."""
    return {
        "id": "cmpl-1",
        "object": "text_completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8},
    }
