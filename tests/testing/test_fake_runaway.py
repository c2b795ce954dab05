"""FakeLLM.runaway: each kind's text (a valid prefix of the answer, then the loop), where it
ends (max_tokens, the cap, vLLM's repetition_detection, the client leaving), over real sockets
and under respx, and as a user of lmclient meets it."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import msgspec
import pytest

import lmclient
from lmclient.testing import FakeLLM
from lmclient.testing._runaway import CAP, Guard

WAIT = 5.0  # bound on every wait for the server; never reached when things work
MESSAGES = [{"role": "user", "content": "Describe the ticket"}]


class Ticket(msgspec.Struct):
    title: str
    tags: list[str]
    count: int


TICKET = '{"title":"Printer","tags":["a","b"],"count":7}'
GUARD = {"max_pattern_size": 8, "min_pattern_size": 1, "min_count": 4}


@pytest.fixture(params=["serve", "respx"])
def mount(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def mounted(fake: FakeLLM, how: str) -> Any:
    return fake.serve() if how == "serve" else fake.mock()


def ask(url: str, **extra: Any) -> dict[str, Any]:
    """A non-streamed chat request's decoded body."""
    with httpx.Client(timeout=WAIT) as http:
        response = http.post(f"{url}/chat/completions", json={"messages": MESSAGES, **extra})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = msgspec.json.decode(response.content)
    return body


def events(url: str, **extra: Any) -> list[Any]:
    """A streamed chat request's ``data:`` events, decoded (``[DONE]`` as is)."""
    body = {"messages": MESSAGES, "stream": True, **extra}
    out: list[Any] = []
    with (
        httpx.Client(timeout=WAIT) as http,
        http.stream("POST", f"{url}/chat/completions", json=body) as response,
    ):
        for line in response.iter_lines():
            if line.startswith("data: "):
                data = line[len("data: ") :]
                out.append(data if data == "[DONE]" else msgspec.json.decode(data))
    return out


def streamed_text(chunks: list[Any]) -> str:
    return "".join(
        choice["delta"].get("content") or ""
        for event in chunks
        if isinstance(event, dict)
        for choice in event["choices"]
    )


def finish_choice(chunks: list[Any]) -> dict[str, Any]:
    finished = [
        choice
        for event in chunks
        if isinstance(event, dict)
        for choice in event["choices"]
        if choice["finish_reason"] is not None
    ]
    assert len(finished) == 1
    choice: dict[str, Any] = finished[0]
    return choice


def content_deltas(chunks: list[Any]) -> list[str]:
    return [
        choice["delta"]["content"]
        for event in chunks
        if isinstance(event, dict)
        for choice in event["choices"]
        if choice["delta"].get("content")
    ]


# -- each kind's text ------------------------------------------------------------------------------

