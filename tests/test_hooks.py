"""Hooks (``hooks=``): every step of a call reported as a small typed event, over real sockets,
sync and async, streams included; no text nor key unless ``hook_content=True``; a hook that
raises never fails the call."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import msgspec
import pytest

import lmclient
from lmclient import (
    CallFailed,
    CallFinished,
    HookEvent,
    Reasking,
    RequestSent,
    ResponseHead,
    Retrying,
    StreamFinished,
)
from lmclient.testing import FakeLLM
from tests.helpers import script_retry_then_reask

KEY = "sk-hook-secret-0123456789"
PROMPT = "Say a number, PROMPT-TEXT-4711."


def client(url: str, events: list[HookEvent]) -> lmclient.Client:
    return lmclient.Client(url, model="fake-model", hooks=[events.append])


def aclient(url: str, events: list[HookEvent]) -> lmclient.AsyncClient:
    return lmclient.AsyncClient(url, model="fake-model", hooks=[events.append])


def shapes(events: list[HookEvent]) -> list[tuple[str, int]]:
    return [(type(e).__name__, e.attempt) for e in events]


def check_retry_and_reask(events: list[HookEvent]) -> None:
    """The events of `script_retry_then_reask`'s call, field by field."""
    assert shapes(events) == [
        ("RequestSent", 1),
        ("ResponseHead", 1),
        ("Retrying", 1),
        ("RequestSent", 2),
        ("ResponseHead", 2),
        ("Reasking", 2),
        ("RequestSent", 3),
        ("ResponseHead", 3),
        ("CallFinished", 3),
    ]
    first = events[0]
    assert first.call_id > 0
    for event in events:  # one call's identity on every event
        assert (event.call_id, event.endpoint, event.model) == (first.call_id, "chat", "fake-model")
    sent = [e for e in events if isinstance(e, RequestSent)]
    assert all(not e.stream and e.body is None for e in sent)
    heads = [e for e in events if isinstance(e, ResponseHead)]
    assert [h.status for h in heads] == [503, 200, 200]
    assert all(0 <= h.elapsed < 30 for h in heads)
    retry = events[2]
    assert isinstance(retry, Retrying)
    assert (retry.delay, retry.error, retry.status) == (0.0, "ServerError", 503)
    reask = events[5]
    assert isinstance(reask, Reasking)
    assert reask.number == 1 and reask.detail and reask.text is None
    done = events[-1]
    assert isinstance(done, CallFinished)
    assert (done.retries, done.reasks, done.finish_reasons) == (1, 1, ("stop",))
    assert done.usage is not None and done.usage.completion_tokens
    assert done.total_usage is not None and done.total_usage.prompt_tokens is not None
    assert done.usage.prompt_tokens is not None
    assert done.total_usage.prompt_tokens > done.usage.prompt_tokens  # the re-asked answer too
    assert done.response_model == "fake-model" and done.response_id
    assert done.texts is None and 0 <= done.elapsed < 30


def test_every_event_of_a_call_with_a_retry_and_a_reask() -> None:
    fake = FakeLLM()
    script_retry_then_reask(fake)
    events: list[HookEvent] = []
    with fake.serve() as url, lmclient.Client(url, hooks=[events.append]) as client:
        response = client.create(PROMPT, int, max_reasks=1)  # its set-up requests: not reported
    assert (response.value, response.retries, response.reasks) == (7, 1, 1)
    check_retry_and_reask(events)
    done = events[-1]
    assert isinstance(done, CallFinished) and done.total_usage == response.total_usage


def test_a_call_failed_after_its_reasks_reports_what_it_cost() -> None:
    fake = FakeLLM()
    fake.reply_sequence(["12 apples", "34 pears"])  # an int's start: a ValidationError
    events: list[HookEvent] = []
    with (
        fake.serve() as url,
        lmclient.Client(url, hooks=[events.append]) as client,
        pytest.raises(lmclient.ValidationError) as caught,
    ):
        client.generate(PROMPT, int, max_reasks=1)
    failed = events[-1]
    assert isinstance(failed, CallFailed) and failed.error == "ValidationError"
    assert failed.total_usage is not None and failed.total_usage == caught.value.total_usage
    assert failed.total_usage.prompt_tokens and failed.total_usage.completion_tokens


async def test_every_event_of_an_async_call_with_a_retry_and_a_reask() -> None:
    fake = FakeLLM()
    script_retry_then_reask(fake)
    events: list[HookEvent] = []
    threads: set[int] = set()

    def hook(event: HookEvent) -> None:  # called on the loop, in the call's thread
        threads.add(threading.get_ident())
        events.append(event)

    with fake.serve() as url:
        async with lmclient.AsyncClient(url, hooks=(hook,)) as client:
            response = await client.create(PROMPT, int, max_reasks=1)
    assert (response.value, response.retries, response.reasks) == (7, 1, 1)
    check_retry_and_reask(events)
    assert threads == {threading.get_ident()}


