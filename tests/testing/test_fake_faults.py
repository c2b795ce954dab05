"""Faults: scripting (FIFO, times, when), what each kind puts on the wire over real sockets and
under respx, prompt server exit during waits, and the fault table of docs/testing.md."""

from __future__ import annotations

import itertools
import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from lmclient.testing import FakeLLM
from lmclient.testing._faults import FAULTS, Fault
from lmclient.testing._wire import Pause, StreamDropped

MESSAGES = [{"role": "user", "content": "Hi"}]
WAIT = 5.0  # bound on every wait for the server; never reached when things work
TEXT = "The quick brown fox jumps over the lazy dog."


def post(fake: FakeLLM, *, stream: bool = False, prompt: str = "Hi") -> Any:
    """``fake.handle`` for a chat request, without any transport."""
    body = {"messages": [{"role": "user", "content": prompt}], "stream": stream}
    return fake.handle("POST", "/v1/chat/completions", {}, msgspec.json.encode(body))


def text_of(response: Any) -> str:
    content: str = msgspec.json.decode(response.body)["choices"][0]["message"]["content"]
    return content


# -- scripting ---------------------------------------------------------------------------------


def test_faults_and_replies_play_in_the_order_scripted() -> None:
    fake = FakeLLM(default_text="generated")
    fake.reply("one", times=1)
    fake.fail(503, times=2)
    fake.reply("two", times=1)
    fake.fail(429)
    assert fake.pending == 5
    statuses = [post(fake).status for _ in range(6)]
    assert statuses == [200, 503, 503, 200, 429, 200]
    assert fake.pending == 0


def test_sticky_fault_fails_every_request_until_reset() -> None:
    fake = FakeLLM()
    fake.fail(500, times=None)
    assert [post(fake).status for _ in range(3)] == [500] * 3
    fake.reset()
    assert post(fake).status == 200


def test_when_selects_the_requests_a_fault_applies_to() -> None:
    fake = FakeLLM(default_text="fine")
    fake.fail(503, when="flaky")
    fake.fail(502, when=re.compile(r"^bad\b"))
    assert post(fake, prompt="steady").status == 200
    assert post(fake, prompt="a bad one").status == 200  # the regex is anchored
    assert post(fake, prompt="bad luck").status == 502
    assert post(fake, prompt="so flaky").status == 503
    assert post(fake, prompt="so flaky").status == 200  # used up


def test_stream_only_faults_wait_for_a_streaming_request() -> None:
    fake = FakeLLM(default_text=TEXT)
    fake.truncate()
    assert post(fake).status == 200
    assert fake.pending == 1
    response = post(fake, stream=True)
    assert b"[DONE]" not in b"".join(c for c in response.chunks if isinstance(c, bytes))
    assert fake.pending == 0


def test_a_fault_shows_the_next_reply_without_using_it_up() -> None:
    fake = FakeLLM()
    fake.delay(0.5)
    fake.reply_sequence(["first", "second"])
    delayed = post(fake)
    assert delayed.delay == 0.5
    assert text_of(delayed) == "first"
    assert text_of(post(fake)) == "first"  # the retry after the fault gets the same reply
    assert text_of(post(fake)) == "second"


def test_faults_never_touch_probes_or_models() -> None:
    fake = FakeLLM()
    fake.fail(500, times=None)
    assert fake.handle("GET", "/version", {}, b"").status == 200
    assert fake.handle("GET", "/v1/models", {}, b"").status == 200
    assert post(fake).status == 500


def test_fail_forms() -> None:
    fake = FakeLLM()
    fake.fail(status=503, retry_after=1.5, headers={"X-Trace": "t"})
    fake.fail(429, body="slow down", retry_after=2)
    fake.fail(500, body={"detail": "boom"})
    fake.fail(502, body=b"<html>bad gateway</html>")
    busy = post(fake)
    assert busy.status == 503
    assert ("retry-after", "1.5") in busy.headers
    assert ("x-trace", "t") in busy.headers
    assert msgspec.json.decode(busy.body)["error"]["code"] == 503
    limited = post(fake)
    assert ("retry-after", "2") in limited.headers
    assert msgspec.json.decode(limited.body)["error"]["message"] == "slow down"
    assert post(fake).body == b'{"detail":"boom"}'
    gateway = post(fake)
    assert gateway.body == b"<html>bad gateway</html>"
    assert ("content-type", "text/plain; charset=utf-8") in gateway.headers


