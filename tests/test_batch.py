"""Batch files: the requests match what the client sends; results come back typed, in order."""

from __future__ import annotations

import json
import pathlib
from typing import Any, Literal

import httpx
import msgspec
import pytest

import lmclient
from lmclient.batch import read_results, write_requests
from lmclient.testing import FakeLLM


class Person(msgspec.Struct):
    name: str
    age: int


PROMPTS: list[Any] = ["Invent a person.", [{"role": "user", "content": "Another one."}], "Third."]


@pytest.mark.parametrize("dialect", ["vllm", "vllm-guided", "openai", "llamacpp", "sglang"])
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_each_line_is_exactly_what_the_client_sends(
    dialect: str, endpoint: Any, tmp_path: pathlib.Path
) -> None:
    prompts = PROMPTS if endpoint == "chat" else ["a", "b", "c"]
    path = tmp_path / "requests.jsonl"
    count = write_requests(
        path,
        prompts,
        Person,
        model="m",
        dialect=dialect,
        endpoint=endpoint,
        temperature=0,
        max_tokens=64,
    )
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert count == len(lines) == 3
    fake = FakeLLM(models=["m"])
    with fake.serve() as url, lmclient.Client(url, model="m", dialect=dialect) as client:
        for prompt, line in zip(prompts, lines, strict=True):
            client.create(prompt, Person, endpoint=endpoint, temperature=0, max_tokens=64)
            assert set(line) == {"custom_id", "method", "url", "body"}
            assert line["method"] == "POST"
            assert line["url"] == (
                "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"
            )
            # the client reads an unbounded answer as a stream, to watch it for runaways (vLLM
            # watches it itself: repetition_detection, in both); a batch line is never streamed
            sent = dict(fake.last_request.body)
            assert "stream" not in line["body"] and "stream_options" not in line["body"]
            assert sent.pop("stream", None) is (None if dialect == "vllm" else True)
            sent.pop("stream_options", None)
            # the rid the client makes on SGLang, for its abort; a line has none (its custom_id
            # names it, and no one here aborts it)
            rid = sent.pop("rid", None)
            assert (rid is None) is (dialect != "sglang") and "rid" not in line["body"]
            assert line["body"] == sent
    assert [line["custom_id"] for line in lines] == ["request-0", "request-1", "request-2"]


def run_batch(requests: pathlib.Path, results: pathlib.Path, url: str) -> None:
    """What `vllm run-batch` does with the file, against the fake server (in a shuffled order)."""
    lines = [json.loads(line) for line in requests.read_text().splitlines()]
    root = url.removesuffix("/v1")
    with httpx.Client() as http, results.open("w") as out:
        for line in reversed(lines):
            response = http.post(root + line["url"], json=line["body"])
            record = {
                "id": "batch-" + line["custom_id"],
                "custom_id": line["custom_id"],
                "response": {
                    "status_code": response.status_code,
                    "request_id": "r",
                    "body": response.json(),
                },
                "error": None,
            }
            out.write(json.dumps(record) + "\n")


def test_round_trip_through_the_fake_server(tmp_path: pathlib.Path) -> None:
    requests, results = tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    items = [("Invent a person.", Person), ("Pick one.", Literal["a", "b"]), ("Count.", int)]
    count = write_requests(requests, items, model="fake-model", dialect="openai")
    with FakeLLM().serve() as url:
        run_batch(requests, results, url)
    values = read_results(results, [t for _, t in items], dialect="openai")
    assert [type(v) for v in values] == [Person, str, int]  # unwrapped from {"value": ...}
    assert values[1] in ("a", "b")
    as_people = read_results(results, Person, dialect="openai", expected=count)
    assert isinstance(as_people[0], Person)
    assert isinstance(as_people[1], lmclient.ValidationError)  # kept, not raised


def test_malformed_line_and_error_line_are_both_reported(tmp_path: pathlib.Path) -> None:
    requests, results = tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    count = write_requests(
        requests, ["a", "b", "c", "d"], Person, model="fake-model", dialect="vllm"
    )
    with FakeLLM().serve() as url:
        run_batch(requests, results, url)
    lines = results.read_text().splitlines()
    by_id = {json.loads(line)["custom_id"]: i for i, line in enumerate(lines)}
    lines[by_id["request-1"]] = '{"custom_id": "request-1", "response": {"status_code": 200, "bo'
    lines[by_id["request-2"]] = json.dumps(
        {
            "custom_id": "request-2",
            "response": None,
            "error": {"code": 400, "message": "context too long"},
        }
    )
    results.write_text("\n".join(lines) + "\n")
    values = read_results(results, Person, dialect="vllm", expected=count)
    assert isinstance(values[0], Person) and isinstance(values[3], Person)
    assert isinstance(values[1], lmclient.ProtocolError)
    assert f"malformed lines: {by_id['request-1'] + 1}" in str(values[1])
    assert (
        isinstance(values[2], lmclient.BadRequestError) and values[2].message == "context too long"
    )


def test_failed_status_in_a_result_line(tmp_path: pathlib.Path) -> None:
    results = tmp_path / "results.jsonl"
    body = {"error": {"message": "bad schema", "type": "BadRequestError", "code": 400}}
    results.write_text(
        json.dumps({"custom_id": "request-0", "response": {"status_code": 400, "body": body}})
        + "\n"
    )
    [value] = read_results(results, Person, dialect="vllm")
    assert isinstance(value, lmclient.BadRequestError) and value.message == "bad schema"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"dialect": "auto"}, ValueError),
        ({"dialect": "vllm", "timeout": 3}, TypeError),
        ({"dialect": "vllm", "token_budget": 100}, TypeError),  # a file has no re-asks to stop
        ({"dialect": "vllm", "temprature": 1}, TypeError),
        ({"dialect": "tgi", "endpoint": "completions"}, lmclient.UnsupportedConstraintError),
        ({"dialect": "vllm", "headers": {"X-Tenant": "a"}}, TypeError),
        ({"dialect": "vllm", "traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}, TypeError),
        ({"dialect": "sglang", "request_id": "r"}, TypeError),  # custom_id names a line
        ({"dialect": "llamacpp", "priority": 1}, lmclient.UnsupportedConstraintError),
    ],
)
def test_bad_input_writes_nothing(
    kwargs: dict[str, Any], error: type, tmp_path: pathlib.Path
) -> None:
    path = tmp_path / "requests.jsonl"
    with pytest.raises(error):
        write_requests(path, ["a"], Person, model="m", **kwargs)
    assert not path.exists()


def test_body_serving_fields_go_in_the_lines(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "requests.jsonl"
    write_requests(path, ["a"], model="m", dialect="sglang", priority=2, cache_salt="s")
    body = msgspec.json.decode(path.read_bytes())["body"]
    assert (body["priority"], body["cache_salt"]) == (2, "s")
