"""What test modules share: recorded bytes' folders, response bodies and streams, a core and a
call without sockets (and its answer: `answered`), the pool's counters, the array splitter's
work, a gated fake, OpenTelemetry's in-memory exporter.

A test module imports its helpers from here (or from the other helper modules beside it:
`tests.kinds`, `tests.byte_server`, `tests.scripted_server`, ...), never from another test
module: importing one runs its module-level set-up and pulls its fixtures along, and the two
modules can then no longer be moved or changed apart (`tests/test_layout.py` holds this).
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import re
import sys
import threading
import types
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import httpx
import msgspec
import pytest

import lmclient
from lmclient import _call, _core
from lmclient._wire import sse as _sse
from lmclient.testing import FakeLLM

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

FIXTURES = pathlib.Path(__file__).parent / "fixtures"  # recorded server bytes: see its README
EXAMPLES = FIXTURES / "examples"
LLAMACPP_LIVE = FIXTURES / "llamacpp-live"
# The fake server each dialect is tried against: its own, or one that answers no probe and
# reads every field (a dialect with no fake of its own).
FAKE_SERVER = {
    "vllm": "vllm",
    "vllm-guided": "vllm-guided",
    "sglang": "sglang",
    "llamacpp": "llamacpp",
    "tgi": "tgi",
    "ollama": "ollama",
    "lmstudio": "generic",
    "sglang-gateway": "sglang-gateway",
    "openai": "generic",
    "generic": "generic",
}


# -- response bodies -------------------------------------------------------------------------


def chat_body(
    content: str | None,
    *,
    finish_reason: str | None = "stop",
    n: int = 1,
    **message: Any,
) -> dict[str, Any]:
    """A vLLM-shaped chat completion body."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": i,
                "message": {"role": "assistant", "content": content, **message},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
            for i in range(n)
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8},
    }


def completion_body(text: str, *, finish_reason: str | None = "stop") -> dict[str, Any]:
    """A vLLM-shaped text completion body."""
    return {
        "id": "cmpl-1",
        "object": "text_completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8},
    }


def reply(endpoint: str, text: str, **kw: Any) -> httpx.Response:
    """A 200 answer with ``text`` in the endpoint's body shape (for respx routes)."""
    body = chat_body(text, **kw) if endpoint == "chat" else completion_body(text, **kw)
    return httpx.Response(200, json=body)


# -- server-sent events ----------------------------------------------------------------------


def events(*chunks: Any, done: bool = True) -> bytes:
    """A stream's bytes: each chunk an event, then ``[DONE]``."""
    out = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    return out + (b"data: [DONE]\n\n" if done else b"")


