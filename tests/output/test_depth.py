"""JSON from a server nested deeper than a bound is refused before msgspec's decoder sees it,
with lmclient's typed error carrying what was received. Issue 26: 100,000-deep content killed
the process (SIGSEGV in msgspec's recursive decoder) in a thread with a 256 KiB stack.

The crash is checked where it happened: in a subprocess (a crash there fails the test instead
of killing pytest), a thread with ``threading.stack_size(256 * 1024)`` calls a client against
the fake (over real loopback sockets), which answers 100,000-deep content, body, stream event
and error body. The bounds themselves are checked in-process (`lmclient._output.depth`)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import msgspec
import pytest

import lmclient
from lmclient._output.depth import COUNTED, MAX_DEPTH, nested_deeper, type_depth
from lmclient.testing import FakeLLM

DEEP = 100_000


class Person(msgspec.Struct):
    name: str
    tags: list[str]


class Tree(msgspec.Struct):
    children: list[Tree]


CHILD = textwrap.dedent(
    """
    import sys, threading
    import lmclient
    from lmclient.testing import FakeLLM

    DEEP = 100_000
    kind = sys.argv[1]
    fake = FakeLLM()
    deep = "[" * DEEP + "]" * DEEP
    if kind == "content":
        fake.reply(deep)
    elif kind == "stream":
        fake.reply(deep, chunk_size=len(deep))
    elif kind == "body":
        fake.add_route("GET", "/v1/models", '{"data": ' + deep + "}")
    else:
        fake.reply_error(500, '{"error": ' + deep + "}")
    outcome = []

    def call():
        with fake.serve() as url:
            with lmclient.Client(url, "m", dialect="vllm", max_retries=0) as client:
                try:
                    if kind == "stream":
                        with client.stream("hi", list) as stream:
                            stream.read()
                    elif kind == "body":
                        client.models()
                    else:
                        client.generate("hi", list)
                except lmclient.LMClientError as exc:
                    received = getattr(exc, "text", None) or getattr(exc, "body", None) or ""
                    outcome.append(f"{type(exc).__name__} {len(received)}: {exc}"[:300])

    threading.stack_size(256 * 1024)
    thread = threading.Thread(target=call)
    thread.start()
    thread.join()
    print(outcome[0] if outcome else "no error")
    """
)


@pytest.mark.slow  # a Python process per case
@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("content", "ValidationError"),
        ("stream", "ValidationError|ProtocolError"),
        ("body", "ProtocolError"),
        ("error", "ServerError"),
    ],
)
def test_deep_json_in_a_small_thread_stack(kind: str, error: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, kind], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"the process died ({done.returncode}): {done.stderr[-2000:]}"
    assert any(done.stdout.startswith(e) for e in error.split("|")), done.stdout
    if kind != "error":
        assert "nested deeper than" in done.stdout


@pytest.mark.parametrize(
    ("tp", "depth"),
    [
        (str, 0),
        (int, 0),
        (list[int], 1),
        (Person, 2),
        (list[Person], 3),
        (dict[str, list[int]], 2),
        (Person | None, 2),
        (tuple[int, list[int]], 2),
        (Tree, MAX_DEPTH),  # recursive
        (Any, MAX_DEPTH),
        (dict[str, Any], MAX_DEPTH),
    ],
)
def test_type_depth(tp: Any, depth: int) -> None:
    assert type_depth(tp) == depth


DEEP_ENOUGH = COUNTED + 1  # text with more brackets than COUNTED is measured


@pytest.mark.parametrize(
    ("text", "bound", "deeper"),
    [
        ("[]", 0, False),  # few brackets: not measured (msgspec checks the type)
        ("[" * COUNTED + "]" * COUNTED, 1, False),
        ("[" * DEEP_ENOUGH + "]" * DEEP_ENOUGH, MAX_DEPTH, True),
        ("[" * DEEP_ENOUGH + "]" * DEEP_ENOUGH, DEEP_ENOUGH, False),
        ('[{"a": [1, {"b": []}]}' + ", []" * 300 + "]", 5, False),  # many brackets, shallow
        ('[{"a": [1, {"b": []}]}' + ", []" * 300 + "]", 4, True),
        ('"' + "[" * 500 + '"', 0, False),  # brackets inside a string do not nest
        ('["\\"' + "[" * 500 + '", "]"]', 1, False),  # nor after an escaped quote
        (b"[" * 300 + b"]" * 300, 299, True),
    ],
)
def test_nested_deeper(text: str | bytes, bound: int, deeper: bool) -> None:
    assert nested_deeper(text, bound) is deeper


def test_output_deeper_than_its_type_is_a_validation_error() -> None:
    """A Person is 2 deep: an answer with more brackets than `COUNTED` nested 3 deep or more
    cannot be one (whatever its unknown field holds). With fewer, msgspec skips the field."""
    deep = '{"name": "a", "tags": [], "extra": ' + "[" * 300 + "]" * 300 + "}"
    fake = FakeLLM()
    fake.reply_sequence([deep, '{"name": "a", "tags": [], "extra": [[1]]}'])
    with fake.serve() as url, lmclient.Client(url, "m", dialect="vllm", max_retries=0) as client:
        with pytest.raises(lmclient.ValidationError, match="nested deeper than 2") as caught:
            client.generate("hi", Person)
        assert caught.value.text == deep
        assert client.generate("hi", Person) == Person("a", [])
