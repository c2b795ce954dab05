"""FakeLLM.handle without any transport: routing, bodies, scripting, generation, SSE events."""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Iterator
from typing import Annotated, Any

import msgspec
import pytest

from lmclient.testing import FakeLLM, RecordedRequest
from lmclient.testing._wire import FakeResponse, StreamDropped, estimate_tokens
from tests.helpers import LLAMACPP_LIVE

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}]


def send(fake: FakeLLM, path: str, body: Any = None, method: str = "POST") -> FakeResponse:
    raw = body if isinstance(body, bytes) else b"" if body is None else msgspec.json.encode(body)
    return fake.handle(method, path, {"Content-Type": "application/json", "X-Test": "1"}, raw)


def chat(fake: FakeLLM, **extra: Any) -> dict[str, Any]:
    response = send(fake, "/v1/chat/completions", {"messages": MESSAGES, **extra})
    assert response.status == 200, response.body
    result: dict[str, Any] = msgspec.json.decode(response.body)
    return result


def text(fake: FakeLLM, **extra: Any) -> str:
    content: str = chat(fake, **extra)["choices"][0]["message"]["content"]
    return content


def byte_chunks(response: FakeResponse) -> Iterator[bytes]:
    """The body pieces of a streamed answer (these streams have no pauses)."""
    assert response.chunks is not None
    for chunk in response.chunks:
        assert isinstance(chunk, bytes)
        yield chunk


def events(response: FakeResponse) -> list[Any]:
    """Decoded ``data:`` payloads (``"[DONE]"`` kept as a string), comments dropped."""
    out: list[Any] = []
    for block in b"".join(byte_chunks(response)).decode().split("\n\n"):
        if block.startswith("data: "):
            data = block[len("data: ") :]
            out.append(data if data == "[DONE]" else msgspec.json.decode(data))
    return out


def streamed_text(payloads: list[Any]) -> str:
    return "".join(
        p["choices"][0]["delta"].get("content") or ""
        for p in payloads
        if isinstance(p, dict) and p.get("choices")
    )


# -- routes and bodies -------------------------------------------------------------------------


def test_chat_body_is_vllm_shaped() -> None:
    fake = FakeLLM()
    body = chat(fake, model="fake-model")
    text = "This is a fake reply."
    prompt_tokens = estimate_tokens("Be brief.Hello there")
    assert body == {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": body["created"],
        "model": "fake-model",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": text,
                    "refusal": None,
                    "reasoning": None,
                },
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": estimate_tokens(text),
            "total_tokens": prompt_tokens + estimate_tokens(text),
        },
    }
    assert isinstance(body["created"], int)


def test_completions_body() -> None:
    fake = FakeLLM(default_text="four")
    response = send(fake, "/v1/completions", {"model": "fake-model", "prompt": "2 + 2 ="})
    body = msgspec.json.decode(response.body)
    assert response.headers == [("content-type", "application/json")]
    assert body["id"] == "cmpl-1"
    assert body["object"] == "text_completion"
    assert body["choices"] == [
        {"index": 0, "text": "four", "logprobs": None, "finish_reason": "stop"}
    ]
    assert body["usage"] == {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}


def test_models() -> None:
    fake = FakeLLM(models=["a", "b"])
    body = msgspec.json.decode(send(fake, "/v1/models", method="GET").body)
    assert body == {
        "object": "list",
        "data": [
            {"id": "a", "object": "model", "created": 0, "owned_by": "vllm"},
            {"id": "b", "object": "model", "created": 0, "owned_by": "vllm"},
        ],
    }  # owned_by: the imitated server's name (vLLM by default), lmclient-fake for none
    generic = msgspec.json.decode(send(FakeLLM(server="generic"), "/v1/models", method="GET").body)
    assert generic["data"][0]["owned_by"] == "lmclient-fake"
    assert chat(fake, model="b")["model"] == "b"
    assert chat(fake)["model"] == "a"  # no model: the first one, like a single-model server


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/v1/nothing"), ("POST", "/v1/models"), ("GET", "/v1/chat/completions"), ("GET", "/")],
)
def test_unknown_routes_are_404(method: str, path: str) -> None:
    response = send(FakeLLM(), path, method=method)
    assert response.status == 404
    error = msgspec.json.decode(response.body)["error"]
    assert error["type"] == "not_found_error"
    assert error["code"] == 404
    assert path in error["message"]