def check_stream(events: list[HookEvent], *, ended: bool) -> None:
    assert shapes(events) == [
        ("RequestSent", 1),
        ("ResponseHead", 1),
        ("Retrying", 1),
        ("RequestSent", 2),
        ("ResponseHead", 2),
        ("StreamFinished", 2),
    ]
    assert len({e.call_id for e in events}) == 1
    assert all(e.stream for e in events if isinstance(e, RequestSent))
    end = events[-1]
    assert isinstance(end, StreamFinished)
    assert end.ended is ended and end.retries == 1 and end.text is None
    assert end.events > 0 and end.response_id
    if ended:
        assert end.finish_reasons == ("stop",)
        assert end.usage is not None and end.usage.completion_tokens


def test_a_stream_reports_its_retry_and_its_end() -> None:
    fake = FakeLLM()
    fake.fail(503, retry_after=0)
    events: list[HookEvent] = []
    with fake.serve() as url, client(url, events) as c, c.stream(PROMPT, list[int]) as stream:
        assert stream.read() is not None
    check_stream(events, ended=True)


async def test_an_async_stream_reports_its_retry_and_its_end() -> None:
    fake = FakeLLM()
    fake.fail(503, retry_after=0)
    events: list[HookEvent] = []
    with fake.serve() as url:
        async with aclient(url, events) as c, c.stream(PROMPT, list[int]) as stream:
            async for _ in stream:  # read by iterating only: the end is reported on close
                pass
    check_stream(events, ended=True)


def test_a_stream_closed_early_says_so() -> None:
    fake = FakeLLM(chunk_size=1)
    fake.fail(503, retry_after=0)
    # The answer stops after two events until the server stops: its end cannot arrive before
    # the stream is closed (read whole in one chunk, a loaded client would see it ended).
    fake.stall(after=2)
    fake.reply("a long answer, sent one character per event")
    events: list[HookEvent] = []
    with fake.serve() as url, client(url, events) as c, c.stream(PROMPT) as stream:
        next(iter(stream))
    check_stream(events, ended=False)


async def test_an_async_stream_closed_early_says_so() -> None:
    fake = FakeLLM(chunk_size=1)
    fake.fail(503, retry_after=0)
    # The answer stops after two events until the server stops: its end cannot arrive before
    # the stream is closed (read whole in one chunk, a loaded client would see it ended).
    fake.stall(after=2)
    fake.reply("a long answer, sent one character per event")
    events: list[HookEvent] = []
    with fake.serve() as url:
        async with aclient(url, events) as c, c.stream(PROMPT) as stream:
            async for _ in stream:
                break
    check_stream(events, ended=False)


def test_a_stream_that_fails_to_validate_reports_the_failure() -> None:
    fake = FakeLLM()
    fake.reply("12 apples")
    events: list[HookEvent] = []
    with (
        fake.serve() as url,
        client(url, events) as c,
        c.stream(PROMPT, int) as stream,
        pytest.raises(lmclient.ValidationError),
    ):
        stream.read()
    assert shapes(events) == [("RequestSent", 1), ("ResponseHead", 1), ("CallFailed", 1)]
    failed = events[-1]
    assert isinstance(failed, CallFailed) and failed.error == "ValidationError"


def test_a_stream_error_event_reports_the_failure() -> None:
    fake = FakeLLM(chunk_size=1, error_after=2)
    events: list[HookEvent] = []
    with (
        fake.serve() as url,
        client(url, events) as c,
        c.stream(PROMPT) as stream,
        pytest.raises(lmclient.APIStatusError),
    ):
        for _ in stream:
            pass
    assert [type(e).__name__ for e in events][-1] == "CallFailed"
    assert len([e for e in events if isinstance(e, (CallFailed, StreamFinished))]) == 1


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_failed_call_reports_its_error_and_status(asynchronous: bool) -> None:
    fake = FakeLLM()
    fake.fail(400, body="bad request")
    events: list[HookEvent] = []
    with fake.serve() as url:
        if asynchronous:

            async def call() -> None:
                async with lmclient.AsyncClient(
                    url, model="fake-model", hooks=[events.append]
                ) as c:
                    await c.generate(PROMPT)

            with pytest.raises(lmclient.BadRequestError):
                asyncio.run(call())
        else:
            with client(url, events) as c, pytest.raises(lmclient.BadRequestError):
                c.generate(PROMPT)
    assert shapes(events) == [("RequestSent", 1), ("ResponseHead", 1), ("CallFailed", 1)]
    failed = events[-1]
    assert isinstance(failed, CallFailed)
    assert (failed.error, failed.status, failed.model) == ("BadRequestError", 400, "fake-model")


