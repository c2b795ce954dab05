"""Runaways (issue 39): the watch's rule (`lmclient._runaway`), who watches which call, and what a
user meets — a `RunawayError` that says where the answer looped and what helps, the server told
to stop, the connection closed as the answer runs away — over real sockets with the fake, and
under respx as a user's suite mocks the route."""

from __future__ import annotations

import json
from typing import Annotated, Any

import httpx
import msgspec
import pytest
import respx

import lmclient
from lmclient._runaway import DEFAULT, Runaway, Sentry, find, json_path
from lmclient.testing import FakeLLM

MODEL = "fake-model"
VLLM_GUARD = {"max_pattern_size": 16, "min_pattern_size": 1, "min_count": 32}
WAIT = 10.0  # bound on a wait for the fake; never reached when things work


class Ticket(msgspec.Struct):
    title: str
    tags: list[str]
    count: int


class Bounded(msgspec.Struct):
    title: Annotated[str, msgspec.Meta(max_length=40)]
    count: Annotated[int, msgspec.Meta(ge=0, le=99)]


# -- the rule ----------------------------------------------------------------------------------


def test_a_span_repeated_over_the_thresholds_is_found_at_its_first_repeat() -> None:
    head = '{"title":"x","tags":["Printer on Floor 3",'
    text = head + '"Printer on Floor 3",' * 10
    found = find(text, DEFAULT)
    assert found is not None
    assert (found.kind, found.span, found.repeats) == ("repeat", '"Printer on Floor 3",', 11)
    assert json_path(text, found.start) == "$.tags"


@pytest.mark.parametrize(
    "text",
    [
        "ha " * 8,  # 8 repeats, but 24 characters: a laugh, not a loop
        "[" + "0," * 31,  # 31 zeros: under 64 characters
        '{"age": 1' + "0" * 60,  # a long number, under the digits threshold
        " ".join(f"part {i} of a long answer." for i in range(15)),  # counts: under 16 parts
        "-" * 63,
    ],
)
def test_honest_repeats_under_the_thresholds_are_not_runaways(text: str) -> None:
    assert find(text, DEFAULT) is None


def test_whitespace_and_digits_are_told_apart() -> None:
    whitespace = find("{" + "\n  " * 30, DEFAULT)
    assert whitespace is not None and whitespace.kind == "whitespace"
    digits = '{"age": 6' + "0" * 70
    found = find(digits, DEFAULT)
    assert found is not None and found.kind == "digits" and found.span == "6" + "0" * 70
    counting = '{"n": ' + "".join(str(i) for i in range(1000, 1020))  # never repeats exactly
    found = find(counting, DEFAULT)
    assert found is not None and found.kind == "digits"


def test_the_thresholds_are_settable_and_checked() -> None:
    assert find("ab" * 10, Runaway(repeats=10, min_chars=20)) is not None
    assert find("ab" * 10, Runaway(repeats=11, min_chars=20)) is None
    for bad in (1, 0, -3, True, 2.5, "8"):
        with pytest.raises(ValueError, match="repeats"):
            Runaway(repeats=bad)  # type: ignore[arg-type]


def test_a_loop_alike_but_for_its_numbers_is_one_past_16_items_a_list_of_points_never() -> None:
    counting = '{"steps":[' + "".join(f'{{"text":": ","minutes":{i}}},' for i in range(33, 50))
    found = find(counting, DEFAULT)
    assert found is not None and "but for its numbers" in found.what
    assert json_path(counting, found.start) == "$.steps"
    fewer = '{"steps":[' + "".join(f'{{"text":": ","minutes":{i}}},' for i in range(33, 47))
    assert find(fewer, DEFAULT) is None
    # measured: huge numbers that wander, then a count; the same word in every item
    wandering = '{"steps":[' + "".join(
        f'{{"text":"yoyo","minutes":{n}}},' for n in (27 * 10**17, 15 * 10**18, 12 * 10**18)
    )
    wandering += "".join(f'{{"text":"yoyo","minutes":{n}}},' for n in range(14))
    found = find(wandering, DEFAULT)
    assert found is not None and json_path(wandering, found.start) == "$.steps"
    numbers = "[" + ", ".join(str(i * 37 % 1000) for i in range(500))
    assert find(numbers, DEFAULT) is None
    points = "[" + ", ".join(
        f'{{"x": {i * i * 37 % 1000}, "y": {i * i * 91 % 997}}}' for i in range(99)
    )
    assert find(points, DEFAULT) is None  # alike but for numbers that do not count
    pros = '{"pros":[' + "".join(f'".{i}",' for i in range(400, 470))  # measured: a review
    found = find(pros, DEFAULT)
    assert found is not None and json_path(pros, found.start) == "$.pros"


