"""Test code that calls an LLM in CI, without a GPU: lmclient's ``fake_llm`` pytest fixture.

    pip install '.[testing]' pytest       # in a clone of lmclient (not yet on PyPI)
    pytest examples/test_with_fake.py

``fake_llm`` is a :class:`lmclient.testing.FakeLLM` served on 127.0.0.1 for each test. Unless a
test scripts a reply, it answers every request with a value that satisfies the constraint the
request carries, so code that asks for a ``Ticket`` gets a valid ``Ticket``.
"""

from __future__ import annotations

from typing import Literal

import httpx
import msgspec
import pytest

import lmclient
from lmclient.testing import FakeLLM, Match

# -- the code under test (in a real project, imported from your package) ------------------------


class Ticket(msgspec.Struct):
    title: str
    priority: Literal["low", "medium", "high"]
    tags: list[str] = []


def file_ticket(client: lmclient.Client, email: str) -> Ticket:
    """Turn a support email into a ticket."""
    messages = [
        {"role": "system", "content": "You file support tickets from emails."},
        {"role": "user", "content": email},
    ]
    return client.generate(messages, Ticket, temperature=0)


def is_urgent(client: lmclient.Client, email: str) -> bool:
    answer: str = client.generate(f"Is this email urgent? {email}", Literal["yes", "no"])
    return answer == "yes"


# -- tests ----------------------------------------------------------------------------------


def test_the_reply_is_generated_from_the_output_type(fake_llm: FakeLLM) -> None:
    with lmclient.Client(fake_llm.base_url) as client:
        ticket = file_ticket(client, "The checkout page is down!")
    assert isinstance(ticket, Ticket)
    assert ticket.priority in ("low", "medium", "high")
    # the code asked for a Ticket, once (server probes and /v1/models are not calls)
    fake_llm.assert_called(times=1, with_output_type=Ticket)
    call = fake_llm.calls[0]
    assert call.texts("system") == ["You file support tickets from emails."]
    assert call.body["temperature"] == 0


def test_scripted_replies(fake_llm: FakeLLM) -> None:
    fake_llm.reply(Ticket("Checkout down", "high", ["web"]), when="down")
    fake_llm.reply("yes", when=Match(output_type=Literal["yes", "no"]))
    with lmclient.Client(fake_llm.base_url) as client:
        assert file_ticket(client, "Checkout is down") == Ticket("Checkout down", "high", ["web"])
        assert is_urgent(client, "Checkout is down")


def test_retries_when_the_server_is_busy(fake_llm: FakeLLM) -> None:
    fake_llm.fail(503, times=2, retry_after=0)  # two 503s, then the reply below
    fake_llm.reply("no")
    with lmclient.Client(fake_llm.base_url, max_retries=2) as client:
        assert not is_urgent(client, "Lunch on Friday?")
    fake_llm.assert_called(times=3)


def test_a_stalled_server_times_out(fake_llm: FakeLLM) -> None:
    fake_llm.stall()  # the answer stops halfway, until the server stops
    with (
        lmclient.Client(fake_llm.base_url, timeout=0.5, max_retries=0) as client,
        pytest.raises(lmclient.APITimeoutError),
    ):
        file_ticket(client, "Hello")


@pytest.mark.fake_llm(server="llamacpp", seed=7)
def test_another_server_kind(fake_llm: FakeLLM) -> None:
    with lmclient.Client(fake_llm.base_url) as client:
        assert is_urgent(client, "Fire!") in (True, False)
        assert client.dialect == "llamacpp"  # the fake answered llama.cpp's probe
    assert fake_llm.calls[0].constraint.kind == "grammar"


def test_any_http_client_works(fake_llm: FakeLLM) -> None:
    fake_llm.reply("Hi!")
    response = httpx.post(
        f"{fake_llm.base_url}/chat/completions",
        json={"model": "fake-model", "messages": [{"role": "user", "content": "Hello"}]},
    )
    assert response.json()["choices"][0]["message"]["content"] == "Hi!"
