"""What the stacks' tests share (and `tests/transports/test_uds.py`, which runs the stacks' app on
a Unix socket): the clients they make, the answers' shape and checks, a stack started or the
test skipped or failed."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

import lmclient
from tests.stacks.app import BIG_PAD, MODEL, stream_items
from tests.stacks.servers import Stack, StackFailed, Stacks, StackUnavailable

TIMEOUT = 20.0  # seconds between bytes, for every client
DEADLINE = 30.0  # seconds for a whole call
PAD = "x" * BIG_PAD


def started(stacks: Stacks, name: str) -> Stack:
    """The running stack, or this test skipped (not installable) or failed (did not start)."""
    try:
        return stacks.get(name)
    except (StackUnavailable, StackFailed) as exc:
        outcome = exc  # skipped or failed below, outside this handler: no chained traceback
    if isinstance(outcome, StackUnavailable):
        pytest.skip(f"{name}: {outcome}")
    pytest.fail(f"{name} did not start: {outcome}", pytrace=False)


class Echo(msgspec.Struct):
    """A non-streamed answer: the prompt, the client's port as the server saw it, a pad."""

    prompt: str
    port: int
    pad: str


def prompt_for(label: str, i: int) -> str:
    """A prompt unlike any other, with characters that JSON escapes."""
    return f'{label} {i} "quoted" \\ ünïcødé ✓'


def check(echo: Echo, prompt: str, *, big: bool = False) -> int:
    """The answer is to this prompt; returns the client's port."""
    assert echo.prompt == prompt
    assert echo.pad == (PAD if big else ""), f"pad of {len(echo.pad)} characters"
    return echo.port


def expected_text(prompt: str) -> str:
    return msgspec.json.encode(stream_items(prompt)).decode()


def sync_client(
    stack: Stack, model: str | None = MODEL, *, path: str = "", **options: Any
) -> lmclient.Client:
    return lmclient.Client(
        f"{stack.url}{path}/v1",
        model,
        dialect="vllm",
        max_retries=0,  # a failure is reported, not retried away
        timeout=TIMEOUT,
        deadline=DEADLINE,
        uds=stack.uds,
        **options,
    )


def async_client(
    stack: Stack, model: str | None = MODEL, *, path: str = "", **options: Any
) -> lmclient.AsyncClient:
    return lmclient.AsyncClient(
        f"{stack.url}{path}/v1",
        model,
        dialect="vllm",
        max_retries=0,
        timeout=TIMEOUT,
        deadline=DEADLINE,
        uds=stack.uds,
        **options,
    )
