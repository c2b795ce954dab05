"""Defects of lmclient's own transports found against real server stacks and hostile servers, one
regression test each (sync and async where both apply), over real sockets on 127.0.0.1; and the
client configuration that reaches the wire (headers, API key, URL credentials), checked when the
client is made."""

from __future__ import annotations

import gzip
import re
from typing import Any

import httpx
import pytest
import respx

import lmclient
from lmclient._params import Timeouts
from lmclient._transports.aio import AsyncTransport
from lmclient._transports.sync import SyncTransport
from tests import scripted_server
from tests.scripted_server import COMPLETION, Idle, Reply, chunked, ok, post

# A read timeout long enough that waiting for it is a failure: each test has its own pytest
# timeout far below it, so a hang shows as a timeout failure, not as a slow pass.
PATIENT = Timeouts(5.0, 60.0, 5.0, 5.0)
MB = 1 << 20

pytestmark = pytest.mark.timeout(30)
script = scripted_server.script  # the scripted server fixture
sync = scripted_server.sync  # the transports, closed after each test
aio = scripted_server.aio


# -- 1. AsyncClient: a whole (non-streamed) response larger than the stream high-water mark -------


async def test_async_large_whole_body_is_read_to_its_end(script: Any, aio: AsyncTransport) -> None:
    """Reading used to pause at the stream high-water mark (1 MiB) and nothing resumed it."""
    big = b"x" * (5 * MB)
    server = script(ok(big), chunked(big[: 3 * MB], big[3 * MB :]))
    for _ in range(2):
        raw = await aio.send(post(server.url), PATIENT, 16 * MB, None)
        assert raw.body == big
    assert server.connections == 1


async def test_async_endless_whole_body_is_refused_at_the_limit(
    script: Any, aio: AsyncTransport
) -> None:
    server = script(chunked(*[b"y" * MB] * 4)[:-5])  # 4 MiB and no end
    with pytest.raises(lmclient.ProtocolError, match="max_response_bytes=2097152"):
        await aio.send(post(server.url), PATIENT, 2 * MB, None)
    assert not aio._pool.connections()


# -- 2 and 3. The sync pool checks an idle connection before reusing it ---------------------------


STRAY = ok(b"STRAY")
TIMED_OUT = b"HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"


@pytest.mark.parametrize(("idle", "connections"), [(Idle(STRAY), 2), (Idle(TIMED_OUT, True), 2)])
def test_sync_bytes_written_to_an_idle_connection_are_never_an_answer(
    script: Any, sync: SyncTransport, idle: Idle, connections: int
) -> None:
    """A stray response (or a 408 written before closing) on an idle pooled connection used to
    be read as the next request's answer, shifting every later answer by one."""
    server = script(Reply(ok(b"q1"), idle=idle), ok(b"q2"), ok(b"q3"))
    assert sync.send(post(server.url), PATIENT, MB, None).body == b"q1"
    idle.go.set()
    assert idle.sent.wait(10)
    assert [sync.send(post(server.url), PATIENT, MB, None).body for _ in range(2)] == [
        b"q2",
        b"q3",
    ]
    assert server.connections == connections


@pytest.mark.parametrize("idle", [Idle(STRAY), Idle(TIMED_OUT, True)])
async def test_async_bytes_written_to_an_idle_connection_are_never_an_answer(
    script: Any, aio: AsyncTransport, idle: Idle
) -> None:
    server = script(Reply(ok(b"q1"), idle=idle), ok(b"q2"), ok(b"q3"))
    assert (await aio.send(post(server.url), PATIENT, MB, None)).body == b"q1"
    idle.go.set()
    assert idle.sent.wait(10)
    # asyncio delivers the bytes to the idle connection (which closes itself) on its next turn
    bodies = [(await aio.send(post(server.url), PATIENT, MB, None)).body for _ in range(2)]
    assert bodies == [b"q2", b"q3"]


# -- 4. An early answer to a large request (413, 401) is the answer --------------------------------


TOO_LARGE = (
    b"HTTP/1.1 413 Request Entity Too Large\r\nconnection: close\r\n"
    b"content-type: application/json\r\ncontent-length: 21\r\n\r\n"
    b'{"error":"too large"}'
)
HUGE = b"{" + b" " * (32 * MB) + b"}"  # far more than the kernel buffers take


def test_sync_early_answer_to_a_large_body_is_returned(script: Any, sync: SyncTransport) -> None:
    """The send used to fail with a broken pipe and hide the server's 413; on a pooled connection
    the whole body was sent again first."""
    server = script(ok(b"first"), Reply(TOO_LARGE, early=True))
    assert sync.send(post(server.url), PATIENT, MB, None).body == b"first"
    raw = sync.send(post(server.url, HUGE), PATIENT, MB, None)
    assert (raw.status, raw.body) == (413, b'{"error":"too large"}')
    assert len(server.requests) == 2 and server.connections == 1  # not sent again
    assert not sync._pool.connections()


async def test_async_early_answer_to_a_large_body_is_returned(
    script: Any, aio: AsyncTransport
) -> None:
    """asyncio already read the answer while the write failed; kept so that it stays so."""
    server = script(ok(b"first"), Reply(TOO_LARGE, early=True))
    assert (await aio.send(post(server.url), PATIENT, MB, None)).body == b"first"
    raw = await aio.send(post(server.url, HUGE), PATIENT, MB, None)
    assert (raw.status, raw.body) == (413, b'{"error":"too large"}')
    assert len(server.requests) == 2 and server.connections == 1
    assert not aio._pool.connections()


# -- 8. URL credentials become Basic auth, as in httpx --------------------------------------------


