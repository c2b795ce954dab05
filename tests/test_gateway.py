"""The SGLang Model Gateway (sglang-router): detected from its recorded answers, spoken to in
its own dialect, and a constraint it drops reported as such, not as truncation; the recorded
answers (tests/fixtures/sglang-router/) with respx, and FakeLLM impersonating it over loopback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import msgspec
import pytest
import respx

import lmclient
from lmclient._dialects import PROBE_PATHS, detect, get_dialect
from lmclient._output.types import compile_output
from lmclient._unapplied import unapplied
from lmclient.testing import FakeLLM

RECORDED = Path(__file__).parent / "fixtures" / "sglang-router"


class Person(msgspec.Struct):
    name: str
    age: int


def _answers(backend: str) -> dict[str, Any]:
    """The probe answers the gateway gave, as the client collects them (200 JSON objects)."""
    found = {}
    for path in PROBE_PATHS:
        name = path.strip("/").replace("/", "_")
        recorded = RECORDED / f"{backend}.{name}.200.txt"
        if recorded.exists():
            found[path] = json.loads(recorded.read_bytes())
    return found


def _models(backend: str) -> list[str]:
    body = json.loads((RECORDED / f"{backend}.v1_models.200.txt").read_bytes())
    return [m["id"] for m in body["data"]]


def test_the_openai_backend_is_the_gateway_dialect() -> None:
    info = detect("127.0.0.1", _answers("openai"), _models("openai"))
    assert (info.kind, info.dialect, info.models) == (
        "sglang-gateway",
        "sglang-gateway",
        ["unknown"],
    )


def test_the_sglang_backend_forwards_sglang_fields_to_sglang_workers() -> None:
    info = detect("127.0.0.1", _answers("sglang"), _models("sglang"))
    assert (info.kind, info.dialect) == ("sglang-gateway", "sglang")


def test_an_sglang_server_is_not_taken_for_the_gateway() -> None:
    probes = {"/get_server_info": {"version": "0.4.4"}, "/get_model_info": {"model_path": "m"}}
    assert detect("127.0.0.1", probes, ["m"]).kind == "sglang"


def test_the_gateway_dialect_sends_strict_response_format_on_chat() -> None:
    plan = get_dialect("sglang-gateway").plan(compile_output(Person), "chat")
    rf = plan.fields["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["strict"] is True
    assert set(rf["json_schema"]["schema"]["required"]) == {"name", "age"}


@pytest.mark.parametrize(
    ("output_type", "endpoint", "said"),
    [
        (lmclient.Regex("[A-Z]{3}"), "chat", "cannot take a Regex"),
        (lmclient.Grammar('root ::= "a"'), "chat", "gbnf grammar"),
        (Person, "completions", "completions endpoint"),
    ],
)
def test_what_the_gateway_cannot_carry_is_refused_before_sending(
    output_type: Any, endpoint: Any, said: str
) -> None:
    fake = FakeLLM(server="sglang-gateway")
    with fake.serve() as url, lmclient.Client(url) as client:
        with pytest.raises(lmclient.UnsupportedConstraintError, match=said) as info:
            client.create("Q", output_type, endpoint=endpoint)
        assert client.dialect == "sglang-gateway"
    assert "sglang-router" in str(info.value) and "--backend sglang" in str(info.value)
    assert not [r for r in fake.requests if r.method == "POST"]


def test_the_default_client_through_a_fake_gateway() -> None:
    fake = FakeLLM(server="sglang-gateway")  # obeys response_format only, as the gateway
    with fake.serve() as url, lmclient.Client(url) as client:
        assert isinstance(client.generate("Q", Person), Person)
        assert client.generate("Q", Literal["yes", "no"]) in ("yes", "no")
        assert isinstance(client.generate("Q", int), int)
        assert client.server_info is not None and client.server_info.kind == "sglang-gateway"
    posts = [r for r in fake.requests if r.method == "POST"]
    assert all(set(r.body) & {"grammar", "json_schema", "regex"} == set() for r in posts)


def test_a_fake_sglang_backend_gateway_gets_sglang_fields() -> None:
    fake = FakeLLM(server="sglang-gateway-sglang")
    with fake.serve() as url, lmclient.Client(url) as client:
        assert client.generate("Q", lmclient.Regex("[A-Z]{3}")).isupper()
        assert client.dialect == "sglang"
    assert fake.requests[-1].body["regex"] == "[A-Z]{3}"


# -- a dropped constraint is not truncation ----------------------------------------------------


@pytest.mark.parametrize("name", ["person", "literal"])
def test_the_recorded_gateway_answer_says_the_constraint_was_dropped(name: str) -> None:
    """Regression: lmclient's llamacpp fields through sglang-router --backend openai came back as
    prose cut at max_tokens, and the error said "raise max_tokens"."""
    output_type: Any = {"person": Person, "literal": Literal["yes", "no"]}[name]
    sent = json.loads((RECORDED / f"openai.llamacpp_{name}.request.json").read_bytes())
    body = (RECORDED / f"openai.llamacpp_{name}.response.200.json").read_bytes()
    with (
        respx.mock(base_url="http://gateway.test") as mock,
        lmclient.Client("http://gateway.test/v1", dialect="llamacpp", model="m") as client,
        pytest.raises(lmclient.ConstraintIgnoredError) as info,
    ):
        mock.post("/v1/chat/completions").respond(200, content=body)
        client.generate("Who?", output_type, max_tokens=sent["max_tokens"])
    exc = info.value
    assert not isinstance(exc, lmclient.TruncatedError)
    assert exc.fields == ["grammar"] and exc.dialect == "llamacpp"
    assert "raise max_tokens" not in str(exc) and "dialect=" in str(exc)
    assert exc.text.startswith("Sure!") and exc.usage is not None


@pytest.mark.parametrize("finish", ["length", "stop"])
def test_a_fake_gateway_that_drops_the_grammar(finish: str) -> None:
    fake = FakeLLM(server="sglang-gateway", default_text="Sure! Here is a person: Ann, 30.")
    if finish == "length":
        request: dict[str, Any] = {"max_tokens": 4}
    else:
        request = {}
    with fake.serve() as url, lmclient.Client(url, dialect="llamacpp") as client:
        with pytest.raises(lmclient.ConstraintIgnoredError, match="ignored the constraint"):
            client.generate("Who?", Person, **request)
        with pytest.raises(lmclient.ConstraintIgnoredError, match="none of the options"):
            client.generate("Yes?", Literal["yes", "no"], **request)
    assert "grammar" in fake.requests[-1].body  # sent, and ignored by the "gateway"


def test_a_streamed_answer_that_ignores_the_constraint() -> None:
    fake = FakeLLM(server="sglang-gateway", default_text="Sure! Here is a person: Ann, 30.")
    with (
        fake.serve() as url,
        lmclient.Client(url, dialect="llamacpp") as client,
        pytest.raises(lmclient.ConstraintIgnoredError),
        client.stream("Q", Person) as s,
    ):
        s.read()


@pytest.mark.parametrize(
    ("output_type", "dialect", "text"),
    [
        (Person, "llamacpp", '{"na'),
        (Person, "generic", '  \n{"name"'),
        (Person, "openai", "{"),
        (list[int], "llamacpp", "[1"),
        (int, "llamacpp", "-"),
        (int, "generic", "12"),
        (bool, "vllm", "t"),
        (float, "sglang", "0."),
        (Literal["yes", "no"], "llamacpp", "ye"),
        (Literal["yes", "no"], "generic", '"n'),
        (Literal["yes", "no"], "vllm", "yes "),
        (Any, "generic", "null"),
        (lmclient.Regex("[A-Z]+"), "sglang", "anything"),  # a Regex's starts are not worked out
        (lmclient.Grammar('root ::= "a"'), "llamacpp", "b"),
        (str, "generic", "prose"),
    ],
)
def test_a_text_that_may_still_be_valid_is_never_called_unapplied(
    output_type: Any, dialect: str, text: str
) -> None:
    spec = compile_output(output_type)
    assert unapplied(spec, get_dialect(dialect).plan(spec, "chat"), text) is None


@pytest.mark.parametrize(
    ("output_type", "dialect", "text"),
    [
        (Person, "llamacpp", "Sure"),
        (Person, "generic", "```json\n{"),
        (Person, "openai", '"a"'),
        (list[int], "vllm", "{"),
        (int, "llamacpp", "forty"),
        (bool, "generic", "Yes"),
        (Literal["yes", "no"], "llamacpp", "Yes"),
        (Literal["yes", "no"], "generic", '"maybe"'),
        (lmclient.Choice(["alpha", "beta"]), "sglang", "gamma"),
        (Any, "generic", "Sure"),
    ],
)
def test_a_text_the_constraint_rules_out_is_called_unapplied(
    output_type: Any, dialect: str, text: str
) -> None:
    spec = compile_output(output_type)
    why = unapplied(spec, get_dialect(dialect).plan(spec, "chat"), text)
    assert why is not None and text not in why  # the answer is the error's, not its detail