def delta(content: str | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    """A chat chunk of choice 0 (``extra``: more fields of its delta)."""
    d: dict[str, Any] = {} if content is None else {"content": content}
    d.update(extra)
    return {
        "id": "c1",
        "model": "m",
        "choices": [{"index": 0, "delta": d, "finish_reason": finish}],
    }


def text_stream(text: str, size: int = 3, finish: str = "stop", usage: bool = True) -> bytes:
    """A chat stream of ``text`` in ``size``-character deltas, as vLLM sends one."""
    parts = [delta("", role="assistant")]
    parts += [delta(text[i : i + size]) for i in range(0, len(text), size)]
    parts.append(delta(finish=finish))
    if usage:
        parts.append(
            {
                "choices": [],
                "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
            }
        )
    return events(*parts)


# -- the core without sockets ----------------------------------------------------------------


def make_core(**kw: Any) -> _core.ClientCore:
    return _core.ClientCore("http://h/v1", "m", **{"dialect": "vllm", **kw})


def body_of(dialect: str, output_type: Any = str, endpoint: Any = "chat", **params: Any) -> Any:
    """The decoded body of a call, as `dialect` sends it, without the runaway watch's fields
    (vLLM's ``repetition_detection``, a stream elsewhere: `tests.kinds.expected_watch`) nor
    the ``rid`` lmclient makes for a call it may abort (`without_made_rid`), so that a test of
    other fields compares only its own."""
    core = _core.ClientCore("http://h/v1", "m", dialect=dialect, runaway="off")
    call = core.prepare("create", "Q", output_type, endpoint, params)
    assert call.request.body is not None
    return without_made_rid(msgspec.json.decode(call.request.body), call)


def without_made_rid(body: dict[str, Any], call: _call.Call) -> dict[str, Any]:
    """``body`` without the ``rid`` lmclient made for ``call`` (SGLang's, for its abort: a
    uuid4's hex, the one its abort request names), checked as such; a body whose call has no
    abort, or whose rid was given, as it is."""
    if call.abort is None:
        return body
    rid = body["rid"]
    assert call.abort.request.body == msgspec.json.encode({"rid": rid})
    if not call.abort.made:  # a request_id, or extra_body's: kept
        return body
    assert re.fullmatch(r"[0-9a-f]{32}", rid)
    return {k: v for k, v in body.items() if k != "rid"}


def sent(dialect: str, **params: Any) -> dict[str, Any]:
    """The fields a free-text chat call sends besides model and messages."""
    body = body_of(dialect, **params)
    return {k: v for k, v in body.items() if k not in ("model", "messages")}


def call(output_type: Any = str, endpoint: Any = "chat", **params: Any) -> _call.Call:
    return make_core().prepare("create", "Q", output_type, endpoint, params)


# -- clients over sockets --------------------------------------------------------------------


def answered(
    call: _call.Call, body: bytes, headers: dict[str, str] | None = None
) -> lmclient.Response[Any, Any]:
    """The `Response` a call's 200 ``body`` finishes with (`Call.finish`), where no re-ask nor
    continuation may follow it (a `Next` fails the test)."""
    outcome = call.finish(200, headers or {}, body)
    assert not isinstance(outcome, _call.Next), outcome
    return outcome


def checked_out(client: lmclient.Client | lmclient.AsyncClient) -> int:
    """Connections handed to a request or stream and not yet given back (or closed)."""
    return len(client._transport._pool.in_use)


def retries_logged(caplog: pytest.LogCaptureFixture) -> int:
    return sum(r.getMessage().startswith("retry ") for r in caplog.records)


def gated_fake(value: Any) -> tuple[FakeLLM, threading.Event]:
    """A fake that streams ``value`` in 8-byte chunks and holds its last chunk until the
    returned gate is set (a client that never sets it fails the server's wait)."""
    gate = threading.Event()
    text = msgspec.json.encode(value).decode()
    last = len(text) // 8 + 3 - 1  # role chunk, content chunks, finish chunk: the last's index

    def pace(index: int) -> None:
        if index >= last:
            assert gate.wait(10), "the client never released the gate"

    fake = FakeLLM(on_chunk=pace)
    fake.reply(text, chunk_size=8)
    return fake, gate


def script_retry_then_reask(fake: FakeLLM) -> None:
    """One 503 (retried at once), then an invalid answer (re-asked), then a valid one."""
    fake.fail(503, retry_after=0)
    fake.reply_sequence(["ANSWER-TEXT-BAD", "7"])


# -- OpenTelemetry's in-memory exporter ------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def forget_opentelemetry() -> Iterator[None]:
    """Imported by a module that traces (so it runs there, after the module): the other
    modules' clients, whose tracing is automatic, must keep running untraced as in an
    application without OpenTelemetry."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith("opentelemetry") or name == "lmclient._otel":
            del sys.modules[name]
    vars(lmclient).pop("_otel", None)  # the package's attribute too: a new import is anew


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    return traced(monkeypatch)


def traced(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    """lmclient's tracer, on a provider of this test's own (no global state)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from lmclient import _otel

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(_otel, "_tracer", provider.get_tracer("lmclient"))
    return exporter


def only(exporter: InMemorySpanExporter) -> ReadableSpan:
    finished = exporter.get_finished_spans()
    assert len(finished) == 1, [s.name for s in finished]
    return finished[0]


# -- the work of the array splitter -----------------------------------------------------------


class SplitterWork:
    """What the array splitter's regex searches cost: how many, the characters they pass over,
    and the characters of each string they search, counted once per string: the text the
    splitter built to search, which is where copying the text received so far shows."""

    def __init__(self) -> None:
        self.searches = 0
        self.scanned = 0
        self.held = 0
        self.last: str | None = None  # kept, so that no later string reuses its id

    def counting(self, pattern: re.Pattern[str]) -> Callable[[str, int], re.Match[str] | None]:
        def search(text: str, pos: int) -> re.Match[str] | None:
            m = pattern.search(text, pos)
            self.searches += 1
            self.scanned += (len(text) if m is None else m.end()) - pos
            if text is not self.last:
                self.held += len(text)
                self.last = text
            return m

        return search


@contextlib.contextmanager
def counted_splits() -> Iterator[SplitterWork]:
    """Every regex search `ArrayItems` (the splitter behind `Stream.items()`) makes."""
    work = SplitterWork()
    with pytest.MonkeyPatch.context() as mp:
        for name in ("_IN_STRING", "_OUTSIDE"):
            pattern = getattr(_sse, name)
            mp.setattr(_sse, name, types.SimpleNamespace(search=work.counting(pattern)))
        yield work


# 22 one-word options: more tokens at their first position than the 20 most likely alternatives
# a server lists (`probabilities=True` with vLLM's ``logprob_token_ids``)
_ANIMALS = (
    "ant bee cat dog eel fox gnu hen ibis jay kiwi lark mole newt owl pig rat seal toad yak wolf"
    " zebu"
)
ANIMALS = lmclient.Choice(_ANIMALS.split(" "))