@pytest.mark.parametrize(
    "script",
    [
        lambda f: f.fail(200),
        lambda f: f.fail(503, times=0),
        lambda f: f.stall(-1),
        lambda f: f.truncate(after=-1),
        lambda f: f.disconnect("later"),
        lambda f: f.oversize(-5),
    ],
)
def test_invalid_fault_arguments(script: Callable[[FakeLLM], Any]) -> None:
    with pytest.raises(ValueError):
        script(FakeLLM())


def test_unknown_fault_kind() -> None:
    with pytest.raises(ValueError, match="unknown fault kind"):
        Fault("explode")  # type: ignore[arg-type]


# -- shapes, without a transport ---------------------------------------------------------------


def data_events(chunks: Iterator[bytes | Pause]) -> list[bytes | Pause]:
    return [c for c in chunks if isinstance(c, Pause) or c.startswith(b"data: ")]


def test_stream_faults_happen_after_the_given_events() -> None:
    fake = FakeLLM(default_text=TEXT)
    fake.stall(1.0, after=3)
    items = data_events(post(fake, stream=True).chunks)
    assert items[3] == Pause(1.0)
    assert items.count(Pause(1.0)) == 1
    assert items[-1] == b"data: [DONE]\n\n"


def test_stream_faults_happen_before_done_when_the_stream_is_short() -> None:
    fake = FakeLLM(default_text="ab")
    fake.stream_error(after=100, status=503, message="overloaded")
    items = data_events(post(fake, stream=True).chunks)
    error = msgspec.json.decode(items[-2][len(b"data: ") :])  # type: ignore[index]
    assert error["error"] == {
        "message": "overloaded",
        "type": "InternalServerError",
        "param": None,
        "code": 503,
    }
    assert items[-1] == b"data: [DONE]\n\n"
    assert b'"finish_reason":"stop"' in items[-3]  # type: ignore[operator]


def test_invalid_json_event_and_body() -> None:
    fake = FakeLLM(default_text=TEXT)
    fake.invalid_json(after=1)
    fake.invalid_json()
    items = data_events(post(fake, stream=True).chunks)
    payloads = [item[len(b"data: ") :] for item in items if isinstance(item, bytes)]
    with pytest.raises(msgspec.DecodeError):
        msgspec.json.decode(payloads[1])
    for payload in [payloads[0], *payloads[2:-1]]:
        msgspec.json.decode(payload)
    with pytest.raises(msgspec.DecodeError):
        msgspec.json.decode(post(fake).body)


def test_invalid_utf8_sits_in_the_text() -> None:
    fake = FakeLLM(default_text=TEXT)
    fake.invalid_utf8()
    body = post(fake).body
    assert b'"content":"\xffThe quick' in body
    with pytest.raises(UnicodeDecodeError):
        body.decode()


def test_oversize_body_declares_its_length_and_is_produced_lazily() -> None:
    fake = FakeLLM()
    fake.oversize(10**9)  # a gigabyte: only ever produced piece by piece
    response = post(fake)
    assert response.length == 10**9
    chunks = response.chunks
    head = next(chunks)
    assert head.startswith(b'{"id":"chatcmpl-1"')
    assert next(chunks) == b"x" * 65536


def test_oversize_small_body_is_valid_json_of_exactly_size_bytes() -> None:
    fake = FakeLLM()
    fake.oversize(100_000, chunked=True)
    response = post(fake)
    assert response.length is None
    body = b"".join(c for c in response.chunks if isinstance(c, bytes))
    assert len(body) == 100_000
    assert set(msgspec.json.decode(body)["choices"][0]["message"]["content"]) == {"x"}