def test_nothing_of_the_prompt_the_answer_or_the_key_by_default() -> None:
    fake = FakeLLM()
    script_retry_then_reask(fake)
    fake.reply("ANSWER-TEXT-STREAMED")
    events: list[HookEvent] = []
    with fake.serve() as url, lmclient.Client(url, api_key=KEY, hooks=[events.append]) as c:
        c.create(PROMPT, int, max_reasks=1)
        with c.stream(PROMPT) as stream:
            stream.read()
    assert len(events) == 12
    seen = msgspec.json.encode(events) + repr(events).encode()
    for secret in (KEY, "PROMPT-TEXT", "ANSWER-TEXT"):
        assert secret.encode() not in seen


def test_hook_content_opts_in_to_the_texts_never_the_key() -> None:
    fake = FakeLLM()
    script_retry_then_reask(fake)
    fake.reply("ANSWER-TEXT-STREAMED")
    events: list[HookEvent] = []
    with (
        fake.serve() as url,
        lmclient.Client(url, api_key=KEY, hooks=[events.append], hook_content=True) as c,
    ):
        c.create(PROMPT, int, max_reasks=1)
        with c.stream(PROMPT) as stream:
            stream.read()
    sent = [e for e in events if isinstance(e, RequestSent)]
    assert all(e.body is not None and b"PROMPT-TEXT-4711" in e.body for e in sent)
    reask = next(e for e in events if isinstance(e, Reasking))
    assert reask.text == "ANSWER-TEXT-BAD"
    finished = next(e for e in events if isinstance(e, CallFinished))
    assert finished.texts == ("7",)
    streamed = events[-1]
    assert isinstance(streamed, StreamFinished) and streamed.text == "ANSWER-TEXT-STREAMED"
    assert KEY.encode() not in msgspec.json.encode(events) + repr(events).encode()


def test_a_hook_that_raises_is_logged_once_and_the_call_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[HookEvent] = []

    def broken(event: HookEvent) -> None:
        raise RuntimeError("the metrics backend is down")

    caplog.set_level(logging.DEBUG, logger="lmclient")
    fake = FakeLLM()
    with (
        fake.serve() as url,
        lmclient.Client(url, model="fake-model", hooks=[broken, seen.append]) as client,
    ):
        assert client.generate(PROMPT, int) is not None
        assert client.generate(PROMPT, int) is not None
    assert len(seen) == 6  # the hook after the broken one still sees every event
    failures = [r for r in caplog.records if "raised on" in r.getMessage()]
    assert len(failures) == 6
    assert [r.levelno for r in failures] == [logging.WARNING] + [logging.DEBUG] * 5
    assert failures[0].exc_info is not None and "metrics backend" in caplog.text


def test_a_hook_interrupting_the_program_is_not_swallowed() -> None:
    def stop(event: HookEvent) -> None:
        raise KeyboardInterrupt

    fake = FakeLLM()
    with (
        fake.serve() as url,
        lmclient.Client(url, model="fake-model", hooks=[stop]) as c,
        pytest.raises(KeyboardInterrupt),
    ):
        c.generate(PROMPT)


class AsyncHook:
    async def __call__(self, event: HookEvent) -> None:
        pass


