"""The error tree is the openai SDK's: `except lmclient.APIError` catches every failure of the
API — an error status, a connection that fails, a timeout, bytes that are not the protocol —
as ``except openai.APIError`` does, sync and async, over real sockets; what the tree change must
not change (retries, the CLI's lines, the hooks' fields) stays as it was.
The table of docs/reliability.md (openai's exception → lmclient's) is `OPENAI` here."""

from __future__ import annotations

import math
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

import lmclient
import lmclient.errors
from lmclient import _cli
from lmclient.testing import FakeLLM
from tests.helpers import call

MODEL = "fake-model"
PAGE = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"

# Each exception of openai-python's _exceptions.py that a call can raise → lmclient's.
OPENAI: dict[type[Exception], type[Exception]] = {
    openai.OpenAIError: lmclient.LMClientError,
    openai.APIError: lmclient.APIError,
    openai.APIStatusError: lmclient.APIStatusError,
    openai.BadRequestError: lmclient.BadRequestError,
    openai.AuthenticationError: lmclient.AuthenticationError,
    openai.PermissionDeniedError: lmclient.PermissionDeniedError,
    openai.NotFoundError: lmclient.NotFoundError,
    openai.ConflictError: lmclient.APIStatusError,
    openai.UnprocessableEntityError: lmclient.BadRequestError,
    openai.RateLimitError: lmclient.RateLimitError,
    openai.InternalServerError: lmclient.ServerError,
    openai.APIConnectionError: lmclient.APIConnectionError,
    openai.APITimeoutError: lmclient.APITimeoutError,
    openai.APIResponseValidationError: lmclient.ProtocolError,
    openai.LengthFinishReasonError: lmclient.TruncatedError,
    openai.ContentFilterFinishReasonError: lmclient.RefusalError,
}


def test_the_tree_is_the_openai_sdks() -> None:
    """Whatever catches an openai exception catches, here, the lmclient one it maps to: for
    every pair of rows, subclassing on the SDK's side is subclassing on lmclient's."""
    for theirs, ours in OPENAI.items():
        for their_base, our_base in OPENAI.items():
            if issubclass(theirs, their_base) and ours is not our_base:
                assert issubclass(ours, our_base), (ours, our_base)


def test_the_docs_table_is_this_one() -> None:
    page = PAGE.read_text()
    rows = re.findall(r"^\| `openai\.(\w+)` \| `(\w+)` \|", page, re.M)
    assert {getattr(openai, a): getattr(lmclient, b) for a, b in rows} == OPENAI


def documented_tree() -> dict[str, str | None]:
    """The tree drawn under "## Errors" in docs/reliability.md: each class → its parent."""
    section = PAGE.read_text().split("\n## Errors\n", 1)[1]
    drawing = section.split("```\n", 2)[1]
    parents: dict[str, str | None] = {}
    path: list[str] = []  # the line's ancestors, by depth (four columns a level)
    for line in drawing.splitlines():
        found = re.match(r"([│├└─ ]*)(\w+)", line)
        assert found is not None, f"not a line of the tree: {line!r}"
        depth = len(found.group(1)) // 4
        path[depth:] = [found.group(2)]
        assert found.group(2) not in parents, f"{found.group(2)} drawn twice"
        parents[found.group(2)] = path[depth - 1] if depth else None
    return parents


def test_the_docs_tree_is_the_exception_classes_of_lmclient_errors() -> None:
    """Every exception class `lmclient.errors` defines, each under its lmclient base, and none
    else: a class added to the module and not to the page fails here."""
    classes = [
        value
        for value in vars(lmclient.errors).values()
        if isinstance(value, type)
        and issubclass(value, lmclient.LMClientError)
        and value.__module__ == "lmclient.errors"
    ]
    real: dict[str, str | None] = {}
    for cls in classes:
        bases = [b for b in cls.__bases__ if issubclass(b, lmclient.LMClientError)]
        assert len(bases) <= 1, f"{cls.__name__}: two lmclient bases, which no tree can draw"
        real[cls.__name__] = bases[0].__name__ if bases else None
    assert documented_tree() == real