def test_endless_stream_goes_on() -> None:
    fake = FakeLLM(default_text="ab")
    fake.endless(every=0.25)
    chunks = post(fake, stream=True).chunks
    taken = [next(chunks) for _ in range(50)]
    assert taken.count(Pause(0.25)) == 24
    assert b"[DONE]" not in b"".join(c for c in taken if isinstance(c, bytes))
    chunks.close()


def test_disconnect_shapes() -> None:
    fake = FakeLLM(default_text=TEXT)
    fake.disconnect("start")
    fake.disconnect("headers")
    fake.disconnect("body")
    assert post(fake).cut == "start"
    assert post(fake).cut == "headers"
    cut = post(fake)
    first = next(cut.chunks)
    assert len(first) == cut.length // 2
    with pytest.raises(StreamDropped):
        next(cut.chunks)


# -- over real sockets and under respx -----------------------------------------------------------


@pytest.fixture(params=["serve", "respx"])
def mounted(request: pytest.FixtureRequest) -> Iterator[tuple[FakeLLM, str]]:
    fake = FakeLLM(default_text=TEXT)
    with fake.serve() if request.param == "serve" else fake.mock() as url:
        yield fake, url


def fetch(url: str, *, stream: bool, timeout: float = WAIT) -> httpx.Response:
    body = {"messages": MESSAGES, "stream": stream}
    with (
        httpx.Client(timeout=timeout) as client,
        client.stream("POST", f"{url}/chat/completions", json=body) as response,
    ):
        response.read()
    return response


def answer_text(response: httpx.Response, *, stream: bool) -> str:
    """The text of a complete chat answer, streamed or not."""
    if not stream:
        content: str = response.json()["choices"][0]["message"]["content"]
        return content
    lines = [line[6:] for line in response.text.splitlines() if line.startswith("data: {")]
    deltas = [msgspec.json.decode(line)["choices"][0]["delta"] for line in lines]
    return "".join(delta.get("content", "") for delta in deltas)


def test_status_over_the_wire(mounted: tuple[FakeLLM, str]) -> None:
    fake, url = mounted
    fake.fail(503, retry_after=1)
    response = fetch(url, stream=True)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    assert response.json()["error"]["code"] == 503


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("kind", ["delay", "stall"])
def test_short_waits_then_a_complete_answer(
    mounted: tuple[FakeLLM, str], kind: str, stream: bool
) -> None:
    """Over sockets the wait happens; under respx no time passes, so a wait far longer than
    the test's own timeout, yet shorter than the read timeout, must not be waited for."""
    fake, url = mounted
    served = fake.base_url is not None and fake.base_url.startswith("http://127.0.0.1")
    wait = 0.2 if served else 3600.0
    getattr(fake, kind)(wait)
    started = time.monotonic()
    response = fetch(url, stream=stream, timeout=2 * wait)
    assert response.status_code == 200
    assert answer_text(response, stream=stream) == TEXT
    if served:
        assert time.monotonic() - started >= wait


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("kind", ["delay", "stall"])
def test_long_waits_time_the_client_out(
    mounted: tuple[FakeLLM, str], kind: str, stream: bool
) -> None:
    fake, url = mounted
    getattr(fake, kind)(math.inf)
    with pytest.raises(httpx.ReadTimeout):
        fetch(url, stream=stream, timeout=0.2)
    assert fetch(url, stream=stream).status_code == 200  # the next request is answered


@pytest.mark.parametrize(
    ("at", "stream"),
    [("start", False), ("headers", True), ("body", False), ("body", True), ("stream", True)],
)
def test_disconnects(mounted: tuple[FakeLLM, str], at: Any, stream: bool) -> None:
    fake, url = mounted
    fake.disconnect(at)
    with pytest.raises(httpx.RemoteProtocolError):
        fetch(url, stream=stream)
    assert fetch(url, stream=stream).status_code == 200


@pytest.mark.parametrize("stream", [False, True])
def test_corrupt_bodies(mounted: tuple[FakeLLM, str], stream: bool) -> None:
    fake, url = mounted
    fake.invalid_utf8()
    fake.invalid_json()
    assert b"\xff" in fetch(url, stream=stream).content
    broken = fetch(url, stream=stream)
    assert broken.status_code == 200
    payloads = [line[6:] for line in broken.content.splitlines() if line.startswith(b"data: {")]
    with pytest.raises(msgspec.DecodeError):
        for payload in payloads if stream else [broken.content]:
            msgspec.json.decode(payload)


