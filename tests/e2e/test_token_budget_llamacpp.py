"""Token budgets and ``reask_history`` against the real llama.cpp server: the usage it reports is
what a budget counts, a budget stops a call's re-asks and a batch's items, and re-asking with
the last answer only sends smaller prompts than with the whole history."""

from __future__ import annotations

import msgspec
import pytest

import lmclient
from lmclient import CallParams

GREEDY: CallParams = {"temperature": 0.0, "seed": 1, "max_tokens": 48}
BUDGETED: CallParams = {**GREEDY, "max_reasks": 5, "token_budget": 1}
UNWATCHED: CallParams = {**GREEDY, "runaway": "off"}
PROMPT = (
    "Extract the order from this message.\n\nHi, this is Dana from the Harbour Street bakery. "
    "Could you send us 12 bags of rye flour before Friday?"
)


class Order(msgspec.Struct):
    item: str
    quantity: int

    def __post_init__(self) -> None:
        # No answer passes: every call makes all its re-asks.
        raise ValueError("the order needs a reference from the order book")


def invalid(client: lmclient.Client, reasks: int, history: str) -> lmclient.ValidationError:
    """The error that ends a call of ``reasks`` re-asks: its last answer's usage is the last
    request's, its total every request's."""
    params: CallParams = {**GREEDY, "max_reasks": reasks, "reask_history": "full"}
    if history == "last":
        params["reask_history"] = "last"
    with pytest.raises(lmclient.ValidationError) as info:
        client.generate(PROMPT, Order, **params)
    assert len(info.value.attempts) == reasks + 1
    return info.value


def prompt_tokens(usage: lmclient.Usage | None) -> int:
    assert usage is not None and usage.prompt_tokens and usage.completion_tokens
    return usage.prompt_tokens


def test_the_last_answer_only_sends_smaller_prompts(base_url: str) -> None:
    with lmclient.Client(base_url, dialect="llamacpp") as client:
        one = {h: prompt_tokens(invalid(client, 1, h).usage) for h in ("full", "last")}
        three = {h: invalid(client, 3, h) for h in ("full", "last")}
    assert one["full"] == one["last"]  # the first re-ask sends the same either way
    full, last = (prompt_tokens(three[h].usage) for h in ("full", "last"))
    assert last < full  # the third re-ask: one answer and its correction, not three
    assert prompt_tokens(three["last"].total_usage) < prompt_tokens(three["full"].total_usage)


def test_a_budget_stops_the_reasks_by_the_servers_count(base_url: str) -> None:
    with lmclient.Client(base_url, dialect="llamacpp") as client:
        # (this model loops on "Say hi.": its cut text is read as it is, the watch off)
        first = client.create("Say hi.", **UNWATCHED)
        with pytest.raises(lmclient.TokenBudgetExceeded) as info:
            client.generate(PROMPT, Order, **BUDGETED)
    assert first.usage is not None and first.usage.prompt_tokens and first.usage.completion_tokens
    stopped = info.value
    cause = stopped.__cause__
    assert isinstance(cause, lmclient.ValidationError) and len(cause.attempts) == 1
    usage = stopped.total_usage
    assert usage is not None and usage.prompt_tokens and usage.completion_tokens
    spent = usage.prompt_tokens + usage.completion_tokens
    assert (stopped.spent, stopped.over) == (spent, spent - 1)


async def test_a_batch_budget_on_the_real_server(base_url: str) -> None:
    total = lmclient.UsageTotal()
    async with lmclient.AsyncClient(base_url, dialect="llamacpp") as client:
        values = await client.generate_many(
            ["Say hi.", "Say bye.", "Say yes.", "Say no."],
            concurrency=1,
            return_exceptions=True,
            usage=total,
            token_budget=1,
            temperature=0.0,
            seed=1,
            max_tokens=48,
            runaway="off",  # (these prompts loop on this model: cut texts, read as they are)
        )
    assert isinstance(values[0], str)
    assert all(isinstance(v, lmclient.TokenBudgetExceeded) for v in values[1:])
    assert total.calls == 1 and total.spent is not None and total.spent > 1