EXPECTED = {
    "repeat": '{"title":"Printer","tags":["a","b","b","b","b","b","b"',
    "whitespace": "{\n  \n  \n  \n  \n  \n  \n  \n  \n  \n  \n  \n  \n  \n  \n  \n  \n  ",
    "digits": '{"title":"Printer","tags":["a","b"],"count":7100010011002',
    "unclosed": '{"title":"Printer step 1 step 2 step 3 step 4 step 5 step 6',
}


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_each_kind_starts_as_the_answer_then_loops(kind: Any, mount: str) -> None:
    fake = FakeLLM(server="llamacpp")
    fake.reply(TICKET)
    fake.runaway(kind)
    with mounted(fake, mount) as url:
        body = ask(url, max_tokens=200)
    choice = body["choices"][0]
    text = choice["message"]["content"]
    assert text.startswith(EXPECTED[kind])
    assert choice["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 200
    assert "stop_reason" not in choice
    with pytest.raises(msgspec.DecodeError):
        msgspec.json.decode(text)  # it never ends


def test_repeat_of_a_text_answer_and_a_given_span(mount: str) -> None:
    fake = FakeLLM(default_text="Say hi. Then stop.")
    fake.runaway()
    fake.runaway(span="mendatanguser\n")
    ticket = FakeLLM()
    ticket.reply(TICKET)
    ticket.runaway(span='again "quoted"')
    with mounted(fake, mount) as url:
        text = [ask(url, max_tokens=20)["choices"][0]["message"]["content"] for _ in range(2)]
    with mounted(ticket, mount) as url:
        text.append(ask(url, max_tokens=20)["choices"][0]["message"]["content"])
    assert text[0].startswith("Say hi. Then stop. Say hi. Then Say hi. Then")
    assert text[1].startswith("Say hi. Then stop.mendatanguser\nmendatanguser\n")
    # inside the first string, escaped: the prefix stays valid JSON text
    assert text[2].startswith('{"title":"Printeragain \\"quoted\\"again \\"quoted\\"')


def test_digits_after_a_zero_stay_a_number() -> None:
    fake = FakeLLM()
    fake.reply({"age": 0})
    fake.runaway("digits")
    with fake.mock() as url:
        text = ask(url, max_tokens=5)["choices"][0]["message"]["content"]
    assert text.startswith('{"age":0.1000')


def test_a_non_streamed_runaway_without_max_tokens_stops_at_the_cap() -> None:
    fake = FakeLLM()
    fake.runaway("unclosed")
    with fake.mock() as url:
        body = ask(url)
    assert body["usage"]["completion_tokens"] == CAP == 2048
    assert body["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_a_stream_sends_one_delta_per_token_up_to_max_tokens(kind: Any, mount: str) -> None:
    fake = FakeLLM(server="llamacpp", chunk_size=4)
    fake.reply(TICKET)
    fake.runaway(kind)
    with mounted(fake, mount) as url:
        chunks = events(url, max_tokens=50, stream_options={"include_usage": True})
    deltas = content_deltas(chunks)
    assert len(deltas) == 50 and all(1 <= len(d) <= 4 for d in deltas)
    assert "".join(deltas).startswith(EXPECTED[kind][:150])
    assert finish_choice(chunks)["finish_reason"] == "length"
    assert chunks[-2]["usage"]["completion_tokens"] == 50
    assert chunks[-1] == "[DONE]"


def test_span_is_checked_when_scripted() -> None:
    fake = FakeLLM()
    with pytest.raises(ValueError, match="drop span="):
        fake.runaway("digits", span="9")
    with pytest.raises(ValueError, match="JSON whitespace"):
        fake.runaway("whitespace", span="x ")
    with pytest.raises(ValueError, match="cannot be empty"):
        fake.runaway(span="")
    with pytest.raises(ValueError, match="unknown runaway kind"):
        fake.runaway("loop")  # type: ignore[arg-type]
    assert fake.pending == 0


def test_the_runaway_is_used_up_and_the_retry_gets_the_answer() -> None:
    fake = FakeLLM()
    fake.reply(TICKET)
    fault = fake.runaway(when="ticket")
    assert fault.times == 1
    with fake.mock() as url:
        first = ask(url, max_tokens=30)["choices"][0]
        second = ask(url, max_tokens=30)["choices"][0]
    assert first["finish_reason"] == "length"
    assert second["message"]["content"] == TICKET and second["finish_reason"] == "stop"


# -- vLLM's repetition_detection -------------------------------------------------------------------


def test_vllm_ends_the_loop_as_its_guard_does(mount: str) -> None:
    fake = FakeLLM(server="vllm", chunk_size=4)
    fake.reply(TICKET)
    fake.runaway(times=2)
    with mounted(fake, mount) as url:
        body = ask(url, repetition_detection=GUARD)
        chunks = events(url, repetition_detection=GUARD, stream_options={"include_usage": True})
    choice = body["choices"][0]
    assert choice["finish_reason"] == "repetition"
    assert choice["stop_reason"] == "repetition_detected"
    # the span ',"b"' is one token: stopped once it repeated min_count (4) times
    assert choice["message"]["content"] == '{"title":"Printer","tags":["a","b","b","b","b","b"'
    assert body["usage"]["completion_tokens"] == 13
    streamed = finish_choice(chunks)
    assert streamed["finish_reason"] == "repetition"
    assert streamed["stop_reason"] == "repetition_detected"
    assert streamed_text(chunks) == choice["message"]["content"]
    assert chunks[-2]["usage"]["completion_tokens"] == 13


def test_the_guard_counts_patterns_of_several_tokens() -> None:
    fake = FakeLLM(server="vllm", chunk_size=4)
    fake.reply(TICKET)
    fake.runaway(span="on and on ")  # three tokens: "on a", "nd o", "n "
    with fake.mock() as url:
        body = ask(url, repetition_detection={"max_pattern_size": 3, "min_count": 3})
    text = body["choices"][0]["message"]["content"]
    assert text == '{"title":"Printer' + "on and on " * 3
    assert body["choices"][0]["finish_reason"] == "repetition"
    too_short = {"max_pattern_size": 2, "min_count": 3}  # the span is longer than the pattern
    fake.runaway(span="on and on ")
    with fake.mock() as url:
        body = ask(url, max_tokens=40, repetition_detection=too_short)
    assert body["choices"][0]["finish_reason"] == "length"


def test_a_loop_that_never_repeats_exactly_runs_past_the_guard() -> None:
    fake = FakeLLM(server="vllm")
    fake.runaway("unclosed")
    with fake.mock() as url:
        body = ask(url, max_tokens=300, repetition_detection=GUARD)
    assert body["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("server", ["llamacpp", "sglang", "vllm-guided", "generic"])
def test_servers_without_the_guard_ignore_it(server: str) -> None:
    fake = FakeLLM(server=server)
    fake.runaway()
    with fake.mock() as url:
        body = ask(url, max_tokens=60, repetition_detection={"max_pattern_size": -1})
    assert body["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"max_pattern_size": 4, "min_count": 1}, "min_count must be >= 2"),
        ({"max_pattern_size": 2, "min_pattern_size": 3}, "min_pattern_size <= max_pattern_size"),
        ({"max_pattern_size": "8"}, "valid integer"),
        ([8, 1, 4], "valid dictionary"),
    ],
)
def test_vllm_refuses_a_malformed_guard(given: Any, message: str) -> None:
    fake = FakeLLM(server="vllm")
    with fake.mock() as url, httpx.Client() as http:
        body = {"messages": MESSAGES, "repetition_detection": given}
        response = http.post(f"{url}/chat/completions", json=body)
    assert response.status_code == 400
    assert message in response.json()["error"]["message"]


def test_guard_is_vllm_s_check() -> None:
    guard = Guard(max_pattern_size=2, min_pattern_size=1, min_count=3)
    assert guard.stops(["x", "a", "a", "a"])
    assert guard.stops(["a", "b", "a", "b", "a", "b"])
    assert not guard.stops(["a", "b", "a", "b"])
    assert not Guard(max_pattern_size=0, min_pattern_size=0, min_count=3).stops(["a"] * 9)


# -- the client leaving ----------------------------------------------------------------------------


def _leave_after(url: str, deltas: int) -> None:
    body = {"messages": MESSAGES, "stream": True}
    with (
        httpx.Client(timeout=WAIT) as http,
        http.stream("POST", f"{url}/chat/completions", json=body) as response,
    ):
        lines = response.iter_lines()
        seen = 0
        while seen < deltas:
            seen += next(lines).startswith("data: ")


def test_a_stream_runs_until_the_client_leaves_then_the_fake_stops() -> None:
    fake = FakeLLM()
    written: list[int] = []
    fake.on_chunk = written.append
    fault = fake.runaway()
    before = set(threading.enumerate())
    with fake.serve() as url:
        _leave_after(url, 300)
        assert fault.abandoned.wait(WAIT)  # the server saw the client go and closed the run
        produced = len(written)
        started = time.monotonic()
    assert time.monotonic() - started < 1.0  # nothing was left running to wait for
    assert len(written) == produced  # no event made after the run was closed
    assert set(threading.enumerate()) <= before  # no thread left behind


def test_under_respx_closing_the_stream_stops_the_run() -> None:
    fake = FakeLLM()
    fault = fake.runaway("digits")
    with fake.mock() as url:
        _leave_after(url, 50)
    assert fault.abandoned.is_set()


def test_a_stream_that_reached_its_end_is_not_abandoned() -> None:
    fake = FakeLLM()
    fault = fake.runaway()
    with fake.serve() as url:
        chunks = events(url, max_tokens=10)
    assert finish_choice(chunks)["finish_reason"] == "length"
    assert not fault.abandoned.is_set()


# -- as a user of lmclient -----------------------------------------------------------------------


@pytest.mark.parametrize(("server", "by"), [("generic", "client"), ("vllm", "server")])
def test_a_user_sees_the_loop_stopped_as_a_runaway(server: str, by: str) -> None:
    """The client's default watch stops the loop: its own over the stream it reads, or vLLM's
    repetition_detection, which the fake plays; a `RunawayError` saying where it looped."""
    fake = FakeLLM(server=server)
    fake.runaway()
    with (
        fake.serve() as url,
        lmclient.Client(url, model="fake-model") as client,
        pytest.raises(lmclient.RunawayError) as caught,
    ):
        client.generate("Describe the ticket", Ticket, max_tokens=256)  # past vLLM's 32 repeats
    assert caught.value.by == by and caught.value.path == "$.tags"
    assert ',"' in str(caught.value)


def test_a_user_without_the_watch_sees_the_loop_as_a_cut_answer() -> None:
    """A runaway the client does not watch (``runaway="off"``: one JSON answer, no
    repetition_detection) ends at max_tokens: a TruncatedError carrying the looping text."""
    fake = FakeLLM(server="vllm")
    fake.runaway()
    with (
        fake.serve() as url,
        lmclient.Client(url, model="fake-model", runaway="off") as client,
        pytest.raises(lmclient.TruncatedError) as caught,
    ):
        client.generate("Describe the ticket", Ticket, max_tokens=64)
    assert ',"' in str(caught.value)
    sent = fake.last_request.body
    assert "stream" not in sent and "repetition_detection" not in sent
