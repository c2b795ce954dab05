"""Dialects without sockets: every output kind × every dialect × both endpoints, exactly."""

from __future__ import annotations

from typing import Any

import pytest

import lmclient
from lmclient.dialects import DIALECTS, get_dialect, strict_schema
from lmclient.types import compile_output
from tests.kinds import KINDS, Kind, expected_fields, reply_text


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize("dialect", list(DIALECTS))
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.id)
def test_fields_and_decoding(kind: Kind, dialect: str, endpoint: Any) -> None:
    spec = compile_output(kind.output_type)
    try:
        fields = expected_fields(kind, dialect, endpoint)
    except lmclient.UnsupportedConstraintError:
        with pytest.raises(lmclient.UnsupportedConstraintError):
            get_dialect(dialect).plan(spec, endpoint)
        return
    plan = get_dialect(dialect).plan(spec, endpoint)
    assert plan.fields == fields
    assert plan.decode(reply_text(kind, dialect, endpoint)) == kind.value


def test_plans_are_cached_per_type_dialect_and_endpoint() -> None:
    spec = compile_output(int)
    vllm = get_dialect("vllm")
    assert vllm.plan(spec, "chat") is vllm.plan(spec, "chat")
    assert vllm.plan(spec, "chat") is not get_dialect("openai").plan(spec, "chat")


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


def test_readme_capability_matrix_matches_the_dialect_tables() -> None:
    from scripts.capabilities import matrix, readme_matrix

    assert readme_matrix() == matrix().strip(), "run: python scripts/capabilities.py --write"