async def async_hook(event: HookEvent) -> None:
    pass


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"hooks": [print, 3]}, "must be callable"),
        ({"hooks": print}, "sequence of callables"),
        ({"hooks": [async_hook]}, "coroutine function"),
        ({"hooks": [AsyncHook()]}, "coroutine function"),
        ({"tracing": "on"}, "tracing must be"),
        ({"tracing": 1}, "tracing must be"),
        ({"hook_content": 1}, "hook_content must be a bool"),
    ],
)
@pytest.mark.parametrize("cls", [lmclient.Client, lmclient.AsyncClient])
def test_bad_hook_options_are_refused_when_the_client_is_made(
    cls: Any, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(lmclient.ConfigurationError, match=message):
        cls("http://127.0.0.1:9/v1", model="m", **options)


def test_a_call_without_hooks_nor_tracing_starts_no_watch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lmclient import _hooks

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an unobserved call must not be watched")

    monkeypatch.setattr(_hooks.Observer, "watch", refuse)
    fake = FakeLLM()
    with fake.serve() as url, lmclient.Client(url, model="fake-model", tracing=False) as client:
        assert client.generate(PROMPT)
        with client.stream(PROMPT) as stream:
            assert stream.read()
    hooked = lmclient.Client("http://127.0.0.1:9/v1", model="m", hooks=[print], tracing=False)
    assert client._watched == "" and hooked._watched == "lmclient"
    assert lmclient.Client("http://127.0.0.1:9/v1")._watched == "opentelemetry.trace"


def test_call_ids_differ_between_calls_and_clients() -> None:
    events: list[HookEvent] = []
    fake = FakeLLM()
    with fake.serve() as url:
        with lmclient.Client(url, model="fake-model", hooks=[events.append]) as one:
            one.generate(PROMPT)
            one.generate(PROMPT)
        with lmclient.Client(url, model="fake-model", hooks=[events.append]) as two:
            two.complete(PROMPT)
    finished = [e for e in events if isinstance(e, CallFinished)]
    assert len({e.call_id for e in finished}) == 3
    assert [e.endpoint for e in finished] == ["chat", "chat", "completions"]


class Weather(msgspec.Struct):
    """The weather in a city."""

    city: str


@pytest.mark.parametrize("read", ["deltas", "items", "partials", "fields", "calls"])
def test_every_way_of_reading_a_stream_reports_its_end(read: str) -> None:
    fake = FakeLLM()
    events: list[HookEvent] = []
    with fake.serve() as url, client(url, events) as c:
        if read == "deltas":
            with c.stream(PROMPT) as stream:
                assert list(stream.deltas())
        elif read == "items":
            fake.reply([1, 2, 3])
            with c.stream(PROMPT, list[int]) as stream:
                assert list(stream.items()) == [1, 2, 3]
        elif read == "partials":
            fake.reply({"city": "Oslo"})
            with c.stream(PROMPT, Weather) as stream:
                assert [p.value for p in stream.partials()][-1] == {"city": "Oslo"}
        elif read == "fields":
            fake.reply({"city": "Oslo"})
            with c.stream(PROMPT, Weather) as stream:
                assert list(stream.fields()) == [{"city": "Oslo"}]
        else:
            fake.reply(None, tool_calls=[("weather", {"city": "Oslo"})])
            with c.stream(PROMPT, tools=[lmclient.Tool(Weather, name="weather")]) as stream:
                assert [call.arguments for call in stream.calls()] == [Weather("Oslo")]
    assert shapes(events) == [("RequestSent", 1), ("ResponseHead", 1), ("StreamFinished", 1)]
    end = events[-1]
    assert isinstance(end, StreamFinished) and end.ended and end.usage is not None


def test_generate_many_reports_each_call() -> None:
    events: list[HookEvent] = []
    lock = threading.Lock()

    def hook(event: HookEvent) -> None:
        with lock:
            events.append(event)

    with (
        FakeLLM().serve() as url,
        lmclient.Client(url, model="fake-model", hooks=[hook]) as c,
    ):
        assert len(c.generate_many([f"{PROMPT} {i}" for i in range(8)], concurrency=4)) == 8
    finished = [e for e in events if isinstance(e, CallFinished)]
    assert len({e.call_id for e in finished}) == 8 and len(events) == 24
    for call_id in {e.call_id for e in events}:
        assert shapes([e for e in events if e.call_id == call_id]) == [
            ("RequestSent", 1),
            ("ResponseHead", 1),
            ("CallFinished", 1),
        ]


async def test_async_generate_many_reports_each_call() -> None:
    events: list[HookEvent] = []
    with FakeLLM().serve() as url:
        async with aclient(url, events) as c:
            values = await c.generate_many([f"{PROMPT} {i}" for i in range(8)], concurrency=4)
    assert len(values) == 8
    assert len({e.call_id for e in events if isinstance(e, CallFinished)}) == 8


@pytest.mark.parametrize("kind", ["call", "stream"])
def test_a_call_whose_set_up_fails_reports_it(kind: str) -> None:
    """The first call of a client with ``model=None`` asks the server for its model first: when
    that fails, the call fails, reported before any request of its own (attempt 0)."""
    fake = FakeLLM(models=["a", "b"])  # two models: model=None cannot pick one
    events: list[HookEvent] = []
    with (
        fake.serve() as url,
        lmclient.Client(url, dialect="vllm", hooks=[events.append]) as c,
        pytest.raises(lmclient.LMClientError, match="exactly one model"),
    ):
        if kind == "call":
            c.generate(PROMPT)
        else:
            with c.stream(PROMPT) as stream:
                stream.read()
    assert shapes(events) == [("CallFailed", 0)]
    failed = events[0]
    assert isinstance(failed, CallFailed)
    assert (failed.error, failed.status, failed.model) == ("LMClientError", None, None)
