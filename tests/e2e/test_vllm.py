"""End to end against a real vLLM server on the CPU: the server lmclient is for.

Gemma 3 270M (the base model, converted from the GGUF the llama.cpp tests use) decodes a few
tokens a second on 2 cores, and a JSON grammar costs more per token, so every generation here is
short: bounded types, and a prompt that shows the model the shape it must write. These tests
assert validity and types, never content, except where greedy decoding is the point.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

import msgspec
import pytest

import lmclient
from lmclient import CallParams
from scripts import vllm

# The first test also waits for the server to start (minutes on 2 cores): not part of the bound.
pytestmark = pytest.mark.timeout(300, func_only=True)

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=12)]
SMALL: CallParams = {"temperature": 0.0, "seed": 1, "max_tokens": 48}


class Person(msgspec.Struct):
    name: Name
    age: Annotated[int, msgspec.Meta(ge=0, le=120)]


class Pet(msgspec.Struct):
    name: Name
    species: Literal["cat", "dog", "bird"]


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


Pets = Annotated[list[Pet], msgspec.Meta(min_length=1, max_length=2)]
YES_NO = Literal["yes", "no"]

# (id, prompt, output type, type of the value): every constraint field vLLM has, one or more
# rows each: structured_outputs.json (struct, array, bounded int, JsonSchema),
# .regex (bool, Regex), .choice (Literal, Enum, Choice), .grammar (GBNF, Lark), .json_object.
KINDS: list[tuple[str, str, Any, Any]] = [
    ("struct", 'A person as JSON, like {"name": "Ann", "age": 30}:', Person, Person),
    ("array", 'Pets as JSON, like [{"name": "Tom", "species": "cat"}]:', Pets, list),
    ("int", "How many legs has a cat? A number:", Annotated[int, msgspec.Meta(ge=0, le=99)], int),
    ("bool", "Is water wet? true or false:", bool, bool),
    ("literal", "Is the sky blue? yes or no:", YES_NO, str),
    ("enum", "A colour, red or blue:", Color, Color),
    ("choice", "Pick alpha, beta or gamma:", lmclient.Choice(["alpha", "beta", "gamma"]), str),
    ("regex", "A code like ABC-12:", lmclient.Regex(r"[A-Z]{3}-[0-9]{2}"), str),
    ("gbnf", "Three digits:", lmclient.Grammar("root ::= [0-9] [0-9] [0-9]"), str),
    (
        "lark",
        "Two digits:",
        lmclient.Grammar("start: DIGIT DIGIT\n%import common.DIGIT", syntax="lark"),
        str,
    ),
    # Any JSON value: the compact grammar of `Any` allows every JSON type (the server's
    # json_object mode, sent with whitespace="server", allows objects only).
    ("json-any", "Reply with {} and nothing else.", Any, object),
    (
        "jsonschema",
        'Is it ok? As JSON, like {"ok": true}:',
        lmclient.JsonSchema(
            {
                "type": "object",
                "properties": {"ok": {"type": "boolean"}},
                "required": ["ok"],
                "additionalProperties": False,
            }
        ),
        dict,
    ),
]
KIND_IDS = [k[0] for k in KINDS]


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize(
    ("name", "prompt", "output_type", "expected"), KINDS, ids=[k[0] for k in KINDS]
)
def test_every_constraint_kind(
    name: str, prompt: str, output_type: Any, expected: Any, endpoint: Any, vllm_url: str
) -> None:
    with lmclient.Client(vllm_url) as client:  # model=None and dialect="auto"
        response = client.create(prompt, output_type, endpoint=endpoint, **SMALL)
        assert client.dialect == "vllm"
    assert isinstance(response.value, expected)
    assert response.finish_reason == "stop"
    if name == "gbnf":
        assert len(response.value) == 3 and response.value.isdigit()


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize(
    ("name", "prompt", "output_type", "expected"),
    [k for k in KINDS if k[0] in ("struct", "choice", "gbnf")],
    ids=["struct", "choice", "gbnf"],
)
async def test_constraint_kinds_async(
    name: str, prompt: str, output_type: Any, expected: Any, endpoint: Any, vllm_url: str
) -> None:
    async with lmclient.AsyncClient(vllm_url) as client:
        response = await client.create(prompt, output_type, endpoint=endpoint, **SMALL)
    assert isinstance(response.value, expected)


def test_the_servers_json_object_mode_with_its_own_whitespace(vllm_url: str) -> None:
    with lmclient.Client(vllm_url, whitespace="server") as client:
        response = client.create("Reply with {} and nothing else.", Any, **SMALL)
    assert isinstance(response.value, dict) and not response.compact


def test_auto_detection_and_model_discovery(vllm_server: vllm.VllmServer) -> None:
    with lmclient.Client(vllm_server.base_url) as client:
        info = client.probe()
        assert client.generate("Is the sky blue? yes or no:", YES_NO, max_tokens=4) in ("yes", "no")
        model = client.model
    assert (info.kind, info.dialect, info.version) == ("vllm", "vllm", vllm.VLLM_VERSION)
    assert info.models == [vllm_server.model] and model == vllm_server.model


def test_greedy_completion_and_its_logprobs(vllm_url: str) -> None:
    """The conversion's own check, through lmclient: vLLM's greedy answer is the one
    transformers gave when the checkpoint was made."""
    with lmclient.Client(vllm_url) as client:
        response = client.create(
            vllm.CHECK_PROMPT,
            endpoint="completions",
            max_tokens=vllm.CHECK_TOKENS,
            temperature=0.0,
            logprobs=True,
            top_logprobs=3,
        )
    assert response.text == vllm.CHECK_ANSWER
    assert response.logprobs is not None and len(response.logprobs) == vllm.CHECK_TOKENS
    first = response.logprobs[0]
    assert first.token == " the" and -2.0 < first.logprob < -1.3
    assert [t.token for t in first.top_logprobs] == [" the", " a", " Paris"]


def test_chat_logprobs_of_a_choice(vllm_url: str) -> None:
    with lmclient.Client(vllm_url) as client:
        response = client.create(
            "Is the sky blue? yes or no:", YES_NO, logprobs=True, top_logprobs=2, max_tokens=8
        )
    assert response.logprobs is not None
    tokens = [t.token for t in response.logprobs]
    assert "".join(tokens).startswith(response.text)  # then vLLM's grammar-forced <eos>
    assert all(t.logprob <= 0 and len(t.top_logprobs) <= 2 for t in response.logprobs)


def test_n_choices_are_each_validated(vllm_url: str) -> None:
    with lmclient.Client(vllm_url) as client:
        response = client.create(
            "Is the sky blue? yes or no:", YES_NO, n=2, temperature=1.0, seed=3, max_tokens=8
        )
    assert len(response.values) == 2 and set(response.values) <= {"yes", "no"}
    assert len(response.finish_reasons) == 2


def test_stream_items_sync(vllm_url: str) -> None:
    prompt = KINDS[1][1]
    with lmclient.Client(vllm_url) as client, client.stream(prompt, Pets, **SMALL) as s:
        items = list(s.items())
    assert items and all(isinstance(p, Pet) for p in items)
    assert s.value == items
    assert s.usage is not None and s.usage.completion_tokens


async def test_stream_items_async(vllm_url: str) -> None:
    prompt = KINDS[1][1]
    async with (
        lmclient.AsyncClient(vllm_url) as client,
        client.stream(prompt, Pets, endpoint="completions", **SMALL) as s,
    ):
        items = [p async for p in s.items()]
    assert items and s.value == items


def test_stream_text(vllm_url: str) -> None:
    with lmclient.Client(vllm_url) as client, client.stream("Say hello.", max_tokens=8) as s:
        deltas = list(s)
    assert "".join(deltas) == s.value and s.finish_reason in ("stop", "length")
    assert s.usage is not None and s.usage.completion_tokens


def test_generate_many_keeps_input_order(vllm_url: str) -> None:
    items: list[Any] = [
        ("Is the sky blue? yes or no:", YES_NO),
        ("Three digits:", KINDS[8][2]),
        ("Is water wet? true or false:", bool),
        ("A colour, red or blue:", Color),
    ]
    with lmclient.Client(vllm_url) as client:
        values = client.generate_many(items, concurrency=4, **SMALL)
    assert [type(v) for v in values] == [str, str, bool, Color]
    assert values[0] in ("yes", "no") and values[1].isdigit()


async def test_generate_many_async(vllm_url: str) -> None:
    async with lmclient.AsyncClient(vllm_url) as client:
        values = await client.generate_many(
            ["Is the sky blue? yes or no:"] * 3, YES_NO, concurrency=3, **SMALL
        )
    assert len(values) == 3 and set(values) <= {"yes", "no"}


def test_max_tokens_too_small_is_truncated(vllm_url: str) -> None:
    with lmclient.Client(vllm_url) as client, pytest.raises(lmclient.TruncatedError) as info:
        client.generate(KINDS[0][1], Person, max_tokens=3, temperature=0.0)
    assert info.value.text and info.value.usage is not None


def test_unknown_model_is_not_found(vllm_url: str) -> None:
    with (
        lmclient.Client(vllm_url, model="no-such-model") as client,
        pytest.raises(lmclient.NotFoundError, match="does not exist") as info,
    ):
        client.generate("Hi", max_tokens=4)
    assert info.value.status_code == 404


def test_context_overflow_is_a_bad_request(vllm_url: str) -> None:
    with (
        lmclient.Client(vllm_url) as client,
        pytest.raises(lmclient.BadRequestError, match="maximum context length") as info,
    ):
        client.complete("word " * 2100, max_tokens=4)
    assert info.value.status_code == 400


def test_max_tokens_beyond_the_context_is_a_bad_request(vllm_url: str) -> None:
    with (
        lmclient.Client(vllm_url) as client,
        pytest.raises(lmclient.BadRequestError, match="max_model_len"),
    ):
        client.generate("Hi", max_tokens=4096)


def test_a_regex_the_engine_rejects_is_a_bad_request(vllm_url: str) -> None:
    """Valid for Python's re (lmclient's own check passes), not for xgrammar."""
    with (
        lmclient.Client(vllm_url) as client,
        pytest.raises(lmclient.BadRequestError, match="Backreference") as info,
    ):
        client.generate("Hi", lmclient.Regex(r"(a)\1"), max_tokens=4)
    assert info.value.status_code == 400


def test_tokenize_and_count_tokens(vllm_url: str) -> None:
    """vLLM's root ``/tokenize``, for a text and for messages as a chat completion renders them."""
    messages = [{"role": "user", "content": "Hello world"}]
    with lmclient.Client(vllm_url) as client:
        tokens = client.tokenize("Hello world")
        with_special = client.count_tokens("Hello world", add_special_tokens=True)
        count = client.count_tokens(messages)
        usage = client.create(messages, max_tokens=1).usage
    assert tokens and all(isinstance(t, int) for t in tokens)
    assert with_special >= len(tokens)
    assert usage is not None and count == usage.prompt_tokens