def test_any_model_is_served_unless_models_restricts_it() -> None:
    fake = FakeLLM()
    assert chat(fake, model="prod/Qwen3-8B")["model"] == "prod/Qwen3-8B"
    assert chat(fake, model="lora-tenant-7")["model"] == "lora-tenant-7"
    assert chat(fake)["model"] == "fake-model"
    body = msgspec.json.decode(send(fake, "/v1/models", method="GET").body)
    assert [card["id"] for card in body["data"]] == ["fake-model"]
    restricted = FakeLLM(models=["a"])
    assert chat(restricted, model="a")["model"] == "a"
    assert (
        send(restricted, "/v1/chat/completions", {"model": "b", "messages": MESSAGES}).status == 404
    )


def test_unknown_model_is_404_like_vllm() -> None:
    response = send(
        FakeLLM(models=["m"]), "/v1/chat/completions", {"model": "x", "messages": MESSAGES}
    )
    assert response.status == 404
    assert msgspec.json.decode(response.body) == {
        "error": {
            "message": "The model `x` does not exist.",
            "type": "NotFoundError",
            "param": "model",
            "code": 404,
        }
    }


def test_llamacpp_serves_any_model_name_with_its_own_as_the_recording() -> None:
    """A real llama-server answers a name it does not serve with its one model, naming that
    model (tests/fixtures/llamacpp-live/err_unknown_model: ``no-such-model`` asked, 200 with
    ``gemma-3-270m``); the fake playing it does the same, never vLLM's 404."""
    recorded = msgspec.json.decode((LLAMACPP_LIVE / "err_unknown_model.response.json").read_bytes())
    asked = msgspec.json.decode((LLAMACPP_LIVE / "err_unknown_model.request.json").read_bytes())
    fake = FakeLLM(models=[recorded["model"]], server="llamacpp")
    response = send(fake, "/v1/chat/completions", asked)
    assert response.status == 200, response.body
    assert msgspec.json.decode(response.body)["model"] == recorded["model"] == "gemma-3-270m"


@pytest.mark.parametrize("models", [None, ["own"], ["own", "other"]])
@pytest.mark.parametrize("asked", ["prod-model", "other", None])
def test_llamacpp_answers_every_generation_with_its_own_name(
    models: list[str] | None, asked: str | None
) -> None:
    fake = FakeLLM(models=models, server="llamacpp")
    own = "fake-model" if models is None else "own"
    named = {} if asked is None else {"model": asked}
    assert chat(fake, **named)["model"] == own
    completion = send(fake, "/v1/completions", {"prompt": "Hi", **named})
    assert completion.status == 200 and msgspec.json.decode(completion.body)["model"] == own
    streamed = send(fake, "/v1/chat/completions", {"messages": MESSAGES, "stream": True, **named})
    assert {p["model"] for p in events(streamed) if isinstance(p, dict)} == {own}


def test_llamacpp_embeds_and_reranks_for_any_name_echoing_it() -> None:
    """Its embeddings and rerank answers carry the name asked for
    (``json_value(request, "model", model_name)`` in tools/server/server-common.cpp)."""
    fake = FakeLLM(models=["own"], server="llamacpp")
    embedded = send(fake, "/v1/embeddings", {"model": "other", "input": "a"})
    assert embedded.status == 200 and msgspec.json.decode(embedded.body)["model"] == "other"
    ranked = send(fake, "/v1/rerank", {"model": "other", "query": "a", "documents": ["a", "b"]})
    assert ranked.status == 200 and msgspec.json.decode(ranked.body)["model"] == "other"
    assert msgspec.json.decode(send(fake, "/v1/embeddings", {"input": "a"}).body)["model"] == "own"


