"""SGLang's ``/abort_request``: a call lmclient or the program stopped (its deadline or timeout,
a runaway lmclient's watch stopped, a stream closed early, a cancelled task, Ctrl-C) asks the
server to stop generating it, by the ``rid`` its body carried (the call's ``request_id``, else
one lmclient made); a call that ended otherwise asks nothing. The decision in the core
(`Call.aborting`, `StreamState.abort`), the request through the client's own transport, sent
once and bounded, its failure never in the way of the error that ended the call. Unit tests,
respx, and the fake over real sockets (answering the route as SGLang 0.5.23's source does)."""

from __future__ import annotations

import _thread
import asyncio
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import msgspec
import pytest
import respx

import lmclient
from lmclient import _core, errors
from lmclient._call import ABORT_TIMEOUT, stopped
from lmclient._dialects import DIALECTS
from lmclient.testing import FakeLLM

MODEL = "fake-model"
URL = "http://sglang.test"
HEX32 = re.compile(r"[0-9a-f]{32}")
WAIT = 10.0  # generous: what a test waits for at most, never what it measures


def core(dialect: str = "sglang", **kw: Any) -> _core.ClientCore:
    return _core.ClientCore("http://h/v1", "m", dialect=dialect, **kw)


def rid_of(body: bytes | None) -> Any:
    assert body is not None
    return msgspec.json.decode(body).get("rid")


# -- the core: which calls carry a rid and an abort --------------------------------------------


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize("reading", ["call", "stream"])
def test_an_sglang_call_carries_a_rid_of_its_own_and_the_abort_naming_it(
    endpoint: Any, reading: Any
) -> None:
    client = core(headers={"X-Tenant": "t"}, api_key="sk-1")
    first = client.prepare("create", "Q", str, endpoint, {}, reading=reading)
    second = client.prepare("create", "Q", str, endpoint, {}, reading=reading)
    rid = rid_of(first.request.body)
    assert HEX32.fullmatch(rid) and rid != rid_of(second.request.body)  # one per call
    assert first.abort is not None and first.abort.made
    abort = first.abort.request
    assert (abort.method, abort.url) == ("POST", "http://h/abort_request")  # the server's root
    assert abort.body == msgspec.json.encode({"rid": rid})
    assert abort.headers == first.request.headers  # the key, the call's own headers, JSON
    assert ("authorization", "Bearer sk-1") in abort.headers


def test_the_rid_aborted_is_the_request_id_given() -> None:
    call = core().prepare("create", "Q", str, "chat", {"request_id": "req-7"})
    assert rid_of(call.request.body) == "req-7"
    assert call.abort is not None and call.abort.request.body == b'{"rid":"req-7"}'
    assert not call.abort.made
    extra = core().prepare("create", "Q", str, "chat", {"extra_body": {"rid": "mine"}})
    assert extra.abort is not None and extra.abort.request.body == b'{"rid":"mine"}'


@pytest.mark.parametrize("dialect", sorted(set(DIALECTS) - {"sglang"}))
def test_no_other_dialects_body_changes(dialect: str) -> None:
    call = core(dialect).prepare("create", "Q", str, "chat", {})
    assert call.abort is None and rid_of(call.request.body) is None


def test_no_rid_is_made_where_no_abort_would_reach_it() -> None:
    # n > 1: SGLang gives each sample a rid of its own, which an abort of the call's misses
    sampled = core().prepare("create", "Q", str, "chat", {"n": 2})
    assert sampled.abort is None and rid_of(sampled.request.body) is None
    given = core().prepare("create", "Q", str, "chat", {"n": 2, "request_id": "r"})
    assert given.abort is None and rid_of(given.request.body) == "r"  # sent, not aborted
    # a batch file's line: sent by no one here
    line = core().prepare("generate", "Q", str, "chat", {}, reading="file")
    assert line.abort is None and rid_of(line.request.body) is None


def test_the_sglang_gateway_in_front_of_sglang_workers_is_not_asked() -> None:
    """It speaks the sglang dialect, but drops ``rid`` on chat and lmclient has not read
    that it serves the route: detected, its calls carry no rid of lmclient's."""
    fake = FakeLLM([MODEL], server="sglang-gateway-sglang")
    with fake.serve() as url, lmclient.Client(url, model=MODEL) as client:
        client.generate("Q")
        assert client.dialect == "sglang"
    assert "rid" not in fake.calls[-1].body and fake.aborted == []


