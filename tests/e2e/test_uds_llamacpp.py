"""lmclient over a Unix socket to the real llama.cpp server: llama-server listens on a socket
when a ``--host`` entry ends in ``.sock`` (``tools/server/server-http.cpp``), here beside its
TCP port, which only readiness uses. The clients are given nothing but the socket, so their
base URL is ``http://localhost/v1``, where nothing listens over TCP."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import msgspec
import pytest

import lmclient
from lmclient import CallParams
from scripts import llamacpp

SMALL: CallParams = {"temperature": 0.0, "seed": 1, "max_tokens": 128}
Word = Annotated[str, msgspec.Meta(min_length=1, max_length=16)]
COUNT = lmclient.Choice(["one two three", "1 2 3"])


class Person(msgspec.Struct):
    name: Word
    age: Annotated[int, msgspec.Meta(ge=0, le=120)]


@pytest.fixture(scope="module")
def socket_path() -> Iterator[str]:
    """A second llama-server, on a socket in a short temporary directory; stopped by PID."""
    llamacpp.ensure_installed()
    with tempfile.TemporaryDirectory(prefix="lmc-llama-", dir="/tmp") as directory:
        path = str(Path(directory) / "llama.sock")
        with llamacpp.LlamaServer(parallel=2, ctx=2048, uds=path):
            yield path


def test_generate_and_stream(socket_path: str) -> None:
    with lmclient.Client(uds=socket_path) as client:  # model=None and dialect="auto"
        person = client.generate("Invent a person.", Person, **SMALL)
        assert client.dialect == "llamacpp"  # the probes answered over the socket
        # The probes run at once, so they may have opened more than one connection; the next
        # request reuses one of those.
        pooled = client._transport._pool.connections()
        client.generate("Invent a person.", Person, **SMALL)
        now = client._transport._pool.connections()
        assert len(now) == len(pooled) and all(any(c is p for p in pooled) for c in now)
        # llama-server closes a connection after a streamed response (recorded over TCP too),
        # so the stream's connection is not reused after it; the stream itself is whole.
        with client.stream("Invent a person.", Person, **SMALL) as stream:
            deltas = list(stream)
            assert isinstance(stream.value, Person)
            assert "".join(deltas) == stream.text
        assert len(deltas) > 1  # token by token
    assert isinstance(person, Person)


async def test_generate_and_stream_async(socket_path: str) -> None:
    async with lmclient.AsyncClient(uds=socket_path) as client:
        people = await asyncio.wait_for(
            client.generate_many(["Invent a person."] * 2, Person, concurrency=2, **SMALL), 120
        )
        assert client.dialect == "llamacpp"
        async with client.stream("Count to three.", COUNT, **SMALL) as stream:
            deltas = [delta async for delta in stream]
            assert stream.value in ("one two three", "1 2 3")
            assert "".join(deltas) == stream.text
    assert all(isinstance(person, Person) for person in people)