@pytest.fixture
def closed_port() -> Iterator[str]:
    """A base URL on 127.0.0.1 where nothing listens (the port was just released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    yield f"http://127.0.0.1:{port}/v1"


FAILURES = ["connection", "timeout", "protocol"]


def _setup(fake: FakeLLM, failure: str) -> dict[str, Any]:
    """Script ``failure``; the client options that make it end the call."""
    if failure == "timeout":
        fake.delay(math.inf)
        return {"timeout": 0.5}
    if failure == "protocol":
        fake.invalid_json()
    return {}


EXPECTED = {
    "connection": lmclient.APIConnectionError,
    "timeout": lmclient.APITimeoutError,
    "protocol": lmclient.ProtocolError,
}


@pytest.mark.parametrize("failure", FAILURES)
def test_sync_except_api_error_catches(failure: str, closed_port: str) -> None:
    fake = FakeLLM()
    options = _setup(fake, failure)
    with fake.serve() as url:
        target = closed_port if failure == "connection" else url
        with lmclient.Client(target, model=MODEL, dialect="vllm", max_retries=0, **options) as c:
            try:
                c.generate("Q")
            except lmclient.APIError as exc:  # as a user who knows the openai SDK writes it
                caught: Exception = exc
    assert type(caught) is EXPECTED[failure]


@pytest.mark.parametrize("failure", FAILURES)
async def test_async_except_api_error_catches(failure: str, closed_port: str) -> None:
    fake = FakeLLM()
    options = _setup(fake, failure)
    with fake.serve() as url:
        target = closed_port if failure == "connection" else url
        async with lmclient.AsyncClient(
            target, model=MODEL, dialect="vllm", max_retries=0, **options
        ) as client:
            try:
                await client.generate("Q")
            except lmclient.APIError as exc:
                caught: Exception = exc
    assert type(caught) is EXPECTED[failure]


async def test_async_stream_protocol_error_is_an_api_error() -> None:
    fake = FakeLLM()
    fake.invalid_json()
    with fake.serve() as url:
        async with lmclient.AsyncClient(url, model=MODEL, dialect="vllm") as client:
            with pytest.raises(lmclient.APIError) as info:
                async with client.stream("Q") as s:
                    await s.aread()
    assert isinstance(info.value, lmclient.ProtocolError)


def test_sync_stream_protocol_error_is_an_api_error() -> None:
    fake = FakeLLM()
    fake.invalid_json()
    with (
        fake.serve() as url,
        lmclient.Client(url, model=MODEL, dialect="vllm") as client,
        pytest.raises(lmclient.APIError) as info,
        client.stream("Q") as s,
    ):
        s.read()
    assert isinstance(info.value, lmclient.ProtocolError)


# -- what moving the classes must not change -------------------------------------------------


def test_a_protocol_error_is_still_not_retried() -> None:
    """Under `APIError` now, but the same request would get the same bytes."""
    c = call(max_retries=3)
    exc = lmclient.ProtocolError("unexpected response body", body=b"<html>")
    with pytest.raises(lmclient.ProtocolError) as info:
        c.backoff(exc)
    assert info.value is exc and c.retries == 0


def test_connection_errors_are_still_retried() -> None:
    c = call(max_retries=3)
    assert c.backoff(lmclient.APIConnectionError("refused")) > 0
    assert c.backoff(lmclient.APITimeoutError("timed out")) > 0
    assert c.retries == 2


def test_sync_protocol_error_sent_once_over_sockets(fake: FakeLLM, url: str) -> None:
    fake.invalid_json()
    with (
        lmclient.Client(url, model=MODEL, dialect="vllm", max_retries=2) as client,
        pytest.raises(lmclient.ProtocolError),
    ):
        client.generate("Q")
    assert len([r for r in fake.requests if r.method == "POST"]) == 1


def test_cli_error_lines_keep_their_fields() -> None:
    """`lmclient batch` writes a status code for an error status only, as before."""
    refused = _cli._result_line(lmclient.APIConnectionError("refused"))
    assert refused == {"error": {"type": "APIConnectionError", "message": "refused"}}
    bad = _cli._result_line(lmclient.ProtocolError("not JSON"))
    assert "status_code" not in bad["error"]
    status = _cli._result_line(lmclient.NotFoundError("no such model", status_code=404))
    assert status["error"]["status_code"] == 404


def test_hooks_report_no_status_for_a_connection_error(closed_port: str) -> None:
    events: list[lmclient.HookEvent] = []
    with (
        lmclient.Client(
            closed_port, model=MODEL, dialect="vllm", max_retries=0, hooks=[events.append]
        ) as client,
        pytest.raises(lmclient.APIConnectionError),
    ):
        client.generate("Q")
    (failed,) = [e for e in events if isinstance(e, lmclient.CallFailed)]
    assert (failed.error, failed.status) == ("APIConnectionError", None)


def test_api_status_error_str_and_fields() -> None:
    exc = lmclient.APIStatusError("I'm a teapot", status_code=418, headers={"X-A": "1"})
    assert (str(exc), exc.message, exc.status_code) == ("418: I'm a teapot", "I'm a teapot", 418)
    assert exc.headers["x-a"] == exc.headers["X-A"] == "1"
    protocol = lmclient.ProtocolError("bad", body=b"xyz")
    shown = (str(protocol), protocol.message, protocol.body)
    assert shown == ("bad; received b'xyz'", "bad", b"xyz")
