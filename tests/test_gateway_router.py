"""lmclient's default client through a real SGLang Model Gateway (sglang-router 0.3.2,
`scripts/gateway.py`, --backend openai, cache-aware) in front of two FakeLLM workers on
127.0.0.1: detection, the gateway's dialect, and a worker stopped in the middle of
`generate_many` losing no item. The same against two llama-servers: tests/e2e/test_gateway.py.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Literal

import msgspec
import pytest

import lmclient
from lmclient.testing import FakeLLM
from scripts import gateway

pytestmark = pytest.mark.slow  # a process, seconds to start


class Person(msgspec.Struct):
    name: str
    age: int


def _worker(**kwargs: object) -> FakeLLM:
    """FakeLLM as a worker the gateway can health-check; it reads every constraint field (the
    gateway decides which reach it)."""
    fake = FakeLLM(server="generic", **kwargs)  # type: ignore[arg-type]
    fake.add_route("GET", "/health", {"status": "ok"})
    return fake


@contextlib.contextmanager
def _fleet(*workers: FakeLLM) -> Iterator[tuple[gateway.Gateway, list[contextlib.ExitStack]]]:
    """The gateway in front of ``workers``, each served in its own stack (close one to stop
    that worker); everything stopped, by PID or by its server, on the way out."""
    stacks = [contextlib.ExitStack() for _ in workers]
    try:
        urls = [
            s.enter_context(w.serve()).removesuffix("/v1")
            for s, w in zip(stacks, workers, strict=True)
        ]
        with gateway.Gateway(urls) as router:
            yield router, stacks
    finally:
        for stack in stacks:
            stack.close()


def test_the_default_client_detects_the_gateway_and_speaks_its_dialect() -> None:
    workers = [_worker(), _worker()]
    with _fleet(*workers) as (router, _), lmclient.Client(router.base_url) as client:
        assert isinstance(client.generate("Q", Person), Person)
        assert client.generate("Q", Literal["yes", "no"]) in ("yes", "no")
        info = client.server_info
        assert info is not None and (info.kind, info.dialect) == (
            "sglang-gateway",
            "sglang-gateway",
        )
        with pytest.raises(lmclient.UnsupportedConstraintError, match="sglang-router"):
            client.generate("Q", lmclient.Regex("[a-z]+"))
        with client.stream("List.", list[int]) as stream:
            items = list(stream.items())
        assert items == stream.value
    bodies = [r.body for w in workers for r in w.requests if r.method == "POST"]
    assert len(bodies) == 3
    assert all(b["response_format"]["json_schema"]["strict"] is True for b in bodies)
    assert all("max_tokens" not in b for b in bodies)  # sent as max_completion_tokens, if sent


def test_a_forced_dialect_whose_fields_the_gateway_drops_is_not_called_truncation() -> None:
    worker = _worker(default_text="Sure! Here is a person for you: Ann, who is thirty.")
    with (
        _fleet(worker) as (router, _),
        lmclient.Client(router.base_url, dialect="llamacpp") as client,
        pytest.raises(lmclient.ConstraintIgnoredError, match="grammar"),
    ):
        client.generate("Who?", Person, max_tokens=8)


def test_a_worker_stopped_in_the_middle_of_generate_many_loses_no_item() -> None:
    """The worker that takes the 40th request is stopped then (the cache-aware policy may send
    most of a run to one worker): the gateway retries on the other and drops the stopped one
    at its next health check, lmclient retries what still fails, and no item is lost."""
    chosen = threading.Event()
    lock = threading.Lock()
    counts = [0, 0]
    victim: list[int] = []

    def counter(index: int) -> Callable[[object], None]:
        def on_request(_request: object) -> None:
            with lock:
                counts[index] += 1
                if sum(counts) == 40:
                    victim.append(index)
                    chosen.set()

        return on_request

    workers = [_worker(on_request=counter(0)), _worker(on_request=counter(1))]
    with _fleet(*workers) as (router, stacks):

        def stop_the_chosen() -> None:
            if chosen.wait(60) and victim:
                stacks[victim[0]].close()

        stopper = threading.Thread(target=stop_the_chosen)
        stopper.start()
        try:
            # A request cut by the stop may hang in the gateway: lmclient's timeout retries it.
            with lmclient.Client(router.base_url, max_retries=6, timeout=10) as client:
                prompts = [f"{i:03d}: who is this person?" for i in range(200)]
                values = client.generate_many(prompts, Person, concurrency=8)
        finally:
            chosen.set()
            stopper.join()
    assert victim  # a worker was stopped in the middle of the run
    assert len(values) == 200 and all(isinstance(v, Person) for v in values)
    assert sum(counts) >= 200