@pytest.mark.parametrize(
    ("exc", "aborts"),
    [
        (errors.APITimeoutError("the call's deadline expired"), True),
        (asyncio.CancelledError(), True),
        (KeyboardInterrupt(), True),
        (GeneratorExit(), True),
        (errors.APIConnectionError("reset"), False),  # the server ended it
        (errors.ServerError("boom", status_code=500), False),  # a complete answer
        (errors.ProtocolError("bad bytes"), False),
        (errors.ValidationError("bad", text="x", output_type=int), False),
        (ValueError("a hook's own"), False),
    ],
)
def test_which_endings_ask_for_an_abort(exc: BaseException, aborts: bool) -> None:
    assert stopped(exc) is aborts
    call = core().prepare("create", "Q", str, "chat", {})
    abort = call.aborting(exc)
    assert (abort is not None) is aborts
    if abort is not None:
        assert call.abort is not None and abort.request == call.abort.request
        assert abort.settings.max_retries == 0  # one attempt, bounded, whatever the call's
        assert abort.settings.deadline == abort.settings.timeouts.read == ABORT_TIMEOUT
    assert core("vllm").prepare("create", "Q", str, "chat", {}).aborting(exc) is None


@pytest.mark.parametrize(
    ("by", "aborts"), [("client", True), ("server", False), ("max_tokens", False)]
)
def test_a_runaway_asks_for_an_abort_only_where_lmclient_stopped_it(by: str, aborts: bool) -> None:
    exc = errors.RunawayError(
        text="aaaa",
        output_type=str,
        path="$",
        span="a",
        repeats=4,
        kind="repeat",
        by=by,
        tokens=None,
        seconds=None,
        what="a",
        advice="",
    )
    assert stopped(exc) is aborts


# -- respx: the abort's request, and the error that ended the call unchanged --------------------


