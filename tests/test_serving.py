"""Serving fields: per dialect, the exact body fields and headers each of ``request_id``,
``priority``, ``cache_salt``, ``traceparent``/``tracestate`` sends, and the refusals where a
server would ignore one; the checks of their values; per-call ``model`` and ``headers``; the
header lists the transports cache their heads by; ``defaults=``; over real sockets, sync and
async."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

import lmclient
from lmclient import _core
from lmclient._dialects import DIALECTS, ServerInfo
from lmclient._serving import SERVING, TABLED
from lmclient.testing import FakeLLM
from tests.helpers import without_made_rid

TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
STATE = "congo=t61rcWkgMzE"

# Written out, not computed: each from the server's own request handling (see _serving.py).
# Per dialect and field: (body fields, headers) sent, or None where the field is refused.
EXPECTED: dict[str, dict[str, tuple[dict[str, Any], dict[str, str]] | None]] = {
    "vllm": {
        "request_id": ({}, {"x-request-id": "req-1"}),
        "priority": ({"priority": -3}, {}),
        "cache_salt": ({"cache_salt": "tenant-a"}, {}),
        "session_id": ({"session_id": "agent-7"}, {}),
    },
    "vllm-guided": {
        "request_id": ({}, {"x-request-id": "req-1"}),
        "priority": ({"priority": -3}, {}),
        "cache_salt": ({"cache_salt": "tenant-a"}, {}),
        "session_id": None,
    },
    "sglang": {
        "request_id": ({"rid": "req-1"}, {}),
        "priority": ({"priority": -3}, {}),
        "cache_salt": ({"cache_salt": "tenant-a"}, {}),
        "session_id": None,
    },
    **{
        name: {"request_id": None, "priority": None, "cache_salt": None, "session_id": None}
        for name in ("llamacpp", "tgi", "generic", "ollama", "lmstudio", "sglang-gateway", "openai")
    },
}
VALUES: dict[str, Any] = {
    "request_id": "req-1",
    "priority": -3,
    "cache_salt": "tenant-a",
    "session_id": "agent-7",
}


def make_core(dialect: str = "vllm", **kw: Any) -> _core.ClientCore:
    """A core whose bodies hold the serving fields only: the runaway watch's fields (vLLM's
    ``repetition_detection``, a stream elsewhere) are another subject (tests/kinds.py)."""
    return _core.ClientCore("http://h/v1", "m", dialect=dialect, **{"runaway": "off", **kw})


def prepared(
    core: _core.ClientCore, endpoint: Any = "chat", **params: Any
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The decoded body (without the ``rid`` lmclient makes on SGLang: `without_made_rid`)
    and the header list of one call."""
    call = core.prepare("create", "Q", str, endpoint, params)
    assert call.request.body is not None
    return without_made_rid(msgspec.json.decode(call.request.body), call), call.request.headers


def added(core: _core.ClientCore, headers: list[tuple[str, str]]) -> dict[str, str]:
    """The headers of a call that the client's own list does not have."""
    own = set(core.post_headers)
    return {k: v for k, v in headers if (k, v) not in own}


def test_every_dialect_has_a_row() -> None:
    assert set(EXPECTED) == set(DIALECTS) == set(SERVING)


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize("field", list(VALUES))
@pytest.mark.parametrize("dialect", list(EXPECTED))
def test_exact_fields_and_headers_per_dialect(dialect: str, field: str, endpoint: Any) -> None:
    core = make_core(dialect)
    expected = EXPECTED[dialect][field]
    if expected is None:
        with pytest.raises(lmclient.UnsupportedConstraintError, match=f"dialect '{dialect}'"):
            core.validate("generate", "Q", str, endpoint, {field: VALUES[field]})
        return
    body, headers = prepared(core, endpoint, **{field: VALUES[field]})
    fields, extra = expected
    key = "messages" if endpoint == "chat" else "prompt"
    assert {k: v for k, v in body.items() if k not in ("model", key)} == fields
    assert added(core, headers) == extra
    assert len(headers) == len(core.post_headers) + len(extra)  # none replaced, none doubled


@pytest.mark.parametrize("dialect", list(EXPECTED))
def test_trace_context_is_sent_as_headers_to_every_server(dialect: str) -> None:
    core = make_core(dialect)
    body, headers = prepared(core, traceparent=TRACE, tracestate=STATE)
    assert set(body) == {"model", "messages"}
    assert added(core, headers) == {"traceparent": TRACE, "tracestate": STATE}
    assert added(core, prepared(core, traceparent=TRACE)[1]) == {"traceparent": TRACE}


