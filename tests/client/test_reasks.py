"""Opt-in re-asks (``max_reasks``): an invalid answer goes back to the model with the reason,
over real sockets; transport retries and re-asks stay separate layers."""

from __future__ import annotations

import logging
import re

import msgspec
import pytest

import lmclient
from lmclient.testing import FakeLLM


class Person(msgspec.Struct):
    name: str
    age: int


def test_reask_sends_the_bad_answer_and_the_reason_back(fake: FakeLLM) -> None:
    fake.reply_sequence(['{"name": "A", "age": "old"}', '{"name": "A", "age": 3}'])
    with fake.serve() as url, lmclient.Client(url, max_reasks=1) as client:
        response = client.create("Invent a person.", Person)
    assert response.value == Person("A", 3) and response.reasks == 1
    messages = fake.requests[-1].body["messages"]
    assert messages[1] == {"role": "assistant", "content": '{"name": "A", "age": "old"}'}
    assert messages[2]["role"] == "user" and "$.age" in messages[2]["content"]
    assert len(fake.requests[-1].body["messages"]) == 3


async def test_reasks_run_out_and_the_error_carries_every_attempt(fake: FakeLLM) -> None:
    fake.reply_sequence(["x", "y", "z"])
    with fake.serve() as url:
        async with lmclient.AsyncClient(url) as client:
            with pytest.raises(lmclient.ValidationError) as info:
                await client.generate("N?", int, max_reasks=2)
    assert info.value.attempts == ["x", "y", "z"]
    assert len([r for r in fake.requests if r.endpoint == "chat"]) == 3


def test_no_reask_by_default_nor_after_truncation(fake: FakeLLM) -> None:
    fake.reply("x", times=1)
    fake.reply('{"name": "A', finish_reason="length")
    with fake.serve() as url, lmclient.Client(url) as client:
        with pytest.raises(lmclient.ValidationError):
            client.generate("N?", int)
        with pytest.raises(lmclient.TruncatedError):
            client.generate("P?", Person, max_reasks=3)
    assert len([r for r in fake.requests if r.endpoint == "chat"]) == 2


def test_http_errors_are_retried_not_reasked(
    fake: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    fake.reply_error(503, "busy", headers={"retry-after-ms": "1"})
    fake.reply_sequence(["bad", "7"])
    caplog.set_level(logging.DEBUG, logger="lmclient")
    with fake.serve() as url, lmclient.Client(url, api_key="sk-secret-key") as client:
        response = client.create("N?", int, max_reasks=1)
    assert (response.value, response.retries, response.reasks) == (7, 1, 1)
    for request in fake.requests[-2:]:
        assert "busy" not in str(request.body)  # an HTTP error is never pasted into a prompt
    text = caplog.text
    assert "retry 1 of 2" in text and "re-ask 1 of 1" in text
    assert re.search(r"POST /v1/chat/completions -> 200 in \d+\.\d ms \(retry 1", text)
    assert "sk-secret-key" not in text and "N?" not in text and '"bad"' not in text


def test_completions_are_not_reasked(fake: FakeLLM) -> None:
    fake.reply("x")
    with (
        fake.serve() as url,
        lmclient.Client(url) as client,
        pytest.raises(lmclient.ValidationError),
    ):
        client.complete("N?", int, max_reasks=2)
    assert len([r for r in fake.requests if r.endpoint == "completions"]) == 1
