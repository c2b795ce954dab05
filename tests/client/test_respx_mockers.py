"""respx as openai SDK users write it: ``respx.mock()`` with either mocker (``using="httpcore"``,
the default, and ``using="httpx"``), strict (only the POST route the test calls is mocked),
the default client (``dialect="auto"``), sync and async, a call and a stream, the client made
before or after the mock starts. Nothing may reach the network: ``llm.test`` does not resolve,
so a request that escaped the mock would fail with a connection error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
import respx

import lmclient
from lmclient._dialects import PROBE_PATHS
from lmclient._transports.common import respx_watches

URL = "http://llm.test/v1"
COMPLETION = {
    "id": "c1",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "hi"},
            "finish_reason": "stop",
        }
    ],
}


def _sse() -> bytes:
    chunk = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}],
    }
    return f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()


def _answer(request: httpx.Request) -> httpx.Response:
    if json.loads(request.content).get("stream"):
        return httpx.Response(200, content=_sse(), headers={"content-type": "text/event-stream"})
    return httpx.Response(200, json=COMPLETION)


@contextmanager
def mocked(using: str) -> Iterator[respx.Route]:
    with respx.mock(using=using) as router:  # strict: every other route is an error
        yield router.post(f"{URL}/chat/completions").mock(side_effect=_answer)


MOCKERS = pytest.mark.parametrize("using", ["httpcore", "httpx"])
ORDER = pytest.mark.parametrize("before", [True, False], ids=["client-before", "client-after"])


@MOCKERS
@ORDER
def test_sync_client(using: str, before: bool) -> None:
    client = lmclient.Client(URL, model="m") if before else None
    with mocked(using) as route:
        client = client or lmclient.Client(URL, model="m")
        with client:
            assert client.generate("Q") == "hi"
            assert "".join(client.stream("Q")) == "hi"
            assert client.dialect == "generic"  # the probes were not mocked: not recognised
    assert route.call_count == 2


@MOCKERS
@ORDER
async def test_async_client(using: str, before: bool) -> None:
    client = lmclient.AsyncClient(URL, model="m") if before else None
    with mocked(using) as route:
        client = client or lmclient.AsyncClient(URL, model="m")
        async with client:
            assert await client.generate("Q") == "hi"
            assert "".join([d async for d in client.stream("Q")]) == "hi"
    assert route.call_count == 2


@MOCKERS
def test_model_none_without_a_mocked_model_list_says_so(using: str) -> None:
    """respx's own error names the route to mock (or pass model=)."""
    with (
        respx.mock(using=using, assert_all_called=False),
        lmclient.Client(URL) as client,
        pytest.raises(AssertionError, match=r"GET.*/v1/models"),
    ):
        client.generate("Q")


@MOCKERS
def test_after_the_mock_the_client_goes_to_the_network_again(using: str) -> None:
    with lmclient.Client(URL, model="m", dialect="generic", max_retries=0) as client:
        with mocked(using):
            assert client.generate("Q") == "hi"
        with pytest.raises(lmclient.APIConnectionError, match=r"llm\.test"):
            client.generate("Q")


@pytest.mark.parametrize("asynchronous", [False, True])
def test_the_watched_methods_are_the_ones_respx_replaces(asynchronous: bool) -> None:
    """The httpx mocker's method is httpx's private ``_transport_for_url``: if an httpx or
    respx release moves it, this fails rather than a suite silently reaching the network."""
    pools, clients = respx_watches(asynchronous)
    assert not pools.active() and not clients.active()
    for using, watch in (("httpcore", pools), ("httpx", clients)):
        with respx.mock(using=using):
            assert watch.active(), using
        assert not watch.active(), using


@pytest.mark.parametrize(
    ("probes", "listing"),
    [
        (httpx.ConnectError("refused on this route"), httpx.Response(404)),
        (httpx.Response(200, text="<html>not json</html>"), httpx.Response(200, text="{")),
        (httpx.Response(404), httpx.ConnectError("refused on this route")),
    ],
    ids=["connection-error", "not-json", "404"],
)
def test_whatever_detection_gets_the_call_goes_on_as_generic(
    probes: httpx.Response | Exception, listing: httpx.Response | Exception
) -> None:
    with respx.mock() as router, lmclient.Client(URL, model="m") as client:
        route = router.post(f"{URL}/chat/completions").mock(side_effect=_answer)
        models = router.get(f"{URL}/models").mock(side_effect=[listing])
        probed = router.get(url__regex=r"http://llm\.test/\w+").mock(side_effect=[probes] * 6)
        assert client.generate("Q") == "hi"
        assert client.dialect == "generic"
    assert (route.call_count, models.call_count, probed.call_count) == (1, 1, 6)


async def test_whatever_detection_gets_the_async_call_goes_on_as_generic() -> None:
    with respx.mock(using="httpx") as router:
        route = router.post(f"{URL}/chat/completions").mock(side_effect=_answer)
        router.get(f"{URL}/models").mock(return_value=httpx.Response(503))
        probed = router.get(url__regex=r"http://llm\.test/[\w/]+").mock(
            side_effect=httpx.ConnectError("refused")
        )
        async with lmclient.AsyncClient(URL, model="m") as client:
            assert await client.generate("Q") == "hi"
            assert client.dialect == "generic"
    assert (route.call_count, probed.call_count) == (1, len(PROBE_PATHS))