@pytest.mark.parametrize("server", [None, "vllm", "sglang", "generic"])
def test_other_servers_still_refuse_a_name_they_do_not_serve(server: str | None) -> None:
    fake = FakeLLM(models=["own"], server=server)
    assert send(fake, "/v1/chat/completions", {"model": "x", "messages": MESSAGES}).status == 404
    assert chat(fake, model="own")["model"] == "own"


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"",
        b"[1, 2]",
        {"prompt": "chat needs messages"},
        {"messages": MESSAGES, "n": 0},
        {"messages": MESSAGES, "n": True},
        {"messages": MESSAGES, "stream_options": {"include_usage": True}},
        {"messages": MESSAGES, "structured_outputs": {"json": "{oops"}},
        {"messages": MESSAGES, "guided_regex": "(unclosed"},
        {"messages": MESSAGES, "guided_grammar": 'root ::= "(" root ")"'},  # never ends
        {"messages": MESSAGES, "guided_json": {"type": "integer", "minimum": 3, "maximum": 1}},
    ],
    ids=str,
)
def test_bad_requests_are_400(body: Any) -> None:
    fake = FakeLLM()
    response = send(fake, "/v1/chat/completions", body)
    assert response.status == 400
    error = msgspec.json.decode(response.body)["error"]
    assert error["type"] == "BadRequestError"
    assert error["code"] == 400
    assert len(fake.requests) == 1


def test_completions_need_a_prompt() -> None:
    assert send(FakeLLM(), "/v1/completions", {"messages": MESSAGES}).status == 400


def test_grammar_error_says_to_script_a_reply() -> None:
    response = send(FakeLLM(), "/v1/chat/completions", {"messages": MESSAGES, "grammar": "r ::= x"})
    assert "FakeLLM.reply" in msgspec.json.decode(response.body)["error"]["message"]


def test_null_optional_fields_are_defaults() -> None:
    fake = FakeLLM(default_text="x" * 40)
    body = chat(fake, model=None, n=None, max_completion_tokens=None, max_tokens=2,
                stream_options=None, response_format=None)  # fmt: skip
    assert body["model"] == "fake-model"
    assert len(body["choices"]) == 1
    assert body["choices"][0]["finish_reason"] == "length"


def test_the_api_is_served_under_the_base_path_only() -> None:
    """As on a server: another prefix, no prefix, or a path doubled by a base URL that ends in
    an endpoint are 404s (they pass against a lenient fake and fail in production)."""
    body = {"messages": MESSAGES}
    assert send(FakeLLM(), "/v1/chat/completions?x=1", body).status == 200
    for path in (
        "/chat/completions",
        "/api/chat/completions",
        "/openai/v1/chat/completions",
        "/v1/chat/completions/chat/completions",
        "/v1/v1/chat/completions",
    ):
        assert send(FakeLLM(), path, body).status == 404, path
        assert send(FakeLLM(), path, body).body.find(path.encode()) > 0
    assert send(FakeLLM(), "/api/models", method="GET").status == 404
    assert send(FakeLLM(base_path="/openai/v1"), "/openai/v1/chat/completions", body).status == 200
    assert send(FakeLLM(base_path="/openai/v1"), "/v1/chat/completions", body).status == 404
    fake = FakeLLM(base_url="http://llm.test/api/v1")  # the base URL's path, unless given
    assert fake.base_path == "/api/v1"
    assert send(fake, "/api/v1/chat/completions", body).status == 200


def test_the_gateway_mode_serves_only_the_post_routes() -> None:
    gateway = FakeLLM(gateway=True)
    assert send(gateway, "/v1/chat/completions", {"messages": MESSAGES}).status == 200
    assert send(gateway, "/v1/completions", {"prompt": "p"}).status == 200
    assert send(gateway, "/v1/embeddings", {"input": ["a"]}).status == 200
    for path in ("/v1/models", "/version", "/props", "/server_info", "/info", "/api/version"):
        assert send(gateway, path, method="GET").status == 404, path
    assert send(gateway, "/tokenize", {"prompt": "p"}).status == 404
    assert send(FakeLLM(), "/v1/models", method="GET").status == 200


# -- generation from constraints ---------------------------------------------------------------


class Person(msgspec.Struct):
    name: str
    age: Annotated[int, msgspec.Meta(ge=0, le=120)]
    id: uuid.UUID


PERSON_SCHEMA = msgspec.json.schema(Person)


