"""`AsyncClient` calls and streams cancelled at random points against a real uvicorn (h11 over
TCP, httptools over a Unix socket), interleaved with calls that run to their end on the same
client: every answer that arrives is its own, and once it is all over no connection is checked
out, no task is left behind, and the client still works.

The points are chosen by a seeded `random` (one per lane, so each lane's sequence of operations
is the same on every run): a number of event-loop iterations after the call started (before it
connects, while it writes, while it waits), a number of iterations after a stream's head arrived
(the request reached the server), or a number of items into a stream, where the consumer either
carries on (the cancellation lands in lmclient's next wait) or waits in its own code inside the
``async with`` (it lands there). Where each one landed is counted and shown on failure.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest

import lmclient
from tests.stacks.app import FEW_ITEMS, MODEL, stream_items
from tests.stacks.helpers import Echo, async_client, check, prompt_for, started
from tests.stacks.servers import Stacks

pytestmark = pytest.mark.slow  # a real server process

SEED = 26
LANES = 16  # operations in flight at once on the one client
OPS_PER_LANE = 150  # 2,400 operations in all
WITHIN = 90.0  # seconds for all of them: a hang fails the test rather than stalling it
PACKAGE = str(Path(lmclient.__file__).parent)


async def whole_call(client: lmclient.AsyncClient, prompt: str) -> None:
    check(await client.generate(prompt, Echo), prompt)


async def stream_call(
    client: lmclient.AsyncClient,
    prompt: str,
    opened: asyncio.Future[None] | None = None,
    reached: asyncio.Future[None] | None = None,
    at_item: int = 0,
    park: bool = False,
) -> None:
    """A stream (of `FEW_ITEMS`) read to its end and checked; ``opened`` is resolved once its
    head arrived, ``reached`` once ``at_item`` items were read (then with ``park``, it waits in
    the consumer's own code until cancelled)."""
    expected = stream_items(prompt, FEW_ITEMS)
    async with client.stream(prompt, list[str]) as stream:
        if opened is not None:
            opened.set_result(None)
        read = 0
        async for item in stream.items():
            assert item == expected[read], f"item {read} of {prompt!r} is {item!r}"
            read += 1
            if read == at_item and reached is not None:
                reached.set_result(None)
                if park:
                    await asyncio.get_running_loop().create_future()  # never resolved
        assert stream.value == expected
    assert read == len(expected)


class Chaos:
    """The operations of one client, and what became of them."""

    def __init__(self, client: lmclient.AsyncClient) -> None:
        self.client = client
        self.answered = 0  # calls and streams that ran to their end (each answer checked)
        self.cancelled = 0
        self.landed: Counter[str] = Counter()  # where the cancellations landed

    async def lane(self, number: int) -> None:
        rng = random.Random(SEED * 1000 + number)
        loop = asyncio.get_running_loop()
        for i in range(OPS_PER_LANE):
            prompt = prompt_for(f"lane {number}", i)
            roll = rng.random()
            if roll < 0.35:  # a call left alone
                await whole_call(self.client, prompt)
                self.answered += 1
            elif roll < 0.40:  # a stream left alone
                await stream_call(self.client, prompt)
                self.answered += 1
            elif roll < 0.70:  # a call cancelled a number of loop iterations after it started
                task = asyncio.create_task(whole_call(self.client, prompt))
                await self.iterations(task, spread(rng))
                await self.cancel(task)
            elif roll < 0.80:  # a stream, the same
                task = asyncio.create_task(stream_call(self.client, prompt))
                await self.iterations(task, spread(rng))
                await self.cancel(task)
            elif roll < 0.88:  # a stream cancelled once its head arrived, or a little later
                opened = loop.create_future()
                task = asyncio.create_task(stream_call(self.client, prompt, opened))
                await self.first(task, opened)
                await self.iterations(task, rng.randrange(4))
                await self.cancel(task)
            else:  # a stream cancelled a number of items in
                reached = loop.create_future()
                at_item, park = 1 + rng.randrange(FEW_ITEMS - 1), rng.random() < 0.5
                call = stream_call(self.client, prompt, None, reached, at_item, park)
                task = asyncio.create_task(call)
                await self.first(task, reached)
                await self.cancel(task)

    @staticmethod
    async def iterations(task: asyncio.Task[None], n: int) -> None:
        """Let the loop run ``n`` times (fewer if the task ends first)."""
        for _ in range(n):
            if task.done():
                return
            await asyncio.sleep(0)

    @staticmethod
    async def first(task: asyncio.Task[None], gate: asyncio.Future[None]) -> None:
        """Wait until the gate opens or the task ends (a failure, reported by `cancel`)."""
        await asyncio.wait([task, gate], return_when=asyncio.FIRST_COMPLETED)
        gate.cancel()  # (a plain future: nothing to clean up if it never opened)

    async def cancel(self, task: asyncio.Task[None]) -> None:
        """Cancel the task and see how it ended: cancelled, or answered before the cancellation
        reached it (its answer checked); any other outcome fails the test. (Waited for with
        `asyncio.wait`, so that a cancellation of the lane itself is not taken for the task's.)"""
        task.cancel()
        await asyncio.wait([task])
        if not task.cancelled():
            task.result()  # raises what the task raised
            self.answered += 1
            return
        self.cancelled += 1
        try:
            task.result()
        except asyncio.CancelledError as exc:  # the task's own, with its traceback
            self.landed[landing(exc)] += 1


def spread(rng: random.Random) -> int:
    """A number of loop iterations, 0 to 63, as many below 4 as from 16 up: a call over
    loopback takes a few iterations, a new connection a few more."""
    return int(2 ** rng.uniform(0, 6)) - 1


def landing(exc: BaseException) -> str:
    """Where a cancellation landed: lmclient's innermost frame, or the test's own code (a task
    cancelled before it ran, or waiting in the consumer)."""
    where = "the test's code"
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename.startswith(PACKAGE):
            where = f"{Path(code.co_filename).name}:{code.co_name}"
        tb = tb.tb_next
    return where


async def bounded(work: Awaitable[Any], what: str) -> Any:
    try:
        return await asyncio.wait_for(work, WITHIN)
    except asyncio.TimeoutError:
        pass
    pytest.fail(f"{what} did not end within {WITHIN:.0f} s: a hang", pytrace=False)


@pytest.mark.parametrize("name", ["uvicorn-h11", "uvicorn-uds"])
async def test_random_cancellations_leave_the_client_clean(stacks: Stacks, name: str) -> None:
    stack = started(stacks, name)
    client = async_client(stack, f"{MODEL}+few")  # short streams: see `tests.stacks.app`
    pool = client._transport._pool
    chaos = Chaos(client)
    try:
        lanes = asyncio.gather(*(chaos.lane(n) for n in range(LANES)))
        await bounded(lanes, "the lanes")
        report = (
            f"{chaos.answered} answered, {chaos.cancelled} cancelled, landing in "
            f"{dict(chaos.landed.most_common())}"
        )
        assert chaos.answered + chaos.cancelled == LANES * OPS_PER_LANE, report
        inside = chaos.cancelled - chaos.landed["the test's code"]
        assert inside >= LANES * OPS_PER_LANE // 20, f"too few landed in lmclient: {report}"
        print(f"\n{name}: {report}")
        assert not pool.in_use, f"{len(pool.in_use)} connections left checked out; {report}"
        assert asyncio.all_tasks() == {asyncio.current_task()}, f"tasks left: {report}"
        for i in range(20):  # the client still works, on its pooled connections
            await bounded(whole_call(client, prompt_for("after", i)), "a call after")
        await bounded(stream_call(client, prompt_for("after", 20)), "a stream after")
        assert not pool.in_use
    finally:
        await client.aclose()
    assert not pool.connections()