def test_a_span_longer_than_max_span_is_not_looked_for() -> None:
    span = "".join(chr(ord("a") + i % 26) for i in range(150)) + "\n"
    assert find(span * 8, DEFAULT) is None
    assert find(span * 8, Runaway(max_span=160)) is not None


def test_the_sentry_finds_it_as_the_text_arrives_within_a_step() -> None:
    text = "Say hi. mendatanguser\n" * 40
    sentry = Sentry(DEFAULT)
    for end in range(0, len(text), 3):
        found = sentry.feed(text[end : end + 3])
        if found is not None:
            break
    assert found is not None
    assert 8 * 22 <= end + 3 <= 8 * 22 + Sentry.STEP + 3  # within a look of the 8th repeat
    assert found.span == "Say hi. mendatanguser\n" and found.start == 0


def test_the_sentry_keeps_a_bounded_tail_of_a_long_honest_text() -> None:
    sentry = Sentry(DEFAULT)
    words = [
        "the",
        "sea",
        "was",
        "calm",
        "and",
        "grey",
        "when",
        "we",
        "left",
        "the",
        "harbour",
        "at",
        "dawn",
    ]
    for i in range(20_000):
        assert sentry.feed(f"{words[i * 7 % len(words)]}{words[i % 5]} ") is None
    assert len(sentry._tail) <= sentry.window


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ('{"title":"Printer","tags":["a","b","b', "$.tags[2]"),
        ('{"a":{"b":[1,2,{"c":"xyz', "$.a.b[2].c"),
        ('{"a b":"xyz', '$["a b"]'),
        ("plain text", "$"),
    ],
)
def test_the_path_of_what_runs_away(text: str, path: str) -> None:
    assert json_path(text, len(text) - 1) == path


# -- who watches which call --------------------------------------------------------------------


def _body(fake: FakeLLM) -> dict[str, Any]:
    body: dict[str, Any] = fake.last_request.body
    return body


@pytest.mark.parametrize("dialect", ["llamacpp", "sglang"])
def test_an_unbounded_call_is_streamed_and_a_bounded_one_is_not(dialect: str) -> None:
    fake = FakeLLM([MODEL])
    with fake.serve() as url, lmclient.Client(url, model=MODEL, dialect=dialect) as client:
        fake.reply('{"title":"T","tags":["a"],"count":1}')
        response = client.create("Q", Ticket)
        assert response.value == Ticket("T", ["a"], 1)
        assert response.usage is not None  # the stream's usage, asked for
        assert _body(fake)["stream"] is True
        fake.reply('{"title":"T","count":1}')
        assert client.generate("Q", Bounded) == Bounded("T", 1)
        assert "stream" not in _body(fake) and "max_tokens" in _body(fake)


def test_vllm_is_told_to_stop_a_loop_itself_and_answers_whole() -> None:
    fake = FakeLLM([MODEL])
    fake.reply('{"title":"T","tags":["a"],"count":1}')
    with fake.serve() as url, lmclient.Client(url, model=MODEL, dialect="vllm") as client:
        assert client.generate("Q", Ticket) == Ticket("T", ["a"], 1)
    sent = _body(fake)
    assert sent["repetition_detection"] == VLLM_GUARD and "stream" not in sent


def test_runaway_off_and_thresholds_per_client_and_per_call() -> None:
    fake = FakeLLM([MODEL])
    fake.reply("hi", times=None)
    with fake.serve() as url:
        with lmclient.Client(url, model=MODEL, dialect="vllm", runaway="off") as client:
            client.generate("Q")
            assert "repetition_detection" not in _body(fake)
            client.generate("Q", runaway=Runaway(repeats=4, max_span=64))
            assert _body(fake)["repetition_detection"] == {
                "max_pattern_size": 8,
                "min_pattern_size": 1,
                "min_count": 16,
            }
        with lmclient.Client(url, model=MODEL, dialect="llamacpp") as client:
            client.generate("Q", runaway="off")
            assert "stream" not in _body(fake)
            client.generate("Q")
            assert _body(fake)["stream"] is True


@pytest.mark.parametrize(
    "params",
    [{"n": 2}, {"logprobs": True}, {"tools": [lmclient.Tool(Ticket, name="t")]}],
    ids=["n", "logprobs", "tools"],
)
def test_a_call_read_whole_for_its_choices_logprobs_or_tools_is_not_streamed(
    params: dict[str, Any],
) -> None:
    fake = FakeLLM([MODEL])
    fake.reply("hi", times=None)
    with fake.serve() as url, lmclient.Client(url, model=MODEL, dialect="llamacpp") as client:
        try:
            client.create("Q", **params)
        except lmclient.LMClientError:
            pass  # what the fake answers does not matter here: what was sent
    assert "stream" not in _body(fake)