@pytest.mark.parametrize(
    "extra",
    [
        {"structured_outputs": {"json": PERSON_SCHEMA}},
        {"guided_json": PERSON_SCHEMA},
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "p", "schema": PERSON_SCHEMA},
            }
        },
        {"response_format": {"type": "json", "value": PERSON_SCHEMA}},
        {"json_schema": msgspec.json.encode(PERSON_SCHEMA).decode()},
    ],
)
def test_schema_constraints_give_valid_json(extra: dict[str, Any]) -> None:
    content = text(FakeLLM(), **extra)
    msgspec.json.decode(content, type=Person)
    assert " " not in content.replace('" ', "")  # compact JSON


def test_other_constraints() -> None:
    fake = FakeLLM()
    assert re.fullmatch(r"\d{3}-[A-Z]{2}", text(fake, guided_regex=r"\d{3}-[A-Z]{2}"))
    assert text(fake, structured_outputs={"choice": ["left", "right"]}) in ("left", "right")
    assert text(fake, ebnf='root ::= "yes" | "no"') in ("yes", "no")
    assert re.fullmatch("[a-z]+", text(fake, grammar="root ::= [a-z]+"))
    assert text(fake, response_format={"type": "json_object"}) == "{}"
    assert text(fake, response_format={"type": "text"}) == "This is a fake reply."


def test_an_impersonated_server_ignores_the_fields_it_does_not_read() -> None:
    regex = {"guided_regex": r"\d{4}"}
    assert text(FakeLLM(server="vllm"), **regex) == "This is a fake reply."  # vLLM >= 0.12
    assert re.fullmatch(r"\d{4}", text(FakeLLM(server="vllm-guided"), **regex))
    assert re.fullmatch(r"\d{4}", text(FakeLLM(), **regex))  # the default reads every field
    tgi = FakeLLM(server="tgi", default_text="free text")
    body = {"prompt": "p", "response_format": {"type": "regex", "value": "x+"}}
    completion = send(tgi, "/v1/completions", body)
    assert msgspec.json.decode(completion.body)["choices"][0]["text"] == "free text"


def test_generation_is_seeded() -> None:
    schema = {"structured_outputs": {"json": PERSON_SCHEMA}}
    assert text(FakeLLM(), **schema) == text(FakeLLM(), **schema)
    variants = {text(FakeLLM(seed=seed), **schema) for seed in range(5)}
    assert len(variants) > 1


def test_n_choices_use_successive_seeds() -> None:
    fake = FakeLLM()
    body = chat(fake, n=4, guided_json={"type": "integer", "minimum": 0, "maximum": 10**9})
    values = [c["message"]["content"] for c in body["choices"]]
    assert [c["index"] for c in body["choices"]] == [0, 1, 2, 3]
    assert len(set(values)) == 4
    assert values[1] == text(
        FakeLLM(seed=1), guided_json={"type": "integer", "minimum": 0, "maximum": 10**9}
    )
    assert body["usage"]["completion_tokens"] == sum(estimate_tokens(v) for v in values)


@pytest.mark.parametrize("field", ["max_tokens", "max_completion_tokens"])
def test_max_tokens_truncates_with_finish_reason_length(field: str) -> None:
    fake = FakeLLM(default_text="x" * 100)
    choice = chat(fake, **{field: 5})["choices"][0]
    assert choice["message"]["content"] == "x" * 20
    assert choice["finish_reason"] == "length"
    assert chat(fake, max_tokens=25)["choices"][0]["finish_reason"] == "stop"


# -- scripted replies --------------------------------------------------------------------------


@dataclasses.dataclass
class Point:
    x: int
    y: int


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("raw text, not JSON", "raw text, not JSON"),
        (
            Person(name="Ada", age=36, id=uuid.UUID(int=1)),
            '{"name":"Ada","age":36,"id":"00000000-0000-0000-0000-000000000001"}',
        ),
        (Point(1, 2), '{"x":1,"y":2}'),
        ([1, "a", None], '[1,"a",null]'),
        (42, "42"),
        (True, "true"),
        ({"value": [1.5]}, '{"value":[1.5]}'),
    ],
)
def test_reply_values(value: Any, expected: str) -> None:
    fake = FakeLLM()
    fake.reply(value)
    assert text(fake) == expected


