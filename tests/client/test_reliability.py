"""Every fault `lmclient.testing` can inject, against both clients over real sockets: each ends
in success after a retry or in the documented exception, within a bounded time, and the client
stays usable (the next 100 calls succeed, no connection is left checked out).

`FAULT_CASES` is also the fault table of docs/reliability.md: ``python -m
tests.client.test_reliability --write`` regenerates it, and a test checks that they agree.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import lmclient
from lmclient.testing import FakeLLM
from lmclient.testing._faults import FAULTS
from tests.helpers import checked_out

BOUND = 5.0  # seconds: a call with a 1 s deadline must end well within this
# The fake's endless stream (a space at a time) and oversize answers (``x`` repeated) are loops
# that the runaway watch stops first (`RunawayError`): their rows are about the deadline and
# the size limit, so they are played to a client without the watch.
NO_WATCH: dict[str, Any] = {"runaway": "off"}


@dataclasses.dataclass(frozen=True)
class Case:
    kind: str  # the FakeLLM fault kind
    fault: str  # what the server does (docs/reliability.md)
    outcome: str  # what the client does (docs/reliability.md)
    inject: Callable[[FakeLLM], object]
    expect: type[Exception] | None  # None: the call succeeds after a retry
    stream: bool = False
    client: dict[str, Any] = dataclasses.field(default_factory=dict)
    output_type: Any = str  # of the call (not streams)


FAULT_CASES = [
    Case(
        "status",
        "503 with `Retry-After: 0`",
        "retried, then succeeds",
        lambda f: f.fail(503, retry_after=0),
        None,
    ),
    Case(
        "status",
        "429 asking for a 1-hour pause",
        "`RateLimitError` at once, with `.retry_after`",
        lambda f: f.fail(429, retry_after=3600),
        lmclient.RateLimitError,
    ),
    Case(
        "status",
        "400 with an error envelope",
        "`BadRequestError`, not retried",
        lambda f: f.fail(400, body="bad schema"),
        lmclient.BadRequestError,
    ),
    Case(
        "delay",
        "no status line for ever",
        "`APITimeoutError` at the deadline",
        lambda f: f.delay(math.inf),
        lmclient.APITimeoutError,
        client={"deadline": 1},
    ),
    Case(
        "stall",
        "stops halfway through the body",
        "`APITimeoutError` at the deadline",
        lambda f: f.stall(),
        lmclient.APITimeoutError,
        client={"deadline": 1},
    ),
    Case(
        "stall",
        "stops halfway through a stream",
        "`APITimeoutError` at the deadline",
        lambda f: f.stall(),
        lmclient.APITimeoutError,
        stream=True,
        client={"deadline": 1},
    ),
    Case(
        "disconnect_start",
        "closes the connection before answering",
        "retried, then succeeds",
        lambda f: f.disconnect("start"),
        None,
    ),
    Case(
        "disconnect_headers",
        "closes the connection mid-headers",
        "retried, then succeeds",
        lambda f: f.disconnect("headers"),
        None,
    ),
    Case(
        "disconnect_body",
        "closes the connection mid-body",
        "retried, then succeeds",
        lambda f: f.disconnect("body"),
        None,
    ),
    Case(
        "disconnect_stream",
        "closes the connection mid-stream",
        "`APIConnectionError` (a stream that has yielded is not retried)",
        lambda f: f.disconnect("stream"),
        lmclient.APIConnectionError,
        stream=True,
    ),
    Case(
        "invalid_json",
        "200 with a body that is not JSON",
        "`ProtocolError` carrying the bytes",
        lambda f: f.invalid_json(),
        lmclient.ProtocolError,
    ),
    Case(
        "invalid_json",
        "a stream event that is not JSON",
        "`ProtocolError` carrying the event",
        lambda f: f.invalid_json(),
        lmclient.ProtocolError,
        stream=True,
    ),
    Case(
        "invalid_utf8",
        "200 with bytes that are not UTF-8",
        "`ProtocolError`",
        lambda f: f.invalid_utf8(),
        lmclient.ProtocolError,
    ),
    Case(
        "truncate",
        "a stream that ends without `[DONE]` or a finish reason",
        "`ProtocolError`",
        lambda f: f.truncate(),
        lmclient.ProtocolError,
        stream=True,
    ),
    Case(
        "stream_error",
        "an error event inside a 200 stream",
        "`ServerError` (the event's code picks the class)",
        lambda f: f.stream_error(),
        lmclient.ServerError,
        stream=True,
    ),
    Case(
        "endless",
        "a stream that never ends",
        "`APITimeoutError` at the deadline",
        lambda f: f.endless(),
        lmclient.APITimeoutError,
        stream=True,
        client={"deadline": 1, **NO_WATCH},
    ),
    Case(
        "oversize",
        "a body larger than `max_response_bytes` (declared)",
        "`ProtocolError` before reading it",
        lambda f: f.oversize(),
        lmclient.ProtocolError,
        client=NO_WATCH,
    ),
    Case(
        "oversize",
        "a body larger than `max_response_bytes` (chunked)",
        "`ProtocolError` once the limit is passed, without buffering the rest",
        lambda f: f.oversize(2**21, chunked=True),
        lmclient.ProtocolError,
        client={"max_response_bytes": 2**20, **NO_WATCH},
    ),
    Case(
        "oversize",
        "a stream larger than `max_response_bytes`",
        "`ProtocolError` once the limit is passed",
        lambda f: f.oversize(2**21),
        lmclient.ProtocolError,
        stream=True,
        client={"max_response_bytes": 2**20, **NO_WATCH},
    ),
    Case(
        "runaway",
        "a `list[str]` answer that loops, a token at a time (read whole: cut after 2,048 tokens)",
        "`RunawayError` (a `TruncatedError`) carrying the text, stopped by lmclient's watch, "
        "not re-asked",
        lambda f: f.runaway(),
        lmclient.RunawayError,
        output_type=list[str],
    ),
]
IDS = [f"{c.kind}-{'stream' if c.stream else 'call'}-{i}" for i, c in enumerate(FAULT_CASES)]


def test_every_fault_kind_is_covered() -> None:
    assert {c.kind for c in FAULT_CASES} == set(FAULTS)


def _still_usable(client: lmclient.Client) -> None:
    for _ in range(100):
        assert client.generate("again?") == FakeLLM().default_text
    assert checked_out(client) == 0


@pytest.mark.parametrize("case", FAULT_CASES, ids=IDS)
@pytest.mark.slow  # the fault table: some faults are 1 s waits by design
def test_sync_client_survives(case: Case) -> None:
    fake = FakeLLM()
    case.inject(fake)
    with fake.serve() as url, lmclient.Client(url, **case.client) as client:
        started = time.monotonic()
        try:
            if case.stream:
                with client.stream("Q") as s:
                    value = s.read()
            else:
                value = client.generate("Q", case.output_type)
        except Exception as exc:
            assert case.expect is not None and isinstance(exc, case.expect), repr(exc)
        else:
            assert case.expect is None and value == fake.default_text
        assert time.monotonic() - started < BOUND
        assert checked_out(client) == 0
        with lmclient.Client(
            url, **{k: v for k, v in case.client.items() if k != "max_response_bytes"}
        ) as fresh:
            _still_usable(fresh)
        _still_usable(client)


async def _astill_usable(client: lmclient.AsyncClient) -> None:
    for _ in range(100):
        assert await client.generate("again?") == FakeLLM().default_text
    assert checked_out(client) == 0


@pytest.mark.parametrize("case", FAULT_CASES, ids=IDS)
@pytest.mark.slow  # the fault table: some faults are 1 s waits by design
async def test_async_client_survives(case: Case) -> None:
    fake = FakeLLM()
    case.inject(fake)
    with fake.serve() as url:
        async with lmclient.AsyncClient(url, **case.client) as client:
            started = time.monotonic()
            try:
                if case.stream:
                    async with client.stream("Q") as s:
                        value = await s.aread()
                else:
                    value = await client.generate("Q", case.output_type)
            except Exception as exc:
                assert case.expect is not None and isinstance(exc, case.expect), repr(exc)
            else:
                assert case.expect is None and value == fake.default_text
            assert time.monotonic() - started < BOUND
            assert checked_out(client) == 0
            await _astill_usable(client)


def test_redirects_are_not_followed() -> None:
    fake = FakeLLM()
    fake.add_route(
        "POST", "/v1/chat/completions", "", status=307, headers={"location": "http://127.0.0.1:9/"}
    )
    with (
        fake.serve() as url,
        lmclient.Client(url, api_key="sk-key") as client,
        pytest.raises(lmclient.APIStatusError) as info,
    ):
        client.generate("Q")
    assert info.value.status_code == 307
    assert [r.path for r in fake.requests if r.method == "POST"] == ["/v1/chat/completions"]


# -- the table in docs/reliability.md ----------------------------------------------------------

START, END = "<!-- faults:start -->\n", "<!-- faults:end -->"
PAGE = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"  # the table's page


def table() -> str:
    rows = ["| fault (`lmclient.testing` kind) | server does | client does |", "|---|---|---|"]
    for case in FAULT_CASES:
        where = " (stream)" if case.stream else ""
        rows.append(f"| `{case.kind}`{where} | {case.fault} | {case.outcome} |")
    return "\n".join(rows)


def test_readme_fault_table_is_this_list() -> None:
    text = PAGE.read_text()
    shown = text[text.index(START) + len(START) : text.index(END)].strip()
    assert shown == table(), "run: python -m tests.client.test_reliability --write"


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        text = PAGE.read_text()
        head, rest = text.split(START, 1)
        PAGE.write_text(head + START + table() + "\n" + END + rest.split(END, 1)[1])
    else:
        print(table())
