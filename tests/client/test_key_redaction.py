"""The client's own key never shows: not in a server's text that lmclient puts into an exception
or a log line (a server here echoes the ``Authorization`` header it received in its error
bodies and stream error events), and not in the ``repr`` of any lmclient object a call leaves
reachable from its exception's frames (what an error tracker recording frame locals records).
Issue 26: the key was in ``str(exception)``, the retry WARNING, ``repr(Call)`` and
``repr(PreparedRequest)``.

Against the fake over real loopback sockets, sync and async, lmclient's own transport and a
user's httpx client."""

from __future__ import annotations

import asyncio
import base64
import gc
import logging
import os
import types
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import lmclient
from lmclient.testing import FakeLLM, RecordedRequest

PACKAGE = os.path.dirname(lmclient.__file__)
AS_RECEIVED = (
    "lmclient._wire.protocol",
    "lmclient._wire.sse",
)  # a server's events and bodies, decoded
KEY = "sk-echoed-0123456789abcdef"
BASIC_PASSWORD = "pa55-w0rd-echoed"


def echoing_fake(kind: str) -> FakeLLM:
    """A fake whose answer to each generation request quotes the Authorization header it got:
    a 500 error body (``kind="status"``), or an error event mid-stream (``"stream"``)."""
    fake: FakeLLM

    def on_request(request: RecordedRequest) -> None:
        if request.endpoint != "chat":
            return
        auth = request.headers.get("authorization", "")
        decoded = ""
        if auth.startswith("Basic "):
            decoded = base64.b64decode(auth.removeprefix("Basic ")).decode()
        echoed = f"unauthorized: you sent {auth!r} ({decoded}) token={auth.partition(' ')[2]}"
        if kind == "stream":
            fake.stream_error(after=1, status=500, message=echoed)
        else:
            fake.reply_error(
                500,
                {"error": {"message": echoed, "type": "auth", "param": auth}},
                headers={"x-request-id": auth, "retry-after": "0"},
            )

    fake = FakeLLM(on_request=on_request)
    return fake


@pytest.fixture(params=["status", "stream"])
def served(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    fake = echoing_fake(request.param)
    with fake.serve() as url:
        yield url, request.param


def secrets_shown(text: str) -> list[str]:
    return [
        s
        for s in (KEY, BASIC_PASSWORD, base64.b64encode(f"me:{BASIC_PASSWORD}".encode()).decode())
        if s in text
    ]


def reachable_reprs(exc: BaseException) -> Iterator[tuple[str, str]]:
    """(type name, repr) of the exception and of every lmclient object reachable from it and
    from the locals of lmclient's frames in its traceback (what an error tracker records),
    through any container. Not what the server sent, as it sent it: its bytes, headers and
    their events and decoded wire structs (`AS_RECEIVED`) are its text, key echoed and all; what
    lmclient makes of them (the exception) is checked."""
    seen: set[int] = set()
    todo: list[Any] = [exc]
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(PACKAGE):
            todo.extend(tb.tb_frame.f_locals.values())
        tb = tb.tb_next
    while todo and len(seen) < 200_000:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType, types.FunctionType)):
            continue
        seen.add(id(obj))
        module = type(obj).__module__ or ""
        if module in AS_RECEIVED:
            continue
        ours = module.startswith("lmclient")
        if ours or isinstance(obj, BaseException):
            yield type(obj).__qualname__, repr(obj)
        if ours or isinstance(obj, (list, tuple, dict, set, frozenset, BaseException)):
            todo.extend(gc.get_referents(obj))


def check_exception(exc: BaseException, caplog: pytest.LogCaptureFixture) -> None:
    assert not secrets_shown(str(exc)), str(exc)
    for name in ("body", "message", "request_id"):
        assert not secrets_shown(repr(getattr(exc, name, ""))), name
    assert not secrets_shown(caplog.text), caplog.text
    leaks = [(name, shown) for name, shown in reachable_reprs(exc) if secrets_shown(shown)]
    assert not leaks, leaks[:3]


CREDENTIALS = [
    pytest.param({"api_key": KEY}, id="api_key"),
    pytest.param({"url_credentials": True}, id="basic"),
]


def options(url: str, credentials: dict[str, Any]) -> dict[str, Any]:
    if credentials.get("url_credentials"):
        url = url.replace("http://", f"http://me:{BASIC_PASSWORD}@")
        return {"base_url": url}
    return {"base_url": url, "api_key": credentials["api_key"]}


@pytest.mark.parametrize("credentials", CREDENTIALS)
@pytest.mark.parametrize("via", ["own", "httpx"])
def test_sync(
    served: tuple[str, str], credentials: dict[str, Any], via: str, caplog: pytest.LogCaptureFixture
) -> None:
    url, kind = served
    caplog.set_level(logging.DEBUG, logger="lmclient")
    http_client = httpx.Client() if via == "httpx" else None
    client = lmclient.Client(
        model="m",
        dialect="vllm",
        max_retries=1,
        http_client=http_client,
        **options(url, credentials),
    )
    with client, pytest.raises(lmclient.LMClientError) as caught:
        if kind == "stream":
            with client.stream("hi there, a few words") as stream:
                for _ in stream:
                    pass
        else:
            client.generate("hi")
    assert "<redacted>" in str(caught.value)
    if kind == "status":
        assert "retry 1 of 1" in caplog.text  # the WARNING line quoted the server's text
    check_exception(caught.value, caplog)
    assert not secrets_shown(repr(client))
    if http_client is not None:
        http_client.close()


@pytest.mark.parametrize("credentials", CREDENTIALS)
@pytest.mark.parametrize("via", ["own", "httpx"])
async def test_async(
    served: tuple[str, str], credentials: dict[str, Any], via: str, caplog: pytest.LogCaptureFixture
) -> None:
    url, kind = served
    caplog.set_level(logging.DEBUG, logger="lmclient")
    http_client = httpx.AsyncClient() if via == "httpx" else None
    client = lmclient.AsyncClient(
        model="m",
        dialect="vllm",
        max_retries=1,
        http_client=http_client,
        **options(url, credentials),
    )
    async with client:
        with pytest.raises(lmclient.LMClientError) as caught:
            if kind == "stream":
                async with client.stream("hi there, a few words") as stream:
                    async for _ in stream:
                        pass
            else:
                await asyncio.wait_for(client.generate("hi"), 30)
    assert "<redacted>" in str(caught.value)
    check_exception(caught.value, caplog)
    assert not secrets_shown(repr(client))
    if http_client is not None:
        await http_client.aclose()


def test_reprs_of_a_call_and_its_request() -> None:
    """Without any server: the objects a call is made of."""
    client = lmclient.Client("http://127.0.0.1:9/v1", "m", api_key=KEY, dialect="vllm")
    call = client._core.prepare("generate", "hi", str, "chat", {})
    for obj in (client, client._core, client._transport, call, call.request, call.request.headers):
        assert KEY not in repr(obj), type(obj)
    assert any(KEY in value for _, value in call.request.headers)  # sent as it is
    client.close()