def test_scripted_reply_beats_the_constraint() -> None:
    fake = FakeLLM()
    fake.reply("not a number")
    assert text(fake, guided_regex=r"\d+") == "not a number"


def test_reply_metadata() -> None:
    fake = FakeLLM()
    usage = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    logprobs = {"content": [{"token": "no", "logprob": -0.1, "top_logprobs": []}]}
    fake.reply(None, refusal="I can't help with that.", times=1)
    fake.reply("hm", reasoning="thinking...", usage=usage, logprobs=logprobs, finish_reason="stop")
    refused = chat(fake)["choices"][0]
    assert refused["message"]["content"] is None
    assert refused["message"]["refusal"] == "I can't help with that."
    body = chat(fake)
    assert body["choices"][0]["message"]["reasoning"] == "thinking..."
    assert body["choices"][0]["logprobs"] == logprobs
    assert body["usage"] == usage


def test_scripted_finish_reason() -> None:
    fake = FakeLLM()
    fake.reply("filtered", finish_reason="content_filter")
    assert chat(fake)["choices"][0]["finish_reason"] == "content_filter"


def test_scripted_text_is_truncated_too() -> None:
    fake = FakeLLM()
    fake.reply('{"long": "' + "y" * 50 + '"}')
    choice = chat(fake, max_tokens=3)["choices"][0]
    assert choice["finish_reason"] == "length"
    assert choice["message"]["content"] == '{"long": "yy'


def test_counted_replies_play_in_order_then_sticky_then_generated() -> None:
    fake = FakeLLM(default_text="generated")
    fake.reply_sequence(["one", "two"])
    fake.reply("three", times=2)
    assert fake.pending == 4
    assert [text(fake) for _ in range(5)] == ["one", "two", "three", "three", "generated"]
    assert fake.pending == 0
    fake.reply("sticky")
    fake.reply("counted", times=1)
    assert [text(fake) for _ in range(3)] == ["counted", "sticky", "sticky"]
    fake.reply("newer sticky")
    assert text(fake) == "newer sticky"


def test_when_matches_the_last_user_message_or_a_predicate() -> None:
    fake = FakeLLM(default_text="default")
    fake.reply("greeting", when="Hello")
    fake.reply("regex!", when=lambda r: r.constraint.kind == "regex", times=1)
    fake.reply("brief?", when="brief")  # only in the system message: never matches
    assert text(fake) == "greeting"
    assert text(fake, guided_regex="a") == "regex!"
    other = send(fake, "/v1/completions", {"prompt": "unrelated"})
    assert msgspec.json.decode(other.body)["choices"][0]["text"] == "default"


def test_each_choice_takes_its_own_reply() -> None:
    fake = FakeLLM(default_text="gen")
    fake.reply_sequence(["a", "b"])
    body = chat(fake, n=3)
    assert [c["message"]["content"] for c in body["choices"]] == ["a", "b", "gen"]


def test_reply_error_forms() -> None:
    fake = FakeLLM()
    fake.reply_error(429, "slow down", headers={"Retry-After": "2"})
    fake.reply_error(503, {"detail": "overloaded"}, times=2)
    fake.reply_error(500, b"<html>oops</html>")
    limited = send(fake, "/v1/chat/completions", {"messages": MESSAGES})
    assert limited.status == 429
    assert ("retry-after", "2") in limited.headers
    assert msgspec.json.decode(limited.body) == {
        "error": {"message": "slow down", "type": "error", "param": None, "code": 429}
    }
    for _ in range(2):
        busy = send(fake, "/v1/completions", {"prompt": "p", "stream": True})
        assert (busy.status, busy.body, busy.chunks) == (503, b'{"detail":"overloaded"}', None)
    raw = send(fake, "/v1/chat/completions", {"messages": MESSAGES})
    assert (raw.status, raw.body) == (500, b"<html>oops</html>")
    assert ("content-type", "text/plain; charset=utf-8") in raw.headers
    assert send(fake, "/v1/chat/completions", {"messages": MESSAGES}).status == 200