@pytest.mark.parametrize(
    ("version", "field", "refused"),
    [
        ("0.6.4", "request_id", True),  # the X-Request-Id header is the request's id from 0.6.5
        ("0.6.5", "request_id", False),
        ("0.6.2", "priority", True),
        ("0.6.3", "priority", False),
        ("0.8.5", "cache_salt", True),
        ("0.9.0", "cache_salt", False),
        (None, "cache_salt", False),  # the server did not say: the dialect was asked for
    ],
)
def test_releases_of_vllm_guided_that_ignore_a_field(
    version: str | None, field: str, refused: bool
) -> None:
    core = make_core("vllm-guided")
    core.server_info = ServerInfo("vllm", "vllm-guided", version)
    if refused:
        with pytest.raises(
            lmclient.UnsupportedConstraintError, match=re.escape(f"vllm {version} ignores")
        ):
            core.validate("generate", "Q", str, "chat", {field: VALUES[field]})
    else:
        body, headers = prepared(core, **{field: VALUES[field]})
        assert body.get("priority", body.get("cache_salt")) or added(core, headers)


def test_vllm_session_id_from_the_release_read() -> None:
    core = make_core("vllm")
    core.server_info = ServerInfo("vllm", "vllm", "0.31.1")
    with pytest.raises(lmclient.UnsupportedConstraintError, match=r"vllm 0\.31\.1 ignores"):
        core.validate("generate", "Q", str, "chat", {"session_id": "s"})
    core.server_info = ServerInfo("vllm", "vllm", "0.32.0")
    assert prepared(core, session_id="s")[0]["session_id"] == "s"


def test_sglang_cache_salt_from_the_release_read() -> None:
    core = make_core("sglang")
    core.server_info = ServerInfo("sglang", "sglang", "0.5.10")
    with pytest.raises(lmclient.UnsupportedConstraintError, match=r"sglang 0\.5\.10 ignores"):
        core.validate("generate", "Q", str, "chat", {"cache_salt": "s"})
    assert prepared(core, request_id="r", priority=1)[0]["rid"] == "r"  # the others: any release