def test_truncate_and_stream_error_over_the_wire(mounted: tuple[FakeLLM, str]) -> None:
    fake, url = mounted
    fake.truncate(after=2)
    fake.stream_error(after=2)
    truncated = fetch(url, stream=True).text
    assert truncated.count("data: ") == 2
    assert "[DONE]" not in truncated
    failed = fetch(url, stream=True).text
    assert '"error":{"message":"fake mid-stream error"' in failed
    assert failed.endswith("data: [DONE]\n\n")


@pytest.mark.parametrize("chunked", [False, True])
def test_oversize_over_the_wire(mounted: tuple[FakeLLM, str], chunked: bool) -> None:
    fake, url = mounted
    fake.oversize(300_000, chunked=chunked)
    response = fetch(url, stream=False)
    assert len(response.content) == 300_000
    assert ("content-length" in response.headers) != chunked
    fake.oversize(300_000)
    assert len(fetch(url, stream=True).content) >= 300_000


def test_endless_stream_over_the_wire(mounted: tuple[FakeLLM, str]) -> None:
    fake, url = mounted
    fake.endless(every=0.001, keepalive=True)
    body = {"messages": MESSAGES, "stream": True}
    with (
        httpx.Client(timeout=WAIT) as client,
        client.stream("POST", f"{url}/chat/completions", json=body) as response,
    ):
        lines = list(itertools.islice(response.iter_lines(), 200))  # it would never end
    comments = [line for line in lines if line.startswith(":")]
    assert len(comments) > 50


# -- stopping the server -------------------------------------------------------------------------


def _stall(fake: FakeLLM) -> None:
    fake.stall(math.inf, after=1)


def _endless_paced(fake: FakeLLM) -> None:
    fake.endless(every=math.inf)


def _endless_unread(fake: FakeLLM) -> None:
    fake.endless(every=0.0)  # fills the socket buffers: the server blocks in a write


def _delay(fake: FakeLLM) -> None:
    fake.delay(math.inf)


@pytest.mark.parametrize(
    ("script", "head_sent"),
    [(_stall, True), (_endless_paced, True), (_endless_unread, True), (_delay, False)],
)
def test_leaving_serve_is_prompt_during_a_wait(
    script: Callable[[FakeLLM], None], head_sent: bool, capfd: pytest.CaptureFixture[str]
) -> None:
    fake = FakeLLM(default_text=TEXT)
    script(fake)
    received, opened, release = threading.Event(), threading.Event(), threading.Event()
    fake.on_request = lambda request: received.set()
    outcome: list[BaseException | None] = []

    def client(url: str) -> None:
        body = {"messages": MESSAGES, "stream": True}
        try:
            with (
                httpx.Client(timeout=WAIT) as http,
                http.stream("POST", f"{url}/chat/completions", json=body) as response,
            ):
                opened.set()
                release.wait(WAIT)  # do not read: the server is stalled or blocked writing
                response.read()
            outcome.append(None)
        except httpx.HTTPError as exc:
            outcome.append(exc)

    with fake.serve() as url:
        thread = threading.Thread(target=client, args=(url,))
        thread.start()
        # the wait is under way: the head is out (stall, stream) or the request is in (delay)
        assert (opened if head_sent else received).wait(WAIT)
        started = time.monotonic()
    elapsed = time.monotonic() - started
    release.set()
    thread.join(WAIT)
    assert elapsed < 1.0  # the joins' bound is 5 s: nothing waited on them
    assert len(outcome) == 1 and isinstance(outcome[0], httpx.TransportError)
    assert capfd.readouterr().err == ""  # the server went quietly


# -- documentation -------------------------------------------------------------------------------


def test_the_docs_fault_table_lists_every_kind() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text()
    section = page.split("\n## Faults\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z_0-9]+)` \|", section, flags=re.MULTILINE)
    assert tuple(rows) == FAULTS