@pytest.mark.parametrize("bad", ["yes", None, 1, {"repeats": 3}])
def test_a_bad_runaway_setting_is_refused_before_any_request(bad: Any) -> None:
    with pytest.raises(lmclient.ConfigurationError, match="runaway"):
        lmclient.Client("http://127.0.0.1:9/v1", model=MODEL, dialect="vllm", runaway=bad)
    client = lmclient.Client("http://127.0.0.1:9/v1", model=MODEL, dialect="vllm")
    with pytest.raises((ValueError, TypeError), match="runaway"):
        client.generate("Q", runaway=bad)


# -- what a user meets -------------------------------------------------------------------------


def test_a_runaway_is_stopped_as_it_happens_and_the_stream_closed() -> None:
    fake = FakeLLM([MODEL])
    fault = fake.runaway()
    with fake.serve() as url, lmclient.Client(url, model=MODEL, dialect="llamacpp") as client:
        with pytest.raises(lmclient.RunawayError) as caught:
            client.generate("Describe the ticket", Ticket)
        assert fault.abandoned.wait(WAIT)  # the connection closed: the fake stopped generating
    error = caught.value
    assert isinstance(error, lmclient.TruncatedError)  # what catches a cut answer catches it
    assert error.by == "client" and error.kind == "repeat" and error.path.startswith("$.")
    assert error.tokens is not None and error.tokens <= 512
    assert error.span and error.span in error.text
    message = str(error)
    assert "raise max_tokens" not in message and "raising max_tokens cannot help" in message
    assert "Meta(max_length=...)" in message and error.path in message
    assert len(fake.requests) == 1  # not re-asked, not retried


async def test_async_a_runaway_is_stopped_and_the_stream_closed() -> None:
    fake = FakeLLM([MODEL])
    fault = fake.runaway("digits")
    with fake.serve() as url:
        async with lmclient.AsyncClient(url, model=MODEL, dialect="llamacpp") as client:
            with pytest.raises(lmclient.RunawayError) as caught:
                await client.generate("Describe the ticket", Ticket)
        assert fault.abandoned.wait(WAIT)
    assert caught.value.kind == "digits" and caught.value.path in ("$.count", "$.tags", "$.title")


def test_a_users_stream_is_watched_too() -> None:
    fake = FakeLLM([MODEL])
    fault = fake.runaway(span="Say hi. ")
    with fake.serve() as url, lmclient.Client(url, model=MODEL, dialect="llamacpp") as client:
        seen: list[str] = []
        with pytest.raises(lmclient.RunawayError) as caught, client.stream("Say hi") as stream:
            seen.extend(stream)
        assert fault.abandoned.wait(WAIT)
    assert caught.value.path == "$" and "Say hi. " in caught.value.span
    assert len("".join(seen)) < 400  # stopped within a few spans of the threshold


def test_whitespace_through_the_servers_json_mode_names_the_whitespace_and_the_fix() -> None:
    fake = FakeLLM([MODEL])
    fake.runaway("whitespace")
    with (
        fake.serve() as url,
        lmclient.Client(url, model=MODEL, dialect="sglang-gateway") as client,
        pytest.raises(lmclient.RunawayError) as caught,
    ):
        client.generate("Q", Ticket)
    message = str(caught.value)
    assert caught.value.kind == "whitespace" and "whitespace" in message
    assert "--backend openai" in message and "raise max_tokens" not in message


def test_vllms_own_stop_is_the_same_error() -> None:
    fake = FakeLLM([MODEL], server="vllm")
    fake.runaway()
    with (
        fake.serve() as url,
        lmclient.Client(url, model=MODEL, dialect="vllm") as client,
        pytest.raises(lmclient.RunawayError) as caught,
    ):
        client.generate("Describe the ticket", Ticket)
    assert caught.value.by == "server" and "repetition detection" in str(caught.value)
    assert fake.last_request.body["repetition_detection"] == VLLM_GUARD


def test_a_cut_answer_that_loops_says_so_and_a_cut_honest_one_says_raise_max_tokens() -> None:
    fake = FakeLLM([MODEL])
    with (
        fake.serve() as url,
        lmclient.Client(url, model=MODEL, dialect="llamacpp", runaway="off") as client,
    ):
        fake.runaway()
        with pytest.raises(lmclient.RunawayError) as looped:
            client.generate("Q", Ticket, max_tokens=200)
        words = ["the", "sea", "was", "calm", "and", "grey", "when", "we", "left", "at", "dawn"]
        honest = " ".join(words[i * 7 % 11] + words[i % 4] for i in range(200))
        fake.reply('{"title":"' + honest + '"}')
        with pytest.raises(lmclient.TruncatedError) as cut:
            client.generate("Q", Ticket, max_tokens=20)
    assert looped.value.by == "max_tokens" and "raise max_tokens" not in str(looped.value)
    assert type(cut.value) is lmclient.TruncatedError and "raise max_tokens" in str(cut.value)


