"""Token budgets (``token_budget``): a call's, a batch's and a `UsageTotal`'s, counted from the
usage the server reports and checked before each re-ask and each new batch item; and
``reask_history="last"``, which sends back only the last invalid answer. Over real sockets
against `lmclient.testing` (scripted invalid answers force the re-asks, each with its usage),
sync and async, and on recorded llama.cpp and vLLM bodies. (The budget a bounded type gives
``max_tokens`` is `test_budget.py`'s.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import lmclient
from lmclient._call import Next
from lmclient.testing import FakeLLM
from tests.helpers import FIXTURES, LLAMACPP_LIVE, make_core

MODEL = "fake-model"


def usage(prompt: int, completion: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "completion_tokens": completion}


def chats(fake: FakeLLM) -> list[dict[str, Any]]:
    return [r.body for r in fake.requests if r.endpoint == "chat"]


# -- a call's budget ------------------------------------------------------------------------------


def test_a_spent_budget_stops_the_reasks_and_says_by_how_much(fake: FakeLLM, url: str) -> None:
    fake.reply("x", usage=usage(10, 1), times=1)
    fake.reply("y", usage=usage(20, 1), times=1)
    fake.reply("7", usage=usage(30, 1))
    with (
        lmclient.Client(url, MODEL, max_reasks=3) as client,
        pytest.raises(lmclient.TokenBudgetExceeded) as info,
    ):
        client.generate("N?", int, token_budget=25)
    stopped = info.value
    assert (stopped.budget, stopped.spent, stopped.over) == (25, 32, 7)
    assert str(stopped) == "the call has spent 32 tokens of its token_budget of 25, 7 over"
    assert stopped.usage == stopped.total_usage == lmclient.Usage(30, 2)
    assert isinstance(stopped.__cause__, lmclient.ValidationError)
    assert stopped.__cause__.attempts == ["x", "y"]
    assert stopped.results is None
    assert len(chats(fake)) == 2  # "x" was re-asked within the budget, "y" was not


async def test_async_the_budget_of_defaults_and_one_reached_exactly(
    fake: FakeLLM, url: str
) -> None:
    fake.reply("x", usage=usage(10, 2), times=1)
    fake.reply("y", usage=usage(10, 2))
    defaults = {"token_budget": 24}
    async with lmclient.AsyncClient(url, MODEL, max_reasks=5, defaults=defaults) as client:
        with pytest.raises(lmclient.TokenBudgetExceeded) as info:
            await client.generate("N?", int)
        # the call's own None lifts the client's budget: the re-asks run out instead
        lifted: dict[str, Any] = {"token_budget": None}
        with pytest.raises(lmclient.ValidationError) as invalid:
            await client.generate("N?", int, max_reasks=3, **lifted)
    assert (info.value.spent, info.value.over) == (24, 0)
    assert "24 tokens of its token_budget of 24" in str(info.value)
    assert not isinstance(invalid.value, lmclient.TokenBudgetExceeded)
    assert len(invalid.value.attempts) == 4
    assert len(chats(fake)) == 2 + 4


def test_the_answer_that_passes_the_budget_is_still_returned(fake: FakeLLM, url: str) -> None:
    """Checked before a re-ask, not after an answer: a valid answer is kept, whatever it cost."""
    fake.reply("x", usage=usage(10, 1), times=1)
    fake.reply("7", usage=usage(500, 1))
    with lmclient.Client(url, MODEL) as client:
        response = client.create("N?", int, token_budget=20, max_reasks=1)
        assert client.generate("N?", int, token_budget=1) == 7  # the first attempt always goes
    assert response.value == 7 and response.reasks == 1
    assert response.total_usage == lmclient.Usage(510, 2)


def test_an_answer_without_usage_fails_closed(fake: FakeLLM, url: str) -> None:
    fake.reply("x", usage={})  # a usage object without counts: nothing to count
    with lmclient.Client(url, MODEL, max_reasks=1) as client:
        with pytest.raises(lmclient.TokenBudgetExceeded) as info:
            client.generate("N?", int, token_budget=1000)
        with pytest.raises(lmclient.ValidationError):  # without a budget: re-asked as before
            client.generate("N?", int)
    assert info.value.spent is None and info.value.over is None
    assert "reported no usage" in str(info.value)
    assert len(chats(fake)) == 1 + 2


def test_recorded_bodies_are_counted_as_the_servers_reported_them() -> None:
    """llama.cpp's and vLLM's own bodies, decoded into a type they do not match: their usage is
    what the budget counts; the same body without usage stops the call (fail closed)."""
    cases = [
        (LLAMACPP_LIVE / "compact_list_pet.response.json", list[int], "llamacpp", 15 + 45),
        (
            FIXTURES / "vllm" / "chat_structured_outputs_json.response.json",
            dict[str, int],
            "vllm",
            42,
        ),
    ]
    for path, output_type, dialect, tokens in cases:
        body = Path(path).read_bytes()
        for budget, stops in ((tokens, True), (tokens + 1, False)):
            call = make_core(dialect=dialect).prepare(
                "create", "Q", output_type, "chat", {"max_reasks": 1, "token_budget": budget}
            )
            if stops:
                with pytest.raises(lmclient.TokenBudgetExceeded) as info:
                    call.finish(200, {}, body)  # its re-ask refused
                assert (info.value.spent, info.value.over) == (tokens, 0), path
                assert isinstance(info.value.__cause__, lmclient.ValidationError), path
            else:
                reask = call.finish(200, {}, body)
                assert isinstance(reask, Next) and reask.invalid is not None, path
                assert reask.call.reasks == 1
        unreported = json.loads(body)
        del unreported["usage"]
        call = make_core(dialect=dialect).prepare(
            "create", "Q", output_type, "chat", {"max_reasks": 1, "token_budget": 10**6}
        )
        with pytest.raises(lmclient.TokenBudgetExceeded, match="reported no usage"):
            call.finish(200, {}, json.dumps(unreported).encode())


# -- what a re-ask sends back ---------------------------------------------------------------------


@pytest.mark.parametrize(("history", "sent"), [("full", 7), ("last", 3)])
def test_reask_history_full_or_last(fake: FakeLLM, url: str, history: str, sent: int) -> None:
    fake.reply_sequence(["a", "b", "c", "7"])
    with lmclient.Client(url, MODEL, max_reasks=3) as client:
        assert client.generate("N?", int, reask_history=history) == 7  # type: ignore[call-overload]
    last = chats(fake)[-1]["messages"]
    assert len(last) == sent
    assert last[0] == {"role": "user", "content": "N?"}
    assert last[-2] == {"role": "assistant", "content": "c"}  # the last invalid answer
    assert last[-1]["role"] == "user" and "invalid" in last[-1]["content"]
    if history == "full":
        assert [m["content"] for m in last[1::2]] == ["a", "b", "c"]


async def test_async_reask_history_last_keeps_the_system_message(fake: FakeLLM, url: str) -> None:
    fake.reply_sequence(["a", "b", "7"])
    prompt = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "N?"}]
    async with lmclient.AsyncClient(url, MODEL, max_reasks=2) as client:
        response = await client.create(prompt, int, reask_history="last")
    assert response.value == 7 and response.reasks == 2
    second, third = (body["messages"] for body in chats(fake)[1:])
    assert second[:2] == third[:2] == prompt
    assert [m["content"] for m in third[2:3]] == ["b"] and len(third) == 4


# -- a batch's budget, and a UsageTotal's ---------------------------------------------------------


def test_a_batch_starts_no_item_once_its_budget_is_spent(fake: FakeLLM, url: str) -> None:
    fake.reply("1", usage=usage(10, 5))
    seen: list[int] = []
    total = lmclient.UsageTotal()
    with lmclient.Client(url, MODEL) as client:
        values = client.generate_many(
            ["a", "b", "c", "d", "e"],
            int,
            concurrency=1,
            return_exceptions=True,
            on_result=lambda index, _: seen.append(index),
            usage=total,
            token_budget=40,
        )
    assert values[:3] == [1, 1, 1]
    for stopped in values[3:]:
        assert isinstance(stopped, lmclient.TokenBudgetExceeded)
        assert (stopped.spent, stopped.over, stopped.total_usage) == (45, 5, None)
        assert "the batch has spent 45" in str(stopped)
    assert seen == [0, 1, 2, 3, 4]
    assert len(chats(fake)) == 3
    assert (total.calls, total.spent) == (3, 45)  # the items never started were no calls


async def test_async_without_return_exceptions_the_results_come_with_the_error(
    fake: FakeLLM, url: str
) -> None:
    fake.reply("1", usage=usage(10, 5))
    async with lmclient.AsyncClient(url, MODEL) as client:
        with pytest.raises(lmclient.TokenBudgetExceeded) as info:
            await client.generate_many(["a", "b", "c", "d"], int, concurrency=1, token_budget=30)
        assert await client.generate_many(["a"], int, token_budget=30) == [1]  # a new batch
    assert info.value.results == [1, 1, None, None]
    assert len(chats(fake)) == 3


def test_sync_without_return_exceptions_the_results_come_with_the_error(
    fake: FakeLLM, url: str
) -> None:
    fake.reply("1", usage=usage(10, 5))
    with (
        lmclient.Client(url, MODEL) as client,
        pytest.raises(lmclient.TokenBudgetExceeded) as info,
    ):
        client.complete_many(["a", "b", "c"], int, concurrency=1, token_budget=15)
    assert info.value.results == [1, None, None]


def test_a_batch_budget_stops_an_items_reasks(fake: FakeLLM, url: str) -> None:
    """The item's own answers count with the finished items' before each of its re-asks."""
    fake.reply("1", usage=usage(10, 5), times=1)
    fake.reply("x", usage=usage(10, 5))
    total = lmclient.UsageTotal()
    with lmclient.Client(url, MODEL, max_reasks=5) as client:
        values = client.generate_many(
            ["first", "second"],
            int,
            concurrency=1,
            return_exceptions=True,
            usage=total,
            token_budget=40,
        )
    stopped = values[1]
    assert values[0] == 1 and isinstance(stopped, lmclient.TokenBudgetExceeded)
    assert (stopped.spent, stopped.total_usage) == (45, lmclient.Usage(20, 10))
    assert isinstance(stopped.__cause__, lmclient.ValidationError)
    assert len(chats(fake)) == 1 + 2
    assert total.usage == lmclient.Usage(30, 15) and total.calls == 2


async def test_async_a_usage_total_keeps_its_budget_over_batches(fake: FakeLLM, url: str) -> None:
    fake.reply("1", usage=usage(10, 5))
    total = lmclient.UsageTotal(token_budget=30)
    async with lmclient.AsyncClient(url, MODEL) as client:
        first = await client.generate_many(["a", "b"], int, usage=total)
        second = await client.generate_many(["c"], int, usage=total, return_exceptions=True)
    assert first == [1, 1]
    [stopped] = second
    assert isinstance(stopped, lmclient.TokenBudgetExceeded)
    assert "the usage total has spent 30 tokens of its token_budget of 30" in str(stopped)
    assert len(chats(fake)) == 2
    with pytest.raises(lmclient.TokenBudgetExceeded):
        total.check()  # for calls of one's own


def test_an_unmetered_answer_stops_a_budgeted_batch(fake: FakeLLM, url: str) -> None:
    fake.reply("1", usage={})
    total = lmclient.UsageTotal(token_budget=10**6)
    with lmclient.Client(url, MODEL) as client:
        values = client.generate_many(["a", "b"], int, concurrency=1, return_exceptions=True)
        assert values == [1, 1]  # no budget: nothing to count
        values = client.generate_many(
            ["a", "b"], int, concurrency=1, return_exceptions=True, usage=total
        )
    assert values[0] == 1 and isinstance(values[1], lmclient.TokenBudgetExceeded)
    assert values[1].spent is None and total.spent is None and total.unmetered == 1


@pytest.mark.parametrize("budget", [0, -1, True, "100", 1.5])
def test_a_bad_budget_is_refused_before_any_request(fake: FakeLLM, url: str, budget: Any) -> None:
    with lmclient.Client(url, MODEL) as client, pytest.raises((ValueError, TypeError)):
        client.generate_many(["a"], int, token_budget=budget)
    with pytest.raises(ValueError, match=r"UsageTotal\(\): token_budget must be a positive int"):
        lmclient.UsageTotal(token_budget=budget)
    assert not chats(fake)


def test_usage_total_counts_what_it_cannot_meter() -> None:
    total = lmclient.UsageTotal(token_budget=100)
    total.add(lmclient.Usage(40, 10))
    total.check(lmclient.Usage(40, 9))  # 99: within
    with pytest.raises(lmclient.TokenBudgetExceeded):
        total.check(lmclient.Usage(40, 10))
    total.add(lmclient.APIConnectionError("down"))  # no answer: nothing unmetered
    assert (total.spent, total.unmetered, total.unreported) == (50, 0, 1)
    total.add(None)  # a call that reported none
    assert total.spent is None and total.unmetered == 1
    assert repr(total).endswith("unreported=2, token_budget=100)")
    with pytest.raises(lmclient.TokenBudgetExceeded, match="reported no usage"):
        total.check()
    lmclient.UsageTotal().check(lmclient.Usage(10**9, 0))  # no budget: never spent


async def test_hooks_see_the_call_a_budget_stopped(fake: FakeLLM, url: str) -> None:
    fake.reply("x", usage=usage(10, 5))
    events: list[Any] = []
    async with lmclient.AsyncClient(url, MODEL, max_reasks=2, hooks=[events.append]) as client:
        values = await client.generate_many(
            ["a", "b"], int, concurrency=1, return_exceptions=True, token_budget=15
        )
    assert all(isinstance(v, lmclient.TokenBudgetExceeded) for v in values)
    failed = [e for e in events if isinstance(e, lmclient.CallFailed)]
    assert [e.error for e in failed] == ["TokenBudgetExceeded"] * 2
    assert failed[0].total_usage == lmclient.Usage(10, 5) and failed[1].total_usage is None
    assert sum(isinstance(e, lmclient.RequestSent) for e in events) == 1


# -- counts no server can have made (issue 37) ----------------------------------------------------


def test_a_negative_count_fails_the_call_instead_of_refunding_its_budget(
    fake: FakeLLM, url: str
) -> None:
    """``prompt_tokens: -1000`` took tokens off what each answer spent: a call with
    ``token_budget=100`` was asked 11 times (all its 10 re-asks). The count is bad bytes: the
    call fails at the first answer, its body in the error."""
    fake.reply("x", usage=usage(-1000, 5))
    with (
        lmclient.Client(url, MODEL, max_reasks=10) as client,
        pytest.raises(lmclient.ProtocolError) as info,
    ):
        client.generate("N?", int, token_budget=100)
    assert "Expected `int` >= 0 - at `$.usage.prompt_tokens`" in str(info.value)
    body = info.value.body
    assert isinstance(body, bytes) and b'"prompt_tokens":-1000' in body
    assert len(chats(fake)) == 1


async def test_async_a_batch_stops_at_an_answer_it_cannot_count(fake: FakeLLM, url: str) -> None:
    """The same server ran 20 of 20 items of a batch with a budget of 200: an answer whose
    usage cannot be read is unmetered, which spends the budget."""
    fake.reply("1", usage=usage(-1000, 5))
    async with lmclient.AsyncClient(url, MODEL) as client:
        values = await client.generate_many(
            [f"item {i}" for i in range(20)],
            int,
            concurrency=1,
            return_exceptions=True,
            token_budget=200,
        )
    assert isinstance(values[0], lmclient.ProtocolError)
    for stopped in values[1:]:
        assert isinstance(stopped, lmclient.TokenBudgetExceeded) and stopped.spent is None
    assert len(chats(fake)) == 1


def test_a_usage_total_is_never_driven_below_zero(fake: FakeLLM, url: str) -> None:
    """One answer of ``-2**62`` prompt tokens left a ``UsageTotal(token_budget=1000)``
    negative, after which 40 of 40 honest items of 50 tokens ran (20 fit)."""
    fake.reply("1", usage=usage(-(2**62), 5), times=1)
    fake.reply("1", usage=usage(40, 10))
    total = lmclient.UsageTotal(token_budget=1000)
    with lmclient.Client(url, MODEL) as client:
        [lying] = client.generate_many(["a"], int, usage=total, return_exceptions=True)
        honest = client.generate_many(
            [f"item {i}" for i in range(40)],
            int,
            concurrency=1,
            usage=total,
            return_exceptions=True,
        )
    assert isinstance(lying, lmclient.ProtocolError)
    assert total.usage is None and total.spent is None and total.unmetered == 1
    assert all(isinstance(value, lmclient.TokenBudgetExceeded) for value in honest)
    assert len(chats(fake)) == 1


def test_an_honest_server_still_runs_up_to_the_budget(fake: FakeLLM, url: str) -> None:
    """The counterpart of the lying server above: 20 items of 50 tokens fit 1000."""
    fake.reply("1", usage=usage(40, 10))
    total = lmclient.UsageTotal(token_budget=1000)
    with lmclient.Client(url, MODEL) as client:
        values = client.generate_many(
            [f"item {i}" for i in range(40)],
            int,
            concurrency=1,
            usage=total,
            return_exceptions=True,
        )
    assert values[:20] == [1] * 20
    assert all(isinstance(value, lmclient.TokenBudgetExceeded) for value in values[20:])
    assert total.spent == 1000 and len(chats(fake)) == 20


# -- a call whose earlier answer reported no usage (issue 37) -------------------------------------


def test_a_call_with_an_unmetered_reasked_answer_is_unmetered(fake: FakeLLM, url: str) -> None:
    """``total_usage`` sums the answers that reported usage; a `UsageTotal` counted such a call
    as metered when only its last answer had usage, so its total was a number where the docs
    promise it is uncountable."""
    fake.reply("x", usage={}, times=1)
    fake.reply("7", usage=usage(10, 5))
    total = lmclient.UsageTotal()
    with lmclient.Client(url, MODEL, max_reasks=1) as client:
        response = client.create("N?", int)
        values = client.generate_many(["a"], int, usage=total)  # answered "7": metered
        total.add(response)
    assert values == [7] and response.value == 7
    assert (total.calls, total.unmetered, total.spent) == (2, 1, None)
    assert response.total_usage == lmclient.Usage(10, 5) and response.unmetered == 1


async def test_async_an_invalid_call_with_an_unmetered_answer_is_unmetered(
    fake: FakeLLM, url: str
) -> None:
    """The same for a call that failed after its re-asks, and for one a budget stopped after
    an answer with only part of the usage."""
    fake.reply("x", usage={"prompt_tokens": 10}, times=1)
    fake.reply("y", usage=usage(10, 5), times=1)
    fake.reply("z", usage=usage(10, 5))
    total = lmclient.UsageTotal()
    async with lmclient.AsyncClient(url, MODEL, max_reasks=1) as client:
        values = await client.generate_many(["a"], int, usage=total, return_exceptions=True)
    [invalid] = values
    assert isinstance(invalid, lmclient.ValidationError) and invalid.attempts == ["x", "y"]
    assert (total.calls, total.unmetered, total.spent) == (1, 1, None)
    assert invalid.total_usage == lmclient.Usage(20, 5) and invalid.unmetered == 1
