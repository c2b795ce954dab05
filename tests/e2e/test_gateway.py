"""lmclient's default client through the SGLang Model Gateway (sglang-router 0.3.2, installed by
`scripts/gateway.py`, --backend openai, cache-aware policy) in front of two llama-servers on
127.0.0.1: every output type of the llama.cpp e2e validates (or, where the gateway cannot carry
its constraint, is refused before sending), the same prefix lands on the same worker, a worker
stopped in the middle of a `generate_many` of 200 items loses none, and streams go through.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Annotated, Any

import msgspec
import pytest

import lmclient
from scripts import gateway, llamacpp
from tests.e2e.helpers import KINDS, SMALL, Pet, Pets

Age = Annotated[int, msgspec.Meta(ge=0, le=150)]  # (bounded: a 3-token budget)

# Two llama-servers and the gateway start with the first test: a minute on a busy machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


class Fleet(msgspec.Struct):
    router: Any
    workers: list[Any]


@pytest.fixture(scope="module")
def fleet() -> Iterator[Fleet]:
    llamacpp.ensure_installed()
    gateway.ensure_installed()  # `make test` has already run the first install, with progress
    with (
        llamacpp.LlamaServer(parallel=2) as first,
        llamacpp.LlamaServer(parallel=2) as second,
        gateway.Gateway([first.root_url, second.root_url]) as router,
    ):
        yield Fleet(router, [first, second])


@pytest.mark.parametrize(("name", "output_type", "expected"), KINDS, ids=[k[0] for k in KINDS])
def test_every_kind(name: str, output_type: Any, expected: type, fleet: Fleet) -> None:
    with lmclient.Client(fleet.router.base_url) as client:  # model=None and dialect="auto"
        if name in ("regex", "grammar"):  # only response_format reaches the workers
            with pytest.raises(lmclient.UnsupportedConstraintError, match="sglang-router"):
                client.create("Answer briefly.", output_type, **SMALL)
            return
        response = client.create("Answer briefly.", output_type, **SMALL)
        assert client.dialect == "sglang-gateway"
    assert isinstance(response.value, expected)
    assert response.finish_reason == "stop"


class Item(msgspec.Struct):
    name: str
    count: int


# Through --backend openai only response_format reaches the workers, and llama.cpp's schema
# mode lets the model write whitespace between tokens: a two-field struct took 131 tokens,
# mostly newlines, measured (issue 39). With 60 tokens, such an answer is a runaway of
# whitespace, which names the gateway's mode, never a cut answer told to raise max_tokens.
PADDED = ["Describe one item.", "Invent an item and its count.", "Name a fruit and a number."]


@pytest.mark.parametrize("prompt", PADDED)
def test_a_struct_validates_or_its_whitespace_is_named_with_the_gateway_mode(
    prompt: str, fleet: Fleet
) -> None:
    with lmclient.Client(fleet.router.base_url) as client:
        try:
            value = client.generate(prompt, Item, max_tokens=60, temperature=0.0, seed=1)
        except lmclient.RunawayError as exc:  # (a plain TruncatedError fails the test)
            message = str(exc)  # the padding, or a loop beside it: the whitespace is named
            assert "whitespace" in message and "--backend openai" in message, message
            assert "raise max_tokens" not in message
        else:
            assert isinstance(value, Item)


def _cached(response: lmclient.Response[Any]) -> int:
    """The prompt tokens the worker took from a slot's cache (``cached_tokens``)."""
    usage = response.usage
    details = None if usage is None else usage.prompt_tokens_details
    return 0 if details is None or details.cached_tokens is None else details.cached_tokens


def test_the_same_prefix_lands_on_the_same_worker(fleet: Fleet) -> None:
    prompt = "Describe, in one word, the colour of the sea on a calm and sunny day. " * 8
    with lmclient.Client(fleet.router.base_url) as client:
        responses = [client.create(prompt, max_tokens=2, temperature=0.0) for _ in range(4)]
    # A repeat on another worker would find nothing cached there (round robin would alternate).
    assert all(_cached(r) > 0 for r in responses[1:]), [_cached(r) for r in responses]


def test_streams_and_items_go_through(fleet: Fleet) -> None:
    with lmclient.Client(fleet.router.base_url) as client:
        with client.stream("List pets.", Pets, **SMALL) as s:
            items = list(s.items())
        assert items and all(isinstance(p, Pet) for p in items) and s.value == items
        with client.stream("Say hello.", max_tokens=16, seed=1) as text:
            deltas = list(text)
        assert "".join(deltas) == text.value


async def test_async_stream_items(fleet: Fleet) -> None:
    async with (
        lmclient.AsyncClient(fleet.router.base_url) as client,
        client.stream("List pets.", Pets, **SMALL) as s,
    ):
        items = [p async for p in s.items()]
    assert items and s.value == items


def _busy(workers: list[llamacpp.LlamaServer]) -> llamacpp.LlamaServer:
    """A worker with a slot generating now (llama-server's ``GET /slots``), else the last."""
    for worker in workers:
        with llamacpp._NO_PROXY.open(worker.root_url + "/slots", timeout=10) as answer:
            if any(slot.get("is_processing") for slot in json.loads(answer.read())):
                return worker
    return workers[-1]


@pytest.mark.timeout(1800)  # 200 structured answers from a 270M model on two shared cores
def test_a_worker_stopped_in_the_middle_of_generate_many_loses_no_item(fleet: Fleet) -> None:
    """Last in the module: it stops a worker that is generating (the cache-aware policy may
    send a run's prompts to one worker only). The gateway retries a failed request on the
    other worker and drops the stopped one at its next health check (every second); lmclient
    retries what still fails."""
    halfway = threading.Event()
    done = 0

    def count(_index: int, _value: object) -> None:
        nonlocal done
        done += 1
        if done == 60:
            halfway.set()

    stopped: list[llamacpp.LlamaServer] = []

    def stop_a_busy_one() -> None:
        halfway.wait(600)
        stopped.append(_busy(fleet.workers))
        stopped[0].stop()

    stopper = threading.Thread(target=stop_a_busy_one)
    stopper.start()
    try:
        with lmclient.Client(fleet.router.base_url, max_retries=6, timeout=300) as client:
            # an age: a few tokens each (llama.cpp samples a grammar at ~0.15 s a token on
            # one thread), so 200 answers take minutes, not a quarter of an hour
            prompts = [f"{i:03d}: how old is a person born {i % 90} years ago?" for i in range(200)]
            values = client.generate_many(prompts, Age, concurrency=4, on_result=count, **SMALL)
    finally:
        halfway.set()
        stopper.join()
    assert stopped and not stopped[0].running
    assert len(values) == 200 and all(isinstance(v, int) and 0 <= v <= 150 for v in values)