def test_a_respx_suite_that_mocks_the_route_with_a_json_body_still_works() -> None:
    """A user's suite mocks only the route it calls, with a whole JSON answer (as it did before
    lmclient streamed unbounded answers): the answer is read as it is."""
    answer = {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": '{"title":"T","tags":[],"count":2}'},
                "finish_reason": "stop",
            }
        ],
    }
    with respx.mock(base_url="http://llm.test/v1") as mock:
        route = mock.post("/chat/completions").mock(return_value=httpx.Response(200, json=answer))
        client = lmclient.Client("http://llm.test/v1", model=MODEL, dialect="llamacpp")
        assert client.generate("Q", Ticket) == Ticket("T", [], 2)
    assert json.loads(route.calls.last.request.content)["stream"] is True


def test_batch_file_lines_are_never_streams(tmp_path: Any) -> None:
    from lmclient.batch import write_requests

    path = tmp_path / "in.jsonl"
    write_requests(path, ["a", "b"], Ticket, model=MODEL, dialect="llamacpp")
    for line in path.read_text().splitlines():
        assert "stream" not in json.loads(line)["body"]


def test_a_stream_vllm_stopped_as_a_loop_raises_as_it_ends() -> None:
    fake = FakeLLM([MODEL], server="vllm")
    fake.runaway(span="Say hi. ")
    with fake.serve() as url, lmclient.Client(url, model=MODEL, dialect="vllm") as client:
        seen: list[str] = []
        with pytest.raises(lmclient.RunawayError) as caught, client.stream("Say hi") as stream:
            seen.extend(stream)
    assert caught.value.by == "server" and seen  # the deltas came, then the error at the end
    assert caught.value.tokens is not None  # the server's count, from the usage chunk


def test_a_cut_answer_mostly_whitespace_names_the_servers_json_mode_not_max_tokens() -> None:
    """The SGLang Model Gateway with --backend openai, in front of llama.cpp: the schema mode
    pads every token with a newline and up to 20 spaces (measured: 131 tokens for two fields),
    so a 60-token answer is cut in the middle of its padding, which never repeats exactly."""
    padded = '{\n                    "name"\n                    :\n                  "value",'
    padded += '"count"\n                 :\n   '
    fake = FakeLLM([MODEL])
    with (
        fake.serve() as url,
        lmclient.Client(url, model=MODEL, dialect="sglang-gateway") as client,
    ):
        fake.reply(padded, finish_reason="length", times=1)
        with pytest.raises(lmclient.RunawayError) as caught:
            client.generate("Q", Ticket, max_tokens=60)
        pretty = '{\n  "title": "T",\n  "tags": [\n    "a",\n    "b"\n  ],\n  "count'
        fake.reply(pretty, finish_reason="length", times=1)
        with pytest.raises(lmclient.TruncatedError) as honest:  # pretty, but still writing
            client.generate("Q", Ticket, max_tokens=60)
    error = caught.value
    assert error.kind == "whitespace" and error.by == "max_tokens"
    message = str(error)
    assert "of its" in message and "whitespace" in message and "--backend openai" in message
    assert "raise max_tokens" not in message
    assert type(honest.value) is lmclient.TruncatedError


def test_tgi_is_not_watched_as_a_stream_its_usage_would_be_lost() -> None:
    fake = FakeLLM([MODEL], server="tgi")
    fake.reply('{"title":"T","tags":[],"count":1}', times=None)
    with fake.serve() as url, lmclient.Client(url, model=MODEL, dialect="tgi") as client:
        response = client.create("Q", Ticket)
    assert "stream" not in _body(fake) and response.usage is not None


def test_runaway_off_returns_a_cut_text_that_loops_as_before() -> None:
    fake = FakeLLM([MODEL])
    with fake.serve() as url, lmclient.Client(url, model=MODEL, dialect="vllm") as client:
        fake.reply("ab" * 100, finish_reason="length", times=None)
        assert client.generate("Q", runaway="off") == "ab" * 100
        with pytest.raises(lmclient.RunawayError) as caught:
            client.generate("Q")
    assert caught.value.by == "max_tokens" and caught.value.span == "ab"