@pytest.mark.parametrize(
    ("params", "error", "message"),
    [
        ({"traceparent": "00-abc-def-01"}, ValueError, "W3C traceparent"),
        ({"traceparent": TRACE.upper()}, ValueError, "lower case"),
        ({"traceparent": "00-" + "0" * 32 + "-00f067aa0ba902b7-01"}, ValueError, "all-zero"),
        (
            {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-" + "0" * 16 + "-01"},
            ValueError,
            "all-zero",
        ),
        ({"tracestate": STATE}, ValueError, "tracestate= needs traceparent="),
        ({"traceparent": 1}, TypeError, "traceparent must be str"),
        ({"request_id": ""}, ValueError, "must not be empty"),
        ({"request_id": "a\r\nX-Evil: 1"}, ValueError, "without control characters"),
        ({"priority": True}, TypeError, "priority must be int"),
        ({"priority": 2**63}, ValueError, "signed 64-bit"),
        ({"cache_salt": ""}, ValueError, "must not be empty"),
        ({"model": ""}, ValueError, "must not be empty"),
        ({"headers": "x"}, TypeError, "headers must be Mapping"),
        ({"headers": {"bad name": "v"}}, ValueError, "not an HTTP token"),
        ({"headers": {"X-A": "v\n"}}, ValueError, "control characters"),
        ({"headers": {"X-A": 1}}, ValueError, "must be a str"),
        ({"headers": {"Host": "evil"}}, ValueError, "set by lmclient"),
        ({"headers": {"Transfer-Encoding": "chunked"}}, ValueError, "set by lmclient"),
        ({"headers": {"Content-Type": "text/plain"}}, ValueError, "the body is JSON"),
        (
            {"headers": {"X-Request-Id": "a"}, "request_id": "b"},
            ValueError,
            "request_id= or the 'X-Request-Id' header, not both",
        ),
        (
            {"headers": {"TraceParent": TRACE}, "traceparent": TRACE},
            ValueError,
            "not both",
        ),
    ],
)
def test_bad_values_are_refused_before_anything_is_sent(
    params: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        make_core().validate("generate", "Q", str, "chat", params)
    if "request_id" in params:
        return  # not a parameter of defaults= (test_one_request_id_names_one_request)
    with pytest.raises(error, match=message):  # the same rules in defaults=
        make_core(defaults=params).prepare("generate", "Q", str, "chat", {})


def test_one_request_id_names_one_request() -> None:
    with pytest.raises(ValueError, match="request_id names one request"):
        make_core(defaults={"request_id": "r"})
    with pytest.raises(ValueError, match="request_id names one request"):
        make_core().batch("generate", ["a", "b"], str, "chat", {"request_id": "r"}, 2)
    fake = FakeLLM(server="sglang")
    with (
        fake.serve() as url,
        lmclient.Client(url, model="m", dialect="sglang") as client,
        pytest.raises(ValueError, match="request_id names one request"),
    ):
        client.generate_many(["a", "b"], request_id="r")
    assert fake.requests == []


def test_the_api_key_is_not_replaced_without_a_word() -> None:
    keyed = make_core(api_key="sk-client")
    with pytest.raises(ValueError, match="cannot replace the client's credentials") as info:
        keyed.validate("generate", "Q", str, "chat", {"headers": {"Authorization": "Bearer x"}})
    assert "sk-client" not in str(info.value)
    from_url = _core.ClientCore("http://u:p@h/v1", "m", dialect="vllm")
    with pytest.raises(ValueError, match="credentials"):
        from_url.validate("generate", "Q", str, "chat", {"headers": {"authorization": "x"}})
    keyless = make_core()  # a client without credentials: a call may bring its own
    _, headers = prepared(keyless, headers={"Authorization": "Bearer tenant-key"})
    assert ("authorization", "Bearer tenant-key") in headers


def test_call_headers_merge_over_the_clients() -> None:
    core = make_core(headers={"X-Team": "a", "X-Keep": "k"})
    _, headers = prepared(core, headers={"x-team": "b", "X-New": "n", "User-Agent": "app/1"})
    got = dict(headers)
    assert (got["x-team"], got["x-keep"], got["x-new"], got["user-agent"]) == (
        "b",
        "k",
        "n",
        "app/1",
    )
    assert len(headers) == len(got)  # each name once
    assert got["content-type"] == "application/json"


def test_the_usual_call_keeps_the_clients_one_header_list() -> None:
    core = make_core()
    assert core.prepare("generate", "Q", str, "chat", {}).request.headers is core.post_headers
    with_params = core.prepare("generate", "Q", str, "chat", {"priority": 1, "temperature": 0})
    assert with_params.request.headers is core.post_headers  # no header added: the same list


def test_call_header_lists_are_shared_per_set_and_bounded() -> None:
    core = make_core()
    first = prepared(core, headers={"X-Tenant": "a"})[1]
    assert prepared(core, headers={"X-Tenant": "a"})[1] is first  # one cached head per tenant
    assert prepared(core, headers={"X-Tenant": "b"})[1] is not first
    for number in range(500):  # a new request id on every call
        prepared(core, request_id=f"r{number}")
    assert len(core._header_lists) <= 64


def test_defaults_serving_fields_and_headers() -> None:
    core = make_core(
        defaults={"priority": 5, "cache_salt": "t", "headers": {"X-Tenant": "a"}, "model": "lora1"}
    )
    body = prepared(core)[0]
    assert (body["model"], body["priority"], body["cache_salt"]) == ("lora1", 5, "t")
    assert ("x-tenant", "a") in core.post_headers  # defaults' headers are the client's
    body, _ = prepared(core, priority=0, model="lora2")  # a call's own value wins
    assert (body["model"], body["priority"]) == ("lora2", 0)
    refused = make_core("llamacpp", defaults={"priority": 5})
    with pytest.raises(lmclient.UnsupportedConstraintError, match="'llamacpp'"):
        refused.prepare("generate", "Q", str, "chat", {})
    with pytest.raises(ValueError, match="not an HTTP token"):
        make_core(defaults={"headers": {"bad name": "v"}})


def test_per_call_model_leaves_the_usual_body_alone() -> None:
    core = make_core()
    assert prepared(core, model="adapter-1")[0]["model"] == "adapter-1"
    assert prepared(core)[0]["model"] == "m"
    stream = core.prepare("stream", "Q", str, "chat", {"model": "a2"}, reading="stream")
    assert msgspec.json.decode(stream.request.body or b"")["model"] == "a2"
    assert prepared(core)[0]["model"] == "m"


# -- over real sockets ----------------------------------------------------------------------


def test_serving_fields_over_sockets_sync() -> None:
    fake = FakeLLM(server="vllm")
    with fake.serve() as url, lmclient.Client(url, model="base", dialect="vllm") as client:
        client.generate(
            "Q",
            model="lora-a",
            headers={"X-Tenant": "t1"},
            request_id="req-9",
            priority=2,
            cache_salt="salt",
            traceparent=TRACE,
            tracestate=STATE,
        )
        with client.stream("Q", headers={"X-Tenant": "t2"}, request_id="req-10") as stream:
            stream.read()
        client.generate("Q")
    first, streamed, usual = fake.calls
    assert first.model == "lora-a"
    assert (first.body["priority"], first.body["cache_salt"]) == (2, "salt")
    assert {
        k: first.headers[k] for k in ("x-tenant", "x-request-id", "traceparent", "tracestate")
    } == {
        "x-tenant": "t1",
        "x-request-id": "req-9",
        "traceparent": TRACE,
        "tracestate": STATE,
    }
    assert (streamed.headers["x-tenant"], streamed.headers["x-request-id"]) == ("t2", "req-10")
    assert usual.model == "base"
    assert not {"x-tenant", "x-request-id", "traceparent"} & set(usual.headers)


async def test_serving_fields_over_sockets_async() -> None:
    fake = FakeLLM(server="sglang")
    with fake.serve() as url:
        async with lmclient.AsyncClient(url, model="base", dialect="sglang") as client:
            await client.generate(
                "Q", model="lora-b", headers={"X-Tenant": "t"}, request_id="r1", priority=4
            )
            async with client.stream("Q", request_id="r2", traceparent=TRACE) as stream:
                await stream.aread()
            await client.generate("Q")
    first, streamed, usual = fake.calls
    assert (first.model, first.body["rid"], first.body["priority"]) == ("lora-b", "r1", 4)
    assert first.headers["x-tenant"] == "t" and "x-request-id" not in first.headers
    assert (streamed.body["rid"], streamed.headers["traceparent"]) == ("r2", TRACE)
    assert usual.model == "base"
    assert re.fullmatch(r"[0-9a-f]{32}", usual.body["rid"])  # lmclient's own, for its abort
    assert len({first.body["rid"], streamed.body["rid"], usual.body["rid"]}) == 3


def test_per_call_model_needs_no_model_list() -> None:
    fake = FakeLLM(models=["a", "b"], server="vllm")
    with fake.serve() as url, lmclient.Client(url, dialect="vllm") as client:
        assert client.generate("Q", model="b") == fake.default_text
        assert [r.endpoint for r in fake.requests] == ["chat"]  # no GET /v1/models first
        assert client.model is None
        with pytest.raises(lmclient.LMClientError, match="serves 2: a, b"):
            client.generate("Q")  # no model named: the client's set-up needs one


async def test_per_call_model_with_detection_async() -> None:
    fake = FakeLLM(models=["a", "b"])  # two models: model=None alone could not pick one
    with fake.serve() as url:
        async with lmclient.AsyncClient(url) as client:
            assert await client.generate("Q", model="a") == fake.default_text
            assert client.dialect != "auto"  # the probes still ran
            assert fake.calls[0].model == "a"


def test_the_servers_page_shows_the_table() -> None:
    def cell(place: Any) -> str:
        if place is None:
            return "refused"
        text = f"header `{place.key}`" if place.header else f"`{place.key}`"
        return text + (f" ({'.'.join(map(str, place.since))} on)" if place.since else "")

    rows = [
        f"| `{dialect}` | " + " | ".join(cell(table.get(name)) for name in TABLED) + " |"
        for dialect, table in SERVING.items()
    ]
    page = (Path(__file__).parents[1] / "docs" / "servers.md").read_text()
    shown = page.split("<!-- serving:start -->\n")[1].split("<!-- serving:end -->")[0]
    assert shown.splitlines()[2:] == rows


@pytest.mark.parametrize("dialect", ["llamacpp", "tgi"])
def test_a_model_the_server_would_ignore_is_refused(dialect: str) -> None:
    core = make_core(dialect)
    core.server_info = ServerInfo(dialect, dialect, None, ["served"])
    with pytest.raises(lmclient.UnsupportedConstraintError, match="'other' is not served"):
        core.validate("generate", "Q", str, "chat", {"model": "other"})
    assert prepared(core, model="served")[0]["model"] == "served"
    vllm = make_core("vllm")  # vLLM answers an unknown name with 404: nothing is ignored
    vllm.server_info = ServerInfo("vllm", "vllm", "0.32.0", ["served"])
    assert prepared(vllm, model="adapter")[0]["model"] == "adapter"