def test_error_replies_are_not_used_for_extra_choices() -> None:
    fake = FakeLLM(default_text="gen")
    fake.reply("first", times=1)
    fake.reply_error(500, "later")
    body = chat(fake, n=2)
    assert [c["message"]["content"] for c in body["choices"]] == ["first", "gen"]
    assert fake.pending == 1


def test_invalid_scripting_arguments() -> None:
    fake = FakeLLM()
    with pytest.raises(ValueError, match="times"):
        fake.reply("x", times=0)
    with pytest.raises(ValueError, match="error status"):
        fake.reply_error(200, "fine")
    with pytest.raises(ValueError, match="model"):
        FakeLLM(models=[])


def test_add_route_for_probes_and_overrides() -> None:
    fake = FakeLLM()
    fake.add_route("GET", "/version", {"version": "0.11.0"})
    fake.add_route("get", "/ping", "pong", headers={"X-Server": "fake"})
    fake.add_route("GET", "/v1/models", {"data": []}, status=500)
    version = send(fake, "/version", method="GET")
    assert (version.status, version.body) == (200, b'{"version":"0.11.0"}')
    ping = send(fake, "/ping", method="GET")
    assert ping.body == b"pong"
    assert ("x-server", "fake") in ping.headers
    assert send(fake, "/v1/models", method="GET").status == 500


# -- recording ---------------------------------------------------------------------------------


def test_requests_are_recorded() -> None:
    seen: list[RecordedRequest] = []
    fake = FakeLLM(on_request=seen.append)
    with pytest.raises(LookupError):
        _ = fake.last_request
    chat(fake, model="fake-model", guided_choice=["a"], stream=False)
    send(fake, "/v1/models", method="GET")
    send(fake, "/v1/completions", b"{bad")
    first, models, bad = fake.requests
    assert seen == fake.requests
    assert fake.last_request is bad
    assert (first.method, first.path, first.endpoint) == ("POST", "/v1/chat/completions", "chat")
    assert first.headers == {"content-type": "application/json", "x-test": "1"}
    assert first.body["messages"] == MESSAGES
    assert first.raw_body == msgspec.json.encode(first.body)
    assert first.constraint.kind == "choice"
    assert (first.model, first.stream, first.prompt) == ("fake-model", False, "Hello there")
    assert (models.endpoint, models.body, models.constraint.kind) == ("models", None, "none")
    assert (bad.endpoint, bad.body, bad.prompt, bad.model) == ("completions", None, "", None)
    fake.reset()
    assert fake.requests == []


@pytest.mark.parametrize(
    ("body", "prompt"),
    [
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "a"},
                            {"type": "image_url"},
                            {"type": "text", "text": "b"},
                        ],
                    }
                ]
            },
            "ab",
        ),
        (
            {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "r"}]},
            "q",
        ),
        ({"messages": [{"role": "user"}]}, ""),
        ({"messages": "nope"}, ""),
        ({"prompt": ["x", "y", 3]}, "x\ny"),
    ],
)
def test_prompt_text(body: dict[str, Any], prompt: str) -> None:
    request = RecordedRequest("POST", "/v1/chat/completions", "chat", {}, body)
    assert request.prompt == prompt


# -- streaming ---------------------------------------------------------------------------------


def stream(fake: FakeLLM, path: str = "/v1/chat/completions", **extra: Any) -> FakeResponse:
    payload = {"messages": MESSAGES} if "chat" in path else {"prompt": "p"}
    response = send(fake, path, {**payload, "stream": True, **extra})
    assert response.status == 200
    assert ("content-type", "text/event-stream") in response.headers
    return response


def test_chat_stream_events() -> None:
    fake = FakeLLM(default_text="Hello world", chunk_size=4)
    payloads = events(stream(fake, stream_options={"include_usage": True}))
    assert payloads[-1] == "[DONE]"
    first, *middle, finish, usage, _ = payloads
    assert first["object"] == "chat.completion.chunk"
    assert first["choices"] == [
        {
            "index": 0,
            "delta": {"role": "assistant", "content": ""},
            "logprobs": None,
            "finish_reason": None,
        }
    ]
    assert [m["choices"][0]["delta"]["content"] for m in middle] == ["Hell", "o wo", "rld"]
    assert finish["choices"][0]["delta"] == {}
    assert finish["choices"][0]["finish_reason"] == "stop"
    assert usage["choices"] == []
    assert usage["usage"]["completion_tokens"] == estimate_tokens("Hello world")
    assert len({p["id"] for p in payloads[:-1]}) == 1


