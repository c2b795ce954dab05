"""extra_body merges into the objects lmclient sends, at every depth, and may add options beside
the output type's constraint but never change it (a real vLLM answered 400 when a shallow merge
dropped the schema from ``structured_outputs``)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

import lmclient
from lmclient import _core


class Pet(msgspec.Struct):
    name: str
    age: int


PET_SCHEMA = {
    "title": "Pet",
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}


def body(
    dialect: str,
    output_type: Any,
    extra: dict[str, Any],
    *,
    stream: bool = False,
    whitespace: Any = "server",
) -> dict[str, Any]:
    """The body sent; by default with the server's whitespace, so that the schema is sent."""
    core = _core.ClientCore("http://h/v1", "m", dialect=dialect, whitespace=whitespace)
    call = core.prepare(
        "create",
        "Q",
        output_type,
        "chat",
        {"extra_body": extra},
        reading="stream" if stream else "call",
    )
    assert call.request.body is not None
    sent: dict[str, Any] = json.loads(call.request.body)
    return sent


def test_an_option_is_merged_beside_the_schema() -> None:
    sent = body("vllm", Pet, {"structured_outputs": {"disable_fallback": True}})
    assert sent["structured_outputs"] == {"json": PET_SCHEMA, "disable_fallback": True}


def test_merging_goes_to_any_depth() -> None:
    extra = {"response_format": {"json_schema": {"description": "A pet."}}}
    sent = body("generic", Pet, extra)
    assert sent["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Pet", "schema": PET_SCHEMA, "description": "A pet."},
    }


def test_lmclients_other_objects_are_merged_too() -> None:
    sent = body("vllm", str, {"stream_options": {"continuous_usage_stats": True}}, stream=True)
    assert sent["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}


def test_new_keys_and_objects_are_added_as_given() -> None:
    extra = {"chat_template_kwargs": {"enable_thinking": False}, "top_k": 20}
    sent = body("vllm", Pet, extra)
    assert sent["chat_template_kwargs"] == {"enable_thinking": False}
    assert sent["top_k"] == 20
    assert sent["structured_outputs"] == {"json": PET_SCHEMA}


def test_the_same_value_as_lmclients_is_no_change() -> None:
    sent = body("vllm", Pet, {"structured_outputs": {"json": PET_SCHEMA}})
    assert sent["structured_outputs"] == {"json": PET_SCHEMA}


def test_free_text_takes_any_constraint_from_extra_body() -> None:
    sent = body("vllm", str, {"structured_outputs": {"regex": "[a-z]+"}})
    assert sent["structured_outputs"] == {"regex": "[a-z]+"}


def test_the_cached_fields_are_never_changed() -> None:
    body("vllm", Pet, {"structured_outputs": {"disable_fallback": True}})
    assert body("vllm", Pet, {"top_k": 1})["structured_outputs"] == {"json": PET_SCHEMA}


@pytest.mark.parametrize(
    ("dialect", "extra", "field", "why"),
    [
        (
            "vllm",
            {"structured_outputs": {"json": {"type": "object"}}},
            "structured_outputs.json",
            "change",
        ),
        ("vllm", {"structured_outputs": {"regex": "[a-z]+"}}, "structured_outputs.regex", "second"),
        ("vllm", {"structured_outputs": None}, "structured_outputs", "change"),
        ("vllm", {"response_format": {"type": "json_object"}}, "response_format", "second"),
        ("generic", {"response_format": {"type": "json_object"}}, "response_format.type", "change"),
        ("generic", {"response_format": {"json_schema": {"schema": {}}}}, "schema", "change"),
        ("openai", {"response_format": {"json_schema": {"strict": False}}}, "strict", "change"),
        ("llamacpp", {"json_schema": {"type": "object"}}, "json_schema", "change"),
        ("llamacpp", {"grammar": 'root ::= "x"'}, "grammar", "second"),
        ("vllm-guided", {"guided_json": {"type": "object"}}, "guided_json", "change"),
        (
            "tgi",
            {"response_format": {"value": {"type": "object"}}},
            "response_format.value",
            "change",
        ),
    ],
)
def test_changing_the_types_constraint_is_refused_before_any_request(
    dialect: str, extra: dict[str, Any], field: str, why: str
) -> None:
    # Port 9 (discard) on the loopback: a request that went out would fail differently.
    client = lmclient.Client(
        "http://127.0.0.1:9/v1", model="m", dialect=dialect, max_retries=0, whitespace="server"
    )
    with pytest.raises(ValueError, match=why) as info:
        client.generate("Q", Pet, extra_body=extra)
    assert field in str(info.value) and "make it the output type" in str(info.value)


@pytest.mark.parametrize(
    ("dialect", "extra", "field", "why"),
    [
        ("vllm", {"structured_outputs": {"grammar": 'root ::= "x"'}}, "grammar", "change"),
        ("vllm", {"structured_outputs": {"json": {}}}, "structured_outputs.json", "second"),
        ("llamacpp", {"grammar": 'root ::= "x"'}, "grammar", "change"),
        ("llamacpp", {"json_schema": {"type": "object"}}, "json_schema", "second"),
        ("sglang", {"ebnf": 'root ::= "x"'}, "ebnf", "change"),
    ],
)
def test_the_compact_grammar_is_the_types_constraint_too(
    dialect: str, extra: dict[str, Any], field: str, why: str
) -> None:
    client = lmclient.Client("http://127.0.0.1:9/v1", model="m", dialect=dialect, max_retries=0)
    with pytest.raises(ValueError, match=why) as info:
        client.generate("Q", Pet, extra_body=extra)
    assert field in str(info.value)


def test_an_option_is_merged_beside_the_compact_grammar() -> None:
    sent = body(
        "vllm", Pet, {"structured_outputs": {"disable_fallback": True}}, whitespace="compact"
    )
    assert set(sent["structured_outputs"]) == {"grammar", "disable_fallback"}


def test_the_refusal_comes_with_the_other_checks_of_the_input() -> None:
    core = _core.ClientCore("http://h/v1", "m", dialect="vllm", whitespace="server")
    extra: dict[str, Any] = {"structured_outputs": {"json": {}}}
    with pytest.raises(ValueError, match="would change"):
        core.validate("generate", "Q", Pet, "chat", {"extra_body": extra})
    defaults = _core.ClientCore(
        "http://h/v1", "m", dialect="vllm", defaults={"extra_body": extra}, whitespace="server"
    )
    with pytest.raises(ValueError, match="would change"):
        defaults.validate("generate", "Q", Pet, "chat", {})


def test_guided_options_beside_guided_json_are_not_a_second_constraint() -> None:
    sent = body("vllm-guided", Pet, {"guided_decoding_backend": "outlines"})
    assert sent["guided_json"] == PET_SCHEMA and sent["guided_decoding_backend"] == "outlines"
