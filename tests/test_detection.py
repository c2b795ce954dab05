"""`dialect="auto"`: the pure decision from probe answers, and both clients probing a real
loopback server that impersonates each kind of server."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest

import lmclient
from lmclient._dialects import PROBE_PATHS, ServerInfo, detect
from lmclient._servers import release
from lmclient.testing import FakeLLM
from tests.helpers import LLAMACPP_LIVE

LLAMACPP_PROPS = json.loads((LLAMACPP_LIVE / "props.response.json").read_text())

# What each server kind answers on its probe path (the parts lmclient reads).
SERVERS: dict[str, tuple[dict[str, Any], str, str | None]] = {
    "vllm": ({"/version": {"version": "0.33.0"}}, "vllm", "0.33.0"),
    "vllm-0.10.2": ({"/version": {"version": "0.10.2"}}, "vllm", "0.10.2"),
    "vllm-old": ({"/version": {"version": "0.10.1.1"}}, "vllm-guided", "0.10.1.1"),
    "vllm-0.6": ({"/version": {"version": "0.6.3.post1"}}, "vllm-guided", "0.6.3.post1"),
    "sglang": (
        {
            "/server_info": {"version": "0.5.23", "model_path": "m"},
            "/version": {"version": "0.5.23"},
        },
        "sglang",
        "0.5.23",
    ),
    "sglang-old": ({"/get_server_info": {"version": "0.4.4"}}, "sglang", "0.4.4"),
    "llamacpp": ({"/props": LLAMACPP_PROPS}, "llamacpp", LLAMACPP_PROPS.get("build_info")),
    "tgi": ({"/info": {"model_id": "google/gemma-3-4b-it", "version": "3.3.6"}}, "tgi", "3.3.6"),
    "ollama": ({"/api/version": {"version": "0.33.0"}}, "ollama", "0.33.0"),
    "none": ({}, "generic", None),
}


@pytest.mark.parametrize("name", list(SERVERS))
def test_detect_picks_the_dialect(name: str) -> None:
    probes, dialect, version = SERVERS[name]
    info = detect("127.0.0.1", probes, ["m"])
    assert (info.dialect, info.version, info.models) == (dialect, version, ["m"])
    assert info.kind == ("unknown" if name == "none" else name.split("-")[0])


def test_openai_is_known_by_host() -> None:
    assert detect("api.openai.com", {}, []) == ServerInfo("openai", "openai", None, [])


@pytest.mark.parametrize(
    ("version", "number"),
    [("0.10.1.1", (0, 10, 1, 1)), ("0.11.0rc1", (0, 11, 0)), ("1.0", (1, 0)), ("dev", ())],
)
def test_release_parsing(version: str, number: tuple[int, ...]) -> None:
    assert release(version) == number


def impersonate(name: str) -> FakeLLM:
    fake = FakeLLM(server="generic")  # the probe answers come from SERVERS
    for path, body in SERVERS[name][0].items():
        fake.add_route("GET", path, body)
    return fake


def _choice_fields(body: dict[str, Any]) -> dict[str, Any]:
    """The constraint's fields: not model and messages, nor the rid a call to SGLang carries for
    its abort (tests/client/test_abort.py)."""
    return {k: v for k, v in body.items() if k not in ("model", "messages", "rid")}


EXPECTED_CHOICE = {
    # Where the server is held to the exact options, the budget goes too: len("yes") + 1.
    "vllm": {"structured_outputs": {"choice": ["yes", "no"]}, "max_tokens": 4},
    "vllm-guided": {"guided_choice": ["yes", "no"], "max_tokens": 4},
    "sglang": {"regex": "(?:yes|no)", "max_tokens": 4},
    "llamacpp": {"grammar": 'root ::= "yes" | "no"', "max_tokens": 4},
    "tgi": {"response_format": {"type": "regex", "value": "(?:yes|no)"}, "max_tokens": 4},
    "ollama": {  # JSON mode's whitespace bounds nothing: read as a stream, watched for runaways
        "stream": True,
        "stream_options": {"include_usage": True},
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "choice", "schema": {"type": "string", "enum": ["yes", "no"]}},
        },
    },
}
EXPECTED_CHOICE["generic"] = EXPECTED_CHOICE["ollama"]


def _reply_for(dialect: str) -> str:
    return '"yes"' if dialect in ("generic", "ollama") else "yes"


@pytest.mark.parametrize("name", list(SERVERS))
def test_sync_client_detects_once_and_uses_the_dialect(name: str) -> None:
    fake = impersonate(name)
    dialect = SERVERS[name][1]
    fake.reply(_reply_for(dialect))
    with fake.serve() as url, lmclient.Client(url) as client:
        assert client.dialect == "auto"
        assert client.generate("Q", Literal["yes", "no"]) == "yes"
        assert client.generate("Q", Literal["yes", "no"]) == "yes"
        assert client.dialect == dialect
        assert client.server_info is not None and client.server_info.models == ["fake-model"]
        assert client.model == "fake-model"
    probes = [r for r in fake.requests if r.method == "GET"]
    assert len(probes) == len(PROBE_PATHS) + 1  # the probe paths and the model list, once
    chats = [r for r in fake.requests if r.endpoint == "chat"]
    assert [_choice_fields(r.body) for r in chats] == [EXPECTED_CHOICE[dialect]] * 2


@pytest.mark.parametrize("name", ["vllm", "llamacpp", "none"])
async def test_async_client_detects_once(name: str) -> None:
    fake = impersonate(name)
    dialect = SERVERS[name][1]
    fake.reply(_reply_for(dialect))
    with fake.serve() as url:
        async with lmclient.AsyncClient(url) as client:
            import asyncio

            values = await asyncio.gather(
                *(client.generate("Q", Literal["yes", "no"]) for _ in range(8))
            )
            assert values == ["yes"] * 8
            assert client.dialect == dialect
    assert len([r for r in fake.requests if r.method == "GET"]) == len(PROBE_PATHS) + 1


def test_grammar_on_an_unknown_server_names_the_dialects_that_work() -> None:
    fake = impersonate("none")
    with (
        fake.serve() as url,
        lmclient.Client(url) as client,
        pytest.raises(lmclient.UnsupportedConstraintError, match="dialect= values that can"),
    ):
        client.generate("Q", lmclient.Grammar('root ::= "a"'))
    assert not [r for r in fake.requests if r.endpoint == "chat"]


def test_failing_probes_never_fail_the_call() -> None:
    fake = impersonate("llamacpp")
    fake.add_route("GET", "/version", "<html>oops</html>", status=500)
    fake.add_route("GET", "/info", "not json")
    fake.reply("yes")
    with fake.serve() as url, lmclient.Client(url) as client:
        assert client.generate("Q", Literal["yes", "no"]) == "yes"
        assert client.dialect == "llamacpp"


@pytest.mark.parametrize(
    "kind", ["vllm", "vllm-guided", "sglang", "llamacpp", "tgi", "ollama", "generic"]
)
def test_fake_impersonates_each_server_kind(kind: str) -> None:
    fake = FakeLLM(server=kind)  # no script: replies are generated from each constraint
    with fake.serve() as url, lmclient.Client(url) as client:
        assert client.generate("Q", Literal["yes", "no"]) in ("yes", "no")
        assert client.dialect == kind


def test_bad_input_raises_before_any_probe() -> None:
    fake = FakeLLM()
    with fake.serve() as url, lmclient.Client(url) as client:
        with pytest.raises(TypeError):
            client.generate("Q", temprature=1)  # type: ignore[call-overload]
        with pytest.raises(TypeError):
            client.stream("Q", object)
    assert fake.requests == []


def test_unreachable_server_fails_the_call_and_learns_nothing() -> None:
    with FakeLLM().serve() as url:
        pass  # the server is gone: its port refuses connections
    with lmclient.Client(url, max_retries=0) as client:
        with pytest.raises(lmclient.APIConnectionError):
            client.generate("Q")
        assert client.dialect == "auto" and client.server_info is None


def test_explicit_dialect_sends_no_probe() -> None:
    fake = FakeLLM()
    fake.reply("yes")
    with fake.serve() as url, lmclient.Client(url, model="fake-model", dialect="vllm") as client:
        client.generate("Q", Literal["yes", "no"])
    assert [r.endpoint for r in fake.requests] == ["chat"]


def test_probe_is_public_and_keeps_an_explicit_dialect() -> None:
    fake = impersonate("llamacpp")
    with fake.serve() as url:
        with lmclient.Client(url, dialect="vllm") as client:
            info = client.probe()
            assert (info.kind, info.dialect, client.dialect) == ("llamacpp", "llamacpp", "vllm")
            assert client.probe() is info  # asked once
            assert client.model == "fake-model"
        with lmclient.Client(url) as client:
            assert client.probe().dialect == client.dialect == "llamacpp"
    assert len([r for r in fake.requests if r.method == "GET"]) == 2 * (len(PROBE_PATHS) + 1)


async def test_async_probe() -> None:
    fake = impersonate("tgi")
    with fake.serve() as url:
        async with lmclient.AsyncClient(url) as client:
            info = await client.probe()
    assert (info.kind, info.version) == ("tgi", "3.3.6")


# -- a dialect forced on a release of its server that ignores its fields ------------------------


def test_vllm_guided_forced_on_a_vllm_that_ignores_guided_fields_is_refused() -> None:
    """vLLM >= 0.12 answers guided_* with 200 and leaves the output unconstrained: refused once
    its /version is known, before any such field is sent; what it reads still works."""
    fake = FakeLLM(server="vllm")  # vLLM 0.33
    with (
        fake.serve() as url,
        lmclient.Client(url, model="fake-model", dialect="vllm-guided") as client,
    ):
        with pytest.raises(lmclient.UnsupportedConstraintError) as caught:
            client.generate("Q", Literal["yes", "no"])
        assert client.generate("Q") == fake.default_text  # no constraint: no guided field
        with pytest.raises(lmclient.UnsupportedConstraintError, match="guided_grammar"):
            client.generate("Q", Any)  # the compact grammar would go as guided_grammar
        assert client.dialect == "vllm-guided"
    assert str(caught.value) == (
        "dialect 'vllm-guided' sends guided_choice, which vllm 0.33.0 accepts and ignores (the "
        "output would be unconstrained); use dialect='vllm' or 'auto'"
    )
    assert [c.body.get("guided_choice") for c in fake.calls] == [None]  # only the text call
    assert len([r for r in fake.requests if r.method == "GET"]) == 2  # once: /v1/models, /version
    with (
        fake.serve() as url,
        lmclient.Client(url, model="fake-model", dialect="vllm-guided", whitespace="server") as c,
    ):
        any_json: object = c.generate("Q", Any)
        assert any_json == {}  # response_format json_object: read


async def test_async_client_refuses_the_forced_dialect_too() -> None:
    fake = FakeLLM(server="vllm")
    with fake.serve() as url:
        async with lmclient.AsyncClient(url, model="fake-model", dialect="vllm-guided") as client:
            with pytest.raises(lmclient.UnsupportedConstraintError, match=r"vllm 0\.33\.0"):
                await client.generate("Q", Literal["yes", "no"])
    assert fake.calls == []


@pytest.mark.parametrize("server", ["vllm-guided", None])  # vLLM 0.10.1 and 0.11 read guided_*
def test_vllm_guided_forced_on_a_vllm_that_reads_it_is_sent(server: str | None) -> None:
    fake = FakeLLM(server=server)
    with (
        fake.serve() as url,
        lmclient.Client(url, model="fake-model", dialect="vllm-guided") as client,
    ):
        assert client.generate("Q", Literal["yes", "no"]) in ("yes", "no")
    assert fake.calls[0].body["guided_choice"] == ["yes", "no"]


CAVEAT = (
    "likely cause: vllm 0.12 and later accept the guided_* fields of dialect 'vllm-guided' and "
    "ignore them, leaving the output unconstrained, and this server did not say its version; "
    "if it is one, use dialect='vllm'"
)


def test_an_invalid_answer_names_the_ignored_fields_when_the_version_is_unknown() -> None:
    """A server that does not say what it is may be a vLLM that ignored guided_*: the error of
    an answer that does not validate, or that ran to max_tokens, says so."""
    fake = FakeLLM(server="generic")
    fake.reply("It is sunny today.", times=1)
    fake.reply('{"name": "It is sunny and', finish_reason="length", times=1)
    with (
        fake.serve() as url,
        lmclient.Client(url, model="fake-model", dialect="vllm-guided") as client,
    ):
        with pytest.raises(lmclient.ValidationError) as invalid:
            client.generate("Q", Literal["yes", "no"], max_tokens=64)
        with pytest.raises(lmclient.TruncatedError) as cut:
            client.generate("Q", dict[str, str])
    assert str(invalid.value).endswith(f"got 'It is sunny today.'; {CAVEAT}")
    assert str(cut.value).endswith(
        f"""raise max_tokens; got '{{"name": "It is sunny and'; {CAVEAT}"""
    )


def test_no_caveat_when_the_version_says_the_fields_are_read() -> None:
    fake = FakeLLM(server="vllm-guided")
    fake.reply("It is sunny today.")
    with (
        fake.serve() as url,
        lmclient.Client(url, model="fake-model", dialect="vllm-guided") as client,
        pytest.raises(lmclient.ValidationError) as caught,
    ):
        client.generate("Q", Literal["yes", "no"])
    assert "likely cause" not in str(caught.value)


# -- what detection costs: the model list first, then only the probes it leaves open ------------

# The requests of detection per server (the model list, then its probes), over real sockets.
COST = {"vllm": 2, "vllm-guided": 2, "sglang": 3, "llamacpp": 2, "tgi": 8, "ollama": 8}


@pytest.mark.parametrize("kind", list(COST))
def test_detection_asks_only_the_probes_the_model_list_leaves_open(kind: str) -> None:
    fake = FakeLLM(server=kind)
    with fake.serve() as url, lmclient.Client(url) as client:
        client.generate("Q")
        assert client.dialect == kind
    gets = [r.path for r in fake.requests if r.method == "GET"]
    assert gets[0] == "/v1/models" and len(gets) == COST[kind]


async def test_async_detection_asks_only_the_probes_the_model_list_leaves_open() -> None:
    fake = FakeLLM(server="llamacpp")
    with fake.serve() as url:
        async with lmclient.AsyncClient(url) as client:
            await client.generate("Q")
            assert client.dialect == "llamacpp"
    assert [r.path for r in fake.requests if r.method == "GET"] == ["/v1/models", "/props"]