class Server:
    """A respx mock of SGLang's two routes, recording the rids each got (respx forgets its
    calls when the mock ends, and records none whose side effect raises)."""

    def __init__(self, chat: str = "timeout", abort: str = "ok") -> None:
        self.chat, self.abort = chat, abort
        self.sent: list[Any] = []  # the chat requests' rids
        self.aborted: list[Any] = []  # the abort requests' bodies
        self.router = respx.mock(base_url=URL, assert_all_called=False)
        self.router.post("/v1/chat/completions").mock(side_effect=self._chat)
        self.router.post("/abort_request").mock(side_effect=self._abort)

    def _chat(self, request: httpx.Request) -> httpx.Response:
        rid = msgspec.json.decode(request.content)["rid"]
        self.sent.append(rid)
        if self.chat == "timeout":
            raise httpx.ReadTimeout("timed out", request=request)
        if self.chat in ("500", "400"):
            return httpx.Response(int(self.chat), json={"error": {"message": "x"}})
        choice = {"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}
        return httpx.Response(200, json={"id": rid, "choices": [choice]})

    def _abort(self, request: httpx.Request) -> httpx.Response:
        self.aborted.append(msgspec.json.decode(request.content))
        if self.abort == "timeout":
            raise httpx.ReadTimeout("abort timed out", request=request)
        if self.abort == "refused":
            raise httpx.ConnectError("refused", request=request)
        if self.abort == "404":
            return httpx.Response(404, json={"detail": "Not Found"})
        return httpx.Response(200)


def test_a_timed_out_call_aborts_its_rid_and_raises_the_timeout() -> None:
    server = Server()
    with (
        server.router,
        lmclient.Client(URL + "/v1", model=MODEL, dialect="sglang") as client,
        pytest.raises(lmclient.APITimeoutError, match="timed out"),
    ):
        client.generate("Q", max_retries=1)
    first, retry = server.sent
    assert HEX32.fullmatch(first) and HEX32.fullmatch(retry)
    # each attempt stopped is aborted; the retry has a rid of its own, as SGLang refuses one it
    # still runs ("Duplicate request ID": the attempt aborted may not have ended yet)
    assert first != retry and server.aborted == [{"rid": first}, {"rid": retry}]


async def test_async_a_timed_out_call_aborts_its_rid_and_raises_the_timeout() -> None:
    server = Server()
    with server.router:
        async with lmclient.AsyncClient(URL + "/v1", model=MODEL, dialect="sglang") as client:
            with pytest.raises(lmclient.APITimeoutError):
                await client.generate("Q", max_retries=0, request_id="req-1")
    assert server.sent == ["req-1"] and server.aborted == [{"rid": "req-1"}]


def test_a_retry_keeps_the_request_id_given() -> None:
    server = Server()
    with (
        server.router,
        lmclient.Client(URL + "/v1", model=MODEL, dialect="sglang") as client,
        pytest.raises(lmclient.APITimeoutError),
    ):
        client.generate("Q", max_retries=1, request_id="req-2")
    assert server.sent == ["req-2"] * 2 and server.aborted == [{"rid": "req-2"}] * 2


def test_a_call_that_ended_asks_nothing() -> None:
    server = Server(chat="answer")
    with server.router, lmclient.Client(URL + "/v1", model=MODEL, dialect="sglang") as client:
        response = client.create("Q")
        assert response.id == server.sent[-1]  # SGLang's answer id is the rid: the made one
        server.chat = "500"
        with pytest.raises(lmclient.ServerError):
            client.generate("Q", max_retries=0)
        server.chat = "400"
        with pytest.raises(lmclient.BadRequestError):
            client.generate("Q")
    assert len(server.sent) == 3 and server.aborted == []


@pytest.mark.parametrize("how", ["404", "timeout", "refused"])
def test_a_failed_abort_is_logged_and_the_original_error_raised(
    how: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = Server(abort=how)
    with (
        server.router,
        lmclient.Client(URL + "/v1", model=MODEL, dialect="sglang") as client,
        caplog.at_level(logging.WARNING, logger="lmclient"),
        pytest.raises(lmclient.APITimeoutError) as caught,
    ):
        client.generate("Q", max_retries=0)
    assert str(caught.value) == "timed out: ReadTimeout (POST /v1/chat/completions)"
    assert server.aborted == [{"rid": server.sent[0]}]  # one attempt, never retried
    [record] = [r for r in caplog.records if "stop a generation" in r.getMessage()]
    assert "/abort_request" in record.getMessage() and server.sent[0] in record.getMessage()


# -- the fake over real sockets: SGLang's route, as its source answers it -----------------------


def _endless(fake: FakeLLM) -> None:
    """An answer that never ends, kept alive by comments (no text for the runaway watch)."""
    fake.endless(keepalive=True, every=0.05)


def test_a_deadline_cuts_a_slow_answer_and_the_server_sees_its_abort() -> None:
    fake = FakeLLM([MODEL], server="sglang")
    _endless(fake)
    with (
        fake.serve() as url,
        lmclient.Client(url, model=MODEL, dialect="sglang") as client,
        pytest.raises(lmclient.APITimeoutError),
    ):
        client.generate("Q", deadline=0.5)
    assert fake.aborted == [fake.calls[0].body["rid"]]
    assert HEX32.fullmatch(fake.aborted[0])


async def test_async_a_deadline_cuts_a_slow_stream_and_the_server_sees_its_abort() -> None:
    fake = FakeLLM([MODEL], server="sglang")
    _endless(fake)
    with fake.serve() as url:
        async with lmclient.AsyncClient(url, model=MODEL, dialect="sglang") as client:
            with pytest.raises(lmclient.APITimeoutError):
                async with client.stream("Q", deadline=0.5, request_id="slow-1") as stream:
                    async for _ in stream:
                        pass
    assert fake.aborted == ["slow-1"]


def test_a_stream_left_early_is_aborted_and_one_read_to_its_end_is_not() -> None:
    fake = FakeLLM([MODEL], server="sglang")
    with (
        fake.serve() as url,
        lmclient.Client(url, model=MODEL, dialect="sglang", runaway="off") as client,
    ):
        long = " ".join(f"word{i}" for i in range(60))
        fake.reply(long, chunk_size=4)
        with client.stream("Q") as stream:
            for _ in stream:
                break
        left = fake.calls[-1].body["rid"]
        with client.stream("Q") as stream:
            whole = stream.read()
        assert whole == long
        response = client.create("Q")
    assert fake.aborted == [left]  # the stream read whole, and the call, asked nothing
    assert response.id == fake.calls[-1].body["rid"]  # the rid, visible on the Response


def test_a_runaway_stopped_by_lmclient_is_aborted() -> None:
    fake = FakeLLM([MODEL], server="sglang")
    fault = fake.runaway()
    with fake.serve() as url, lmclient.Client(url, model=MODEL, dialect="sglang") as client:
        with pytest.raises(lmclient.RunawayError) as caught:
            client.generate("Say hi")
        assert fault.abandoned.wait(WAIT)
    assert caught.value.by == "client"
    assert fake.aborted == [fake.calls[0].body["rid"]]


async def test_a_cancelled_task_aborts_its_call_and_stays_cancelled() -> None:
    fake = FakeLLM([MODEL], server="sglang")
    _endless(fake)
    sent = threading.Event()
    _on_chat(fake, sent.set)
    with fake.serve() as url:
        async with lmclient.AsyncClient(url, model=MODEL, dialect="sglang") as client:
            task = asyncio.create_task(client.generate("Q"))
            assert await asyncio.to_thread(sent.wait, WAIT)  # the request is in
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert task.cancelled()
            assert asyncio.all_tasks() == {asyncio.current_task()}  # nothing left running
    assert fake.aborted == [fake.calls[0].body["rid"]]


async def test_a_cancelled_stream_aborts_its_call() -> None:
    fake = FakeLLM([MODEL], server="sglang")
    _endless(fake)
    with fake.serve() as url:
        async with lmclient.AsyncClient(url, model=MODEL, dialect="sglang") as client:
            opened = asyncio.Event()

            async def consume() -> None:
                async with client.stream("Q", request_id="s-1") as stream:
                    opened.set()
                    async for _ in stream:
                        pass

            task = asyncio.create_task(consume())
            await asyncio.wait_for(opened.wait(), WAIT)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
    assert fake.aborted == ["s-1"]


async def test_a_hanging_abort_is_given_up_and_the_cancellation_goes_on() -> None:
    fake = FakeLLM([MODEL], server="sglang")
    _endless(fake)
    release = threading.Event()
    sent = threading.Event()

    def hold(request: Any) -> None:
        if request.endpoint == "chat":
            sent.set()
        elif request.path == "/abort_request":
            release.wait(WAIT)  # the server never answers the abort in time

    fake.on_request = hold
    try:
        with fake.serve() as url:
            async with lmclient.AsyncClient(url, model=MODEL, dialect="sglang") as client:
                task = asyncio.create_task(client.generate("Q"))
                assert await asyncio.to_thread(sent.wait, WAIT)
                started = time.monotonic()
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert time.monotonic() - started < ABORT_TIMEOUT + 3  # bounded
            release.set()
    finally:
        release.set()
    assert len(fake.aborted) == 1


def test_ctrl_c_aborts_a_sync_call() -> None:
    fake = FakeLLM([MODEL], server="sglang")
    _endless(fake)
    _on_chat(fake, lambda: threading.Timer(0.2, _thread.interrupt_main).start())
    with (
        fake.serve() as url,
        lmclient.Client(url, model=MODEL, dialect="sglang") as client,
        pytest.raises(KeyboardInterrupt),
    ):
        client.generate("Q", deadline=WAIT)
    assert fake.aborted == [fake.calls[0].body["rid"]]


def _on_chat(fake: FakeLLM, action: Callable[[], object]) -> None:
    """Run ``action`` as the fake receives a generation request (in the fake's thread)."""

    def heard(request: Any) -> None:
        if request.endpoint == "chat":
            action()

    fake.on_request = heard


def test_the_fakes_route_answers_as_sglangs() -> None:
    fake = FakeLLM([MODEL], server="sglang")
    with fake.serve() as url, httpx.Client(base_url=url.removesuffix("/v1")) as http:
        ok = http.post("/abort_request", json={"rid": "unknown-rid"})
        bad = http.post("/abort_request", json=["not", "an", "object"])
    assert (ok.status_code, ok.content) == (200, b"")
    assert bad.status_code == 422 and "detail" in bad.json()
    assert fake.aborted == ["unknown-rid", ["not", "an", "object"]]
    vllm = FakeLLM([MODEL], server="vllm")
    with vllm.serve() as url, httpx.Client(base_url=url.removesuffix("/v1")) as http:
        assert http.post("/abort_request", json={"rid": "x"}).status_code == 404