def test_stream_text_equals_the_non_streamed_text() -> None:
    extra: dict[str, Any] = {"guided_json": PERSON_SCHEMA}
    assert streamed_text(events(stream(FakeLLM(), **extra))) == text(FakeLLM(), **extra)


def test_completions_stream_events() -> None:
    fake = FakeLLM(default_text="abcdef", chunk_size=3)
    payloads = events(stream(fake, "/v1/completions", max_tokens=1))
    assert [p["choices"][0]["text"] for p in payloads[:-1]] == ["abc", "d", ""]
    assert payloads[-2]["choices"][0]["finish_reason"] == "length"
    assert payloads[0]["object"] == "text_completion"
    assert all("usage" not in p for p in payloads[:-1])


def test_stream_of_n_choices() -> None:
    fake = FakeLLM(default_text="ab", chunk_size=1)
    payloads = events(stream(fake, n=2))
    indices = [p["choices"][0]["index"] for p in payloads[:-1]]
    assert indices == [0, 0, 0, 0, 1, 1, 1, 1]


def test_stream_reasoning_refusal_and_logprobs() -> None:
    fake = FakeLLM(chunk_size=5)
    fake.reply("answer", reasoning="think hard", refusal="no", logprobs={"content": []})
    deltas = [
        (p["choices"][0]["delta"], p["choices"][0]["logprobs"]) for p in events(stream(fake))[:-1]
    ]
    assert deltas == [
        ({"role": "assistant", "content": ""}, None),
        ({"reasoning": "think"}, None),
        ({"reasoning": " hard"}, None),
        ({"refusal": "no"}, None),
        ({"content": "answe"}, {"content": []}),
        ({"content": "r"}, None),
        ({}, None),
    ]


def test_keepalive_comments_between_events() -> None:
    response = stream(FakeLLM(default_text="abc", chunk_size=1, keepalive=True))
    chunks = list(byte_chunks(response))
    assert chunks[0].startswith(b"data: ")
    assert chunks[1::2] == [b": keep-alive\n\n"] * (len(chunks) // 2)
    assert chunks[-1] == b"data: [DONE]\n\n"


def test_error_after() -> None:
    payloads = events(stream(FakeLLM(default_text="abcdef", chunk_size=2, error_after=2)))
    assert streamed_text(payloads) == "abcd"
    assert payloads[-2] == {
        "error": {
            "message": "fake mid-stream error",
            "type": "InternalServerError",
            "param": None,
            "code": 500,
        }
    }
    assert payloads[-1] == "[DONE]"


def test_close_after_ends_without_done_or_finish_reason() -> None:
    payloads = events(stream(FakeLLM(default_text="abcdef", chunk_size=2, close_after=1)))
    assert streamed_text(payloads) == "ab"
    assert "[DONE]" not in payloads
    assert all(p["choices"][0]["finish_reason"] is None for p in payloads)


def test_drop_after_raises_stream_dropped() -> None:
    response = stream(FakeLLM(default_text="abcdef", chunk_size=2, drop_after=2))
    received: list[bytes] = []
    with pytest.raises(StreamDropped):
        received.extend(byte_chunks(response))
    assert len(received) == 3


def test_reply_overrides_stream_style() -> None:
    fake = FakeLLM(chunk_size=100, error_after=0)
    fake.reply("abcd", chunk_size=1, error_after=3, times=1)
    assert streamed_text(events(stream(fake))) == "abc"
    assert streamed_text(events(stream(fake))) == ""  # back to the fake's style: error at once


def test_on_chunk_runs_before_each_event_lazily() -> None:
    calls: list[int] = []
    fake = FakeLLM(default_text="abc", chunk_size=2, on_chunk=calls.append)
    response = stream(fake)
    assert response.chunks is not None
    assert calls == []
    next(response.chunks)
    assert calls == [0]
    rest = list(response.chunks)
    assert calls == list(range(len(rest) + 1))
