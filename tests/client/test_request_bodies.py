"""The exact bytes of a few request bodies, key order included: building a body faster must
not change one byte of what goes on the wire (a server may read fields in order, a recorded body
is compared by its bytes, and a batch file is written from these)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

import msgspec
import pytest

import lmclient
from lmclient import _core
from lmclient._dialects import Endpoint
from lmclient._output.types import compile_output


class Pet(msgspec.Struct):
    name: str
    age: int


class Tag(msgspec.Struct):  # bounded: the compact grammar's longest sentence is the budget
    id: Annotated[int, msgspec.Meta(ge=0, le=9)]
    ok: bool


def core(dialect: str, **kw: Any) -> _core.ClientCore:
    return _core.ClientCore("http://h/v1", "m", dialect=dialect, **kw)


CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Pets?"}]
STREAM_PARAMS = {
    "max_tokens": 64,
    "stop": ("\n", "END"),
    "temperature": 0.5,
    "seed": 7,
    "timeout": 3,
}
CALLS: dict[str, tuple[str, dict[str, Any], tuple[Any, ...], _core.Reading]] = {
    "vllm-struct": (
        "vllm",
        {"whitespace": "server"},
        ("generate", "Name a pet.", Pet, "chat", {}),
        "call",
    ),
    "vllm-stream-params": (
        "vllm",
        {"whitespace": "server"},
        ("stream", CHAT, list[Pet], "chat", STREAM_PARAMS),
        "stream",
    ),
    "vllm-compact-budget": ("vllm", {}, ("generate", "Tag?", Tag, "chat", {}), "call"),
    "llamacpp-compact-stream": (
        "llamacpp",
        {},
        ("stream", "Tag?", Tag, "completions", {"max_tokens": 12}),
        "stream",
    ),
    "vllm-completions-defaults-logprobs": (
        "vllm",
        {"defaults": {"top_p": 0.9, "max_tokens": 10}},
        (
            "complete",
            "2 + 2 =",
            int,
            "completions",
            {"max_tokens": 5, "logprobs": True, "top_logprobs": 3},
        ),
        "call",
    ),
    "openai-strict-logprobs": (
        "openai",
        {},
        ("generate", "Name a pet.", Pet, "chat", {"logprobs": True, "top_logprobs": 2}),
        "call",
    ),
    "llamacpp-choice-extra": (
        "llamacpp",
        {},
        (
            "generate",
            "Yes?",
            Literal["yes", "no"],
            "chat",
            {"extra_body": {"top_k": 5, "n_probs": 0}},
        ),
        "call",
    ),
    "sglang-regex-stream": (
        "sglang",
        {},
        (
            "complete",
            "Name: ",
            lmclient.Regex("[A-Z][a-z]+"),
            "completions",
            {"presence_penalty": 0.1},
        ),
        "stream",
    ),
    "tgi-wrapped-n": (
        "tgi",
        {},
        ("create", "Count.", list[int], "chat", {"n": 2, "frequency_penalty": 0}),
        "call",
    ),
    "vllm-guided-text-extra": (
        "vllm-guided",
        {},
        (
            "generate",
            "Anything.",
            str,
            "chat",
            {"extra_body": {"max_tokens": 9, "repetition_penalty": 1.1}, "max_tokens": 3},
        ),
        "call",
    ),
}
BODIES = {
    "vllm-struct": (
        b'{"model":"m","messages":[{"role":"user","content":"Name a pet."}],"structured'
        b'_outputs":{"json":{"title":"Pet","type":"object","properties":{"name":{"type"'
        b':"string"},"age":{"type":"integer"}},"required":["name","age"]}},"repetition_'
        b'detection":{"max_pattern_size":16,"min_pattern_size":1,"min_count":32}}'
    ),
    "vllm-stream-params": (
        b'{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"use'
        b'r","content":"Pets?"}],"max_tokens":64,"stop":["\\n","END"],"temperature":0.5'
        b',"seed":7,"stream":true,"stream_options":{"include_usage":true},"structured_o'
        b'utputs":{"json":{"type":"array","items":{"$ref":"#/$defs/Pet"},"$defs":{"Pet"'
        b':{"title":"Pet","type":"object","properties":{"name":{"type":"string"},"age":'
        b'{"type":"integer"}},"required":["name","age"]}}}},"repetition_detection":{"ma'
        b'x_pattern_size":16,"min_pattern_size":1,"min_count":32}}'
    ),
    "vllm-completions-defaults-logprobs": (
        b'{"model":"m","prompt":"2 + 2 =","top_p":0.9,"max_tokens":5,"logprobs":3,"stru'
        b'ctured_outputs":{"regex":"-?(0|[1-9][0-9]{0,18})"},"repetition_detection":{"m'
        b'ax_pattern_size":16,"min_pattern_size":1,"min_count":32}}'
    ),
    "openai-strict-logprobs": (
        b'{"model":"m","messages":[{"role":"user","content":"Name a pet."}],"logprobs":'
        b'true,"top_logprobs":2,"response_format":{"type":"json_schema","json_schema":{'
        b'"name":"Pet","schema":{"title":"Pet","type":"object","properties":{"name":{"t'
        b'ype":"string"},"age":{"type":"integer"}},"required":["name","age"],"additiona'
        b'lProperties":false},"strict":true}}}'
    ),
    "llamacpp-choice-extra": (
        b'{"model":"m","messages":[{"role":"user","content":"Yes?"}],"max_tokens":4,"gra'
        b'mmar":"root ::= \\"yes\\" | \\"no\\"","top_k":5,"n_probs":0}'
    ),
    "vllm-compact-budget": (
        b'{"model":"m","messages":[{"role":"user","content":"Tag?"}],"'
        b'max_tokens":20,"structured_outputs":{"grammar":"root ::= \\"{'
        b'\\\\\\"id\\\\\\":\\" [0-9] \\",\\\\\\"ok\\\\\\":\\" (\\"true\\" | \\"false\\") '
        b'\\"}\\"\\n"}}'
    ),
    "llamacpp-compact-stream": (
        b'{"model":"m","prompt":"Tag?","max_tokens":12,"stream":true,"'
        b'stream_options":{"include_usage":true},"grammar":"root ::= \\'
        b'"{\\\\\\"id\\\\\\":\\" [0-9] \\",\\\\\\"ok\\\\\\":\\" (\\"true\\" | \\"false\\"'
        b') \\"}\\"\\n"}'
    ),
    "sglang-regex-stream": (
        b'{"model":"m","prompt":"Name: ","presence_penalty":0.1,"stream":true,"stream_o'
        b'ptions":{"include_usage":true},"regex":"[A-Z][a-z]+","rid":"000000000000000000'
        b'00000000000001"}'  # the rid lmclient makes for its abort (a uuid4: here, fixed)
    ),
    "tgi-wrapped-n": (
        b'{"model":"m","messages":[{"role":"user","content":"Count."}],"n":2,"frequency'
        b'_penalty":0,"response_format":{"type":"json","value":{"type":"object","proper'
        b'ties":{"value":{"type":"array","items":{"type":"integer"}}},"required":["valu'
        b'e"],"additionalProperties":false}}}'
    ),
    "vllm-guided-text-extra": (
        b'{"model":"m","messages":[{"role":"user","content":"Anything."}],"max_tokens":'
        b'9,"stream":true,"stream_options":{"include_usage":true},"repetition_penalty":'
        b"1.1}"
    ),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_request_body_bytes(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=1))  # SGLang's rid, made per call
    dialect, kw, args, reading = CALLS[name]
    first = core(dialect, **kw).prepare(*args, reading=reading)
    assert first.request.body == BODIES[name]
    again = core(dialect, **kw).prepare(*args, reading=reading)  # with every cache warm
    assert again.request.body == BODIES[name]


PET_FIELDS = {
    "structured_outputs": {
        "json": {
            "title": "Pet",
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name", "age"],
        }
    }
}
# vLLM's own check of an unbounded type's answer, at the client's default thresholds
REPETITION_DETECTION = {
    "repetition_detection": {"max_pattern_size": 16, "min_pattern_size": 1, "min_count": 32}
}
PROMPTS = ["", "plain", 'a " and a \\', "line\nbreak\ttab", "\x00\x1f", "é ü 🐍", "\u2028</script>"]


@pytest.mark.parametrize("prompt", PROMPTS)
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize("reading", ["call", "stream"])
@pytest.mark.parametrize("compact", [False, True], ids=["server-whitespace", "compact"])
def test_a_prompt_spliced_alone_makes_the_bytes_of_the_whole_body(
    prompt: str, endpoint: Endpoint, reading: _core.Reading, compact: bool
) -> None:
    """A call with one prompt and no parameters makes the bytes of the whole body, the first
    time (its plan made) and the next (its plan reused): an unbounded type's with vLLM's
    repetition check after its fields."""
    expected: dict[str, Any] = {"model": "m"}
    if endpoint == "chat":
        expected["messages"] = [{"role": "user", "content": prompt}]
    else:
        expected["prompt"] = prompt
    if compact:
        expected["max_tokens"] = len('{"id":0,"ok":false}') + 1
    if reading == "stream":
        expected |= {"stream": True, "stream_options": {"include_usage": True}}
    output_type = Tag if compact else Pet
    grammar = compile_output(Tag).compact
    assert grammar is not None
    expected |= {"structured_outputs": {"grammar": grammar.text}} if compact else PET_FIELDS
    if not compact:
        expected |= REPETITION_DETECTION
    c = core("vllm", whitespace="compact" if compact else "server")
    for _ in range(2):  # the plan made, then reused
        call = c.prepare("create", prompt, output_type, endpoint, {}, reading=reading)
        assert call.request.body == msgspec.json.encode(expected)


def test_the_template_follows_the_model_learnt_from_the_server() -> None:
    c = _core.ClientCore("http://h/v1", None, dialect="vllm")
    c.validate("generate", "Q", Pet, "chat", {})  # plans before the model is known
    for model in ("first", "second"):
        c.adopt_models([model])
        body = c.prepare("generate", "Q", Pet, "chat", {}).request.body
        assert body is not None and msgspec.json.decode(body)["model"] == model
