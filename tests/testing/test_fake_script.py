"""When scripted entries apply (``when=``: substring, regex, ``Match``, predicate), and the
order in which requests consume them."""

from __future__ import annotations

import re
from typing import Any

import pytest

from lmclient.testing import FakeLLM, Match, RecordedRequest
from lmclient.testing._queue import Script
from lmclient.testing._script import Reply, matches


def chat(*messages: tuple[str, str], stream: bool = False) -> RecordedRequest:
    body = {"messages": [{"role": r, "content": c} for r, c in messages], "stream": stream}
    return RecordedRequest("POST", "/v1/chat/completions", "chat", {}, body)


def completion(prompt: str) -> RecordedRequest:
    return RecordedRequest("POST", "/v1/completions", "completions", {}, {"prompt": prompt})


REQUEST = chat(("system", "You are terse."), ("user", "Tell me a joke"), ("assistant", "No."),
               ("user", "Please, a joke about cats"))  # fmt: skip


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        (None, True),
        ("about cats", True),
        ("Tell me", False),  # only the last user message is the prompt
        ("terse", False),
        (re.compile(r"\bcats?$"), True),
        (re.compile(r"^a joke"), False),
        (Match(), True),
        (Match(prompt="cats"), True),
        (Match(prompt="terse", role="system"), True),
        (Match(prompt="Tell me", role="user"), True),  # any message of the role
        (Match(prompt=re.compile("^No"), role="assistant"), True),
        (Match(prompt="cats", role="system"), False),
        (Match(role="system"), True),
        (Match(role="tool"), False),
        (Match(endpoint="chat"), True),
        (Match(endpoint="completions"), False),
        (Match(stream=False), True),
        (Match(stream=True), False),
        (Match(prompt="cats", endpoint="chat", stream=False), True),
        (Match(output_type=str), True),  # no constraint: what lmclient sends for str
        (Match(output_type=int), False),
        (lambda request: request.body["messages"][0]["role"] == "system", True),
        (lambda request: False, False),
    ],
    ids=repr,
)
def test_matches(when: Any, expected: bool) -> None:
    assert matches(when, REQUEST) is expected


def test_completion_prompt_is_the_prompt() -> None:
    assert matches("2 + 2", completion("2 + 2 ="))
    assert not matches(Match(role="user"), completion("2 + 2 ="))


def test_counted_entries_first_in_order_then_the_newest_sticky() -> None:
    script = Script()
    old, new = Reply("old sticky"), Reply("new sticky")
    one, two = Reply("one", times=1), Reply("two", times=2)
    for entry in (old, one, new, two):
        script.add(entry)
    taken = [script.take(REQUEST) for _ in range(5)]
    assert taken == [one, two, two, new, new]
    assert script.pending == 0


def test_looking_does_not_use_up() -> None:
    script = Script()
    reply = Reply("once", times=1)
    script.add(reply)
    assert script.reply_for(REQUEST, consume=False) is reply
    assert script.pending == 1
    assert script.reply_for(REQUEST) is reply
    assert script.reply_for(REQUEST) is None


def test_faults_are_skipped_when_only_replies_are_wanted() -> None:
    fake = FakeLLM()
    fault = fake.fail(503)
    reply = fake.reply("ok", times=1)
    assert fake._script.reply_for(REQUEST, consume=False) is reply
    assert fake._script.take(REQUEST) is fault


def test_times_must_be_positive_or_none() -> None:
    with pytest.raises(ValueError, match="times"):
        Script().add(Reply("x", times=0))
