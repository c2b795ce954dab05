"""Dialects without sockets: every output kind × every dialect × both endpoints, exactly."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, Literal

import msgspec
import pytest

import lmclient
from lmclient._dialects import DIALECTS, get_dialect, llamacpp_schema, strict_schema
from lmclient._output.types import compile_output
from lmclient._plans import Plans
from lmclient.testing import FakeLLM
from tests.helpers import make_core
from tests.kinds import COMPACT_PLACES, KINDS, Kind, compact_text, expected_fields, reply_text


@pytest.mark.parametrize("compact", [True, False], ids=["compact", "server-whitespace"])
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize("dialect", list(DIALECTS))
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.id)
def test_fields_and_decoding(kind: Kind, dialect: str, endpoint: Any, compact: bool) -> None:
    spec = compile_output(kind.output_type)
    try:
        fields = expected_fields(kind, dialect, endpoint, compact=compact)
    except lmclient.UnsupportedConstraintError:
        with pytest.raises(lmclient.UnsupportedConstraintError):
            get_dialect(dialect).plan(spec, endpoint, compact=compact)
        return
    plan = get_dialect(dialect).plan(spec, endpoint, compact=compact)
    assert plan.fields == fields
    assert plan.compact == (
        compact and dialect in COMPACT_PLACES and compact_text(kind) is not None
    )
    assert plan.decode(reply_text(kind, dialect, endpoint, compact=compact)) == kind.value


def test_plans_are_cached_per_type_dialect_and_endpoint() -> None:
    plans = Plans(compact=True, runaway=None)
    vllm, openai = get_dialect("vllm"), get_dialect("openai")
    first = plans.get(int, "chat", vllm, None)
    assert plans.get(int, "chat", vllm, None) is first
    assert first.spec is compile_output(int)
    assert plans.get(int, "completions", vllm, None) is not first
    assert plans.get(int, "chat", openai, None) is not first
    # Any other type than a class by its spec: equal Literals with their options in another
    # order are another constraint, and another plan.
    ab = plans.get(Literal["a", "b"], "chat", vllm, None)
    assert plans.get(Literal["a", "b"], "chat", vllm, None) is ab
    ba = plans.get(Literal["b", "a"], "chat", vllm, None)
    assert ba is not ab
    assert ba.plan.fields != ab.plan.fields
    assert plans.get(list[int], "chat", vllm, None) is plans.get(list[int], "chat", vllm, None)


def test_unsupported_grammar_names_the_dialects_that_can() -> None:
    with pytest.raises(
        lmclient.UnsupportedConstraintError, match="vllm, vllm-guided, sglang, llamacpp"
    ):
        get_dialect("generic").plan(compile_output(lmclient.Grammar('root ::= "a"')), "chat")
    with pytest.raises(
        lmclient.UnsupportedConstraintError, match=r"dialect= values that can: vllm, vllm-guided$"
    ):
        get_dialect("llamacpp").plan(
            compile_output(lmclient.Grammar("start: 'a'", syntax="lark")), "chat"
        )


def test_unknown_dialect() -> None:
    with pytest.raises(ValueError, match="unknown dialect 'vlm'"):
        lmclient.Client("http://h/v1", model="m", dialect="vlm")


def test_strict_schema_rules() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "default": 1},
            "b": {
                "type": "array",
                "items": {"type": "object", "properties": {"c": {"type": "string"}}},
            },
        },
        "required": ["b"],
    }
    assert strict_schema(schema) == {
        "type": "object",
        "properties": {
            "a": {"type": "integer"},
            "b": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"c": {"type": "string"}},
                    "required": ["c"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    with pytest.raises(lmclient.UnsupportedConstraintError):
        strict_schema({"type": "object"})


def test_llamacpp_gets_every_schema_pattern_anchored() -> None:
    fill = r'[^"\\]'
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "pattern": "a", "maxLength": 4},  # a field so named
            "enum": {"anyOf": [{"$ref": "#/$defs/Code"}, {"type": "null"}]},
            "kept": {"enum": [{"pattern": "x"}], "const": {"pattern": "x"}},  # data, not schema
        },
        "$defs": {"Code": {"type": "string", "pattern": "^[A-Z]{2}"}},
        "default": {"pattern": "x"},
    }
    assert llamacpp_schema(schema) == {
        **schema,
        "properties": {
            "pattern": {
                "type": "string",
                "pattern": f"^{fill}{{0,4}}(a){fill}{{0,4}}$",
                "maxLength": 4,
            },
            "enum": schema["properties"]["enum"],
            "kept": schema["properties"]["kept"],
        },
        "$defs": {"Code": {"type": "string", "pattern": f"^([A-Z]{{2}}){fill}*$"}},
    }


def test_llamacpp_plan_sends_a_structs_search_pattern_anchored() -> None:
    class Code(msgspec.Struct):
        code: Annotated[str, msgspec.Meta(pattern="[0-9]{3}")]

    spec = compile_output(Code)
    for endpoint in ("chat", "completions"):
        sent = get_dialect("llamacpp").plan(spec, endpoint, compact=False).fields["json_schema"]
        assert sent["properties"]["code"]["pattern"] == r'^[^"\\]*([0-9]{3})[^"\\]*$'
    assert spec.schema is not None and "^" not in json.dumps(spec.schema)  # other dialects


def test_readme_capability_matrix_matches_the_dialect_tables() -> None:
    from scripts.capabilities import matrix, readme_matrix

    assert readme_matrix() == matrix().strip(), "run: python scripts/capabilities.py --write"


@pytest.mark.parametrize(
    ("dialect", "endpoint", "field"),
    [
        ("vllm", "chat", "guided_json"),
        ("vllm", "completions", "guided_choice"),
        ("vllm-guided", "chat", "structured_outputs"),
        ("llamacpp", "completions", "response_format"),
        ("llamacpp", "chat", "guided_regex"),
        ("sglang", "chat", "structured_outputs"),
        ("tgi", "completions", "response_format"),
        ("ollama", "chat", "top_k"),
        ("ollama", "chat", "min_p"),
    ],
)
def test_extra_body_fields_a_server_ignores_are_refused(
    dialect: str, endpoint: Any, field: str
) -> None:
    route_free = lmclient.Client("http://h/v1", model="m", dialect=dialect)
    with pytest.raises(ValueError, match=f"{field!r} is silently ignored"):
        route_free.create("Q", endpoint=endpoint, extra_body={field: 1})
    with pytest.raises(ValueError, match="silently ignored"):
        lmclient.Client(
            "http://h/v1", model="m", dialect=dialect, defaults={"extra_body": {field: 1}}
        ).create("Q", endpoint=endpoint)


@pytest.mark.parametrize(
    ("dialect", "field"),
    [
        ("vllm", "top_k"),
        ("llamacpp", "top_k"),
        ("ollama", "seed"),
        ("generic", "anything"),
        ("llamacpp", "n_probs"),
    ],
)
def test_extra_body_fields_a_server_reads_pass(dialect: str, field: str) -> None:
    core = make_core(dialect=dialect)
    call = core.prepare("create", "Q", str, "chat", {"extra_body": {field: 1}})
    assert json.loads(call.request.body or b"")[field] == 1


class Person(msgspec.Struct):
    name: str


DISABLE_ANY_WHITESPACE = {"structured_outputs": {"disable_any_whitespace": True}}
NESTED = "structured_outputs.disable_any_whitespace"


@pytest.mark.parametrize(
    ("endpoint", "extra", "field", "why"),
    [
        ("chat", DISABLE_ANY_WHITESPACE, NESTED, "--structured-outputs-config"),
        ("completions", DISABLE_ANY_WHITESPACE, NESTED, "--structured-outputs-config"),
        ("chat", {"user": "u-1"}, "user", "marks it as ignored"),
    ],
)
def test_vllm_refuses_what_it_accepts_and_ignores(
    endpoint: Any, extra: dict[str, Any], field: str, why: str
) -> None:
    """vLLM 0.32 reads disable_any_whitespace from its own configuration only, and never reads
    the chat `user`: refused before anything is sent, beside lmclient's own structured_outputs
    too, whether given per call or as a default."""
    fake = FakeLLM(server="vllm")
    with fake.serve() as url:
        per_call = lmclient.Client(url, model="fake-model", dialect="vllm")
        default = lmclient.Client(
            url, model="fake-model", dialect="vllm", defaults={"extra_body": extra}
        )
        calls: list[Callable[[], object]] = [
            lambda: per_call.create("Q", Person, endpoint=endpoint, extra_body=extra),
            lambda: default.create("Q", Person, endpoint=endpoint),
        ]
        for call in calls:
            with pytest.raises(ValueError) as caught:
                call()
            assert f"{field!r} is silently ignored by vllm servers" in str(caught.value)
            assert why in str(caught.value)
        per_call.close()
        default.close()
    assert fake.calls == []


def test_the_vllm_refusal_names_the_server_setting() -> None:
    with pytest.raises(ValueError) as caught:
        get_dialect("vllm").check_extra(DISABLE_ANY_WHITESPACE, "chat")
    config = '{"backend":"xgrammar","disable_any_whitespace":true}'
    assert f"--structured-outputs-config '{config}'" in str(caught.value)


def test_vllm_completions_user_passes() -> None:
    fake = FakeLLM(server="vllm")
    with fake.serve() as url, lmclient.Client(url, model="fake-model", dialect="vllm") as client:
        client.complete("Q", extra_body={"user": "u-1"})
    assert fake.last_request.body["user"] == "u-1"