def test_url_credentials_are_sent_as_basic_auth_as_httpx_sends_them(script: Any) -> None:
    """They used to be dropped without a word on lmclient's own transport."""
    server = script(COMPLETION, COMPLETION)
    url = server.url.replace("http://", "http://us%40er:p%3Ass@") + "/v1"
    with lmclient.Client(url, model="m", dialect="vllm") as client:
        assert client.generate("Q") == "4"
        assert "p%3Ass" not in repr(client) and "p:ss" not in repr(client)
    with httpx.Client() as oracle:
        oracle.post(url + "/chat/completions", content=b"{}")

    def authorization(request: bytes) -> list[bytes]:
        return [h for h in request.split(b"\r\n") if h.lower().startswith(b"authorization:")]

    ours, httpx_sent = (authorization(r) for r in server.requests)
    assert ours == [b"authorization: Basic dXNAZXI6cDpzcw=="]
    assert [h.lower() for h in ours] == [h.lower() for h in httpx_sent]


def test_url_credentials_and_an_api_key_argument_conflict() -> None:
    with pytest.raises(lmclient.ConfigurationError, match="credentials and api_key"):
        lmclient.Client("http://u:p@127.0.0.1:1/v1", model="m", api_key="sk-1")


def test_url_credentials_win_over_an_api_key_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    with lmclient.Client("http://u:p@127.0.0.1:1/v1", model="m") as client:
        assert dict(client._core._get_headers)["authorization"] == "Basic dTpw"


# -- 9. headers, API key and URL are checked when the client is made -------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"headers": {"x-a": "1\r\nevil: 2"}}, "value of header 'x-a'"),
        ({"headers": {"x-a": "nul\x00"}}, "value of header 'x-a'"),
        ({"headers": {"x-a": "\u2603"}}, "value of header 'x-a'"),
        ({"headers": {"bad name": "v"}}, "not an HTTP token"),
        ({"headers": {"": "v"}}, "not an HTTP token"),
        ({"headers": {"Content-Length": "5"}}, "set by lmclient"),
        ({"headers": {"Transfer-Encoding": "chunked"}}, "set by lmclient"),
        ({"headers": {"Host": "other"}}, "set by lmclient"),
        ({"headers": {"Connection": "close"}}, "set by lmclient"),
        ({"api_key": "sk-secret\r\nx: 1"}, "api_key holds"),
        ({"base_url": "ftp://127.0.0.1/v1"}, "http"),
        ({"base_url": "http:///v1"}, "http"),
        ({"base_url": "http://127.0.0.1:1/v1?x=1"}, "no query"),
        ({"base_url": "http://127.0.0.1:1/v1#f"}, "no query"),
        ({"base_url": "http://[::1/v1"}, "not a valid URL"),
    ],
)
@pytest.mark.parametrize("make", [lmclient.Client, lmclient.AsyncClient])
def test_bad_configuration_is_one_typed_error_when_the_client_is_made(
    make: Any, kwargs: dict[str, Any], message: str
) -> None:
    arguments: dict[str, Any] = {"base_url": "http://127.0.0.1:1/v1", "model": "m", **kwargs}
    with pytest.raises(lmclient.ConfigurationError, match=re.escape(message)) as info:
        make(**arguments)
    assert "sk-secret" not in str(info.value)
    assert isinstance(info.value, ValueError)  # what it was before it had a name


def test_a_users_framing_header_never_reaches_the_httpx_path() -> None:
    """Through a user's http_client, a Content-Length header used to leak h11's own exception
    and a Transfer-Encoding one put both framing headers on the wire; now neither is sent."""
    with pytest.raises(lmclient.ConfigurationError):
        lmclient.Client(
            "http://127.0.0.1:1/v1",
            model="m",
            headers={"content-length": "3"},
            http_client=httpx.Client(),
        )


# -- 9. a compressed bomb through httpx's paths is refused within the limit -----------------------


BOMB = gzip.compress(b"\0" * (64 * MB), compresslevel=9)
LIMIT = 4 * MB


def _refused_after(exc: BaseException) -> int:
    found = re.search(r"refused after (\d+) bytes", str(exc))
    assert found, str(exc)
    return int(found.group(1))


@respx.mock
def test_respx_path_inflates_a_bomb_no_further_than_the_limit() -> None:
    """httpx's decoder inflated each whole chunk (to 64 MiB here) before lmclient counted it."""
    respx.post("http://bomb.test/v1/chat/completions").respond(
        200, content=BOMB, headers={"content-encoding": "gzip"}
    )
    transport = SyncTransport()
    with pytest.raises(lmclient.ProtocolError) as info:
        transport.send(post("http://bomb.test"), PATIENT, LIMIT, None)
    assert _refused_after(info.value) <= LIMIT + 1
    with pytest.raises(lmclient.ProtocolError) as info:
        for _ in transport.stream(post("http://bomb.test"), PATIENT, LIMIT, None).chunks:
            pass
    assert _refused_after(info.value) <= LIMIT + 1


async def test_users_async_client_inflates_a_bomb_no_further_than_the_limit(script: Any) -> None:
    server = script(
        ok(BOMB, "Content-Encoding: gzip"), ok(gzip.compress(b"[1]"), "Content-Encoding: gzip")
    )
    async with httpx.AsyncClient() as http_client:
        transport = AsyncTransport(http_client)
        with pytest.raises(lmclient.ProtocolError) as info:
            await transport.send(post(server.url), PATIENT, LIMIT, None)
        assert _refused_after(info.value) <= LIMIT + 1
        assert (await transport.send(post(server.url), PATIENT, LIMIT, None)).body == b"[1]"
    encodings = [
        line for line in server.requests[0].split(b"\r\n") if line.startswith(b"accept-encoding")
    ]
    assert encodings == [b"accept-encoding: gzip, deflate"]  # never a coding lmclient can't bound
