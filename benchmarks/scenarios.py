"""The benchmark scenarios: each is one call, made the way a user of that library would make it.

Every scenario asks the same loopback server (`server.py`) for the same reply and ends with the
same validated value; `check` runs each one once before timing and compares the values, so no
scenario does less work than the others. Clients are created once and kept (connection pools
warm), as a service keeps them.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx
import msgspec
import openai
import pydantic

import lmclient
from lmclient import _call, _core

PROMPT = "Invent a person."
MODEL = "bench-model"
# The call users make: a system and a user message, sampling parameters, a Struct (`realistic`).
SYSTEM = "You write test data. Answer with JSON only."
MESSAGES = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}]
SAMPLING = {"temperature": 0.2, "max_tokens": 256}


# -- the output types, as each library wants them ---------------------------------------------


class Person(msgspec.Struct):
    name: str
    age: int
    email: str
    active: bool


class Record(msgspec.Struct):
    id: int
    name: str
    email: str
    score: float
    active: bool
    tags: list[str]


class PersonModel(pydantic.BaseModel):
    name: str
    age: int
    email: str
    active: bool


class RecordModel(pydantic.BaseModel):
    id: int
    name: str
    email: str
    score: float
    active: bool
    tags: list[str]


RecordsModel = pydantic.TypeAdapter(list[RecordModel])

# Only what a hand-written client reads from a chat completion or a stream chunk.


class _Message(msgspec.Struct):
    content: str | None = None


class _Choice(msgspec.Struct):
    message: _Message


class _Completion(msgspec.Struct):
    choices: list[_Choice]


class _Delta(msgspec.Struct):
    content: str | None = None


class _ChunkChoice(msgspec.Struct):
    delta: _Delta


class _Chunk(msgspec.Struct):
    choices: list[_ChunkChoice]


_completion = msgspec.json.Decoder(_Completion)
_chunk = msgspec.json.Decoder(_Chunk)
_person = msgspec.json.Decoder(Person)
_records = msgspec.json.Decoder(list[Record])

JSON_HEADERS = {"content-type": "application/json"}


_encode = msgspec.json.Encoder().encode


def lmclient_fields(output_type: Any, *, stream: bool = False) -> dict[str, Any]:
    """What lmclient puts in a request body for ``output_type`` besides the model, the messages
    and the streaming flags (its structured-output constraint, as vLLM's dialect spells it),
    taken from lmclient's own prepared request: the hand-written clients send the same, so that
    every scenario asks the same of the server and encodes as much."""
    core = _core.ClientCore("http://bench/v1", MODEL, dialect="vllm")
    call = core.prepare(
        "generate", PROMPT, output_type, "chat", {}, reading="stream" if stream else "call"
    )
    assert call.request.body is not None
    body = msgspec.json.decode(call.request.body)
    return {k: v for k, v in body.items() if k not in _OWN_FIELDS}


_OWN_FIELDS = frozenset({"model", "messages", "stream", "stream_options"})
PERSON_FIELDS = lmclient_fields(Person)
RECORDS_FIELDS = lmclient_fields(list[Record], stream=True)


def request_body(fields: dict[str, Any], prompt: str = PROMPT, *, stream: bool = False) -> bytes:
    """What the hand-written clients send: the fields lmclient sends for vLLM (`lmclient_fields`),
    encoded on every call, as a real client must (the prompt varies from call to call)."""
    body: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": prompt}]}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    body.update(fields)
    return _encode(body)


def realistic_body(fields: dict[str, Any], prompt: str = PROMPT) -> bytes:
    """`request_body` for the realistic call: a system and a user message and the sampling
    parameters, as lmclient sends them (the messages list is built anew, as a caller's is)."""
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
        **SAMPLING,
    }
    body.update(fields)
    return _encode(body)


def realistic_messages(prompt: str = PROMPT) -> list[dict[str, str]]:
    """The realistic call's prompt, built per call as a caller builds it."""
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]


@dataclass
class Scenario:
    """One call: ``call`` for sync scenarios, ``acall`` for async ones (run on one loop)."""

    name: str
    call: Callable[[], Any] | None = None
    acall: Callable[[], Awaitable[Any]] | None = None
    close: Callable[[], Any] | None = None


# -- the raw floors ------------------------------------------------------------------------------
#
# What any correct client must do per call, and nothing more: encode the request body (the prompt
# varies from call to call, so it cannot be prebuilt), frame it with its Content-Length, check the
# status, frame the response (by its Content-Length; a stream by its chunk sizes), decode the body
# with msgspec into the few fields a hand-written client reads, and the content into the output
# type. No general HTTP parsing: these clients know what this server sends (lower-case header
# names, one SSE event per `data:` line, no trailers), which a real client cannot assume; so a
# real client can only come close to them, never under them. benchmarks/README.md says exactly
# what each one does.


def _request_head(port: int, path: str) -> bytes:
    """The request line and headers up to the Content-Length value: fixed per client."""
    return (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
        "content-type: application/json\r\ncontent-length: "
    ).encode()


def _frame(head: bytes, body: bytes) -> bytes:
    return b"%s%d\r\n\r\n%s" % (head, len(body), body)


def _sized_body(data: bytes) -> tuple[int, int] | None:
    """(body start, body end) of a response framed by its Content-Length, once its head is in
    ``data``; None before. Only a 200 is an answer here."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return None
    if not data.startswith(b"HTTP/1.1 200 "):
        raise RuntimeError(f"unexpected response {data[:40]!r}")
    at = data.find(b"content-length: ", 0, end)
    return end + 4, end + 4 + int(data[at + 16 : data.find(b"\r\n", at)])


class RawClient:
    """The sync floor: one persistent blocking socket; the response framed by its Content-Length
    (no general HTTP parsing).

    A correct client must not wait forever for a server: the kernel's send and receive timeouts
    bound every ``send``/``recv`` here, set once. (Python's own ``settimeout`` would poll before
    every send and receive, two more system calls per call.)"""

    def __init__(self, port: int, path: str, timeout: int = 600) -> None:
        self.head = _request_head(port, path)
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if sys.platform != "win32":
            limit = struct.pack("@ll", timeout, 0)  # struct timeval
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, limit)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, limit)

    def fetch(self, body: bytes) -> bytes:
        """Send one request, return its response body."""
        recv = self.sock.recv
        self.sock.sendall(_frame(self.head, body))
        data = recv(65536)
        while (framing := _sized_body(data)) is None:
            data += recv(65536)
        start, stop = framing
        while len(data) < stop:
            data += recv(65536)
        return data[start:stop]

    def stream_content(self, body: bytes) -> str:
        """Send one streaming request; read the chunked SSE response to its end, de-chunking it
        and splitting events as they arrive, and return the joined content of its deltas."""
        recv = self.sock.recv
        self.sock.sendall(_frame(self.head, body))
        data = recv(65536)
        while (end := data.find(b"\r\n\r\n")) < 0:
            data += recv(65536)
        if not data.startswith(b"HTTP/1.1 200 "):
            raise RuntimeError(f"unexpected response {data[:40]!r}")
        pos = end + 4  # the next chunk-size line in data
        events = b""  # de-chunked bytes not yet split into events
        parts: list[str] = []
        ended = False
        while True:
            pieces = []
            while (eol := data.find(b"\r\n", pos)) >= 0:
                size = int(data[pos:eol], 16)
                stop = eol + 2 + size
                if len(data) < stop + 2:
                    break
                if size == 0:  # the last chunk (no trailers here): the response has ended
                    ended = True
                    break
                pieces.append(data[eol + 2 : stop])
                pos = stop + 2
            events += b"".join(pieces)
            cut = events.rfind(b"\n\n")
            if cut >= 0:
                for event in events[:cut].split(b"\n\n"):
                    if event.startswith(b"data: ") and event != b"data: [DONE]":
                        parts += [
                            choice.delta.content
                            for choice in _chunk.decode(event[6:]).choices
                            if choice.delta.content
                        ]
                events = events[cut + 2 :]
            if ended:
                return "".join(parts)
            data = data[pos:] + recv(65536)
            pos = 0

    def close(self) -> None:
        self.sock.close()


class _RawProtocol(asyncio.Protocol):
    """One connection of the async floor: frames each response by its Content-Length in
    `data_received` and hands it to the waiting task."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[bytes] | None = None
        self.buffer = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer + data if self.buffer else data
        framing = _sized_body(buffer)
        if framing is None or len(buffer) < framing[1]:
            self.buffer = buffer
            return
        self.buffer = b""
        assert self.waiter is not None
        self.waiter.set_result(buffer[framing[0] : framing[1]])

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("closed"))


class RawAsyncClient:
    """The async floor: `asyncio.Protocol` connections, kept in a LIFO list and opened as the
    concurrency needs them (so, persistent, one per concurrent task)."""

    def __init__(self, port: int, path: str) -> None:
        self.port = port
        self.head = _request_head(port, path)
        self.idle: list[_RawProtocol] = []
        self.all: list[_RawProtocol] = []

    async def fetch(self, body: bytes) -> bytes:
        """Send one request, return its response body."""
        loop = asyncio.get_running_loop()
        if self.idle:
            conn = self.idle.pop()
        else:
            _, conn = await loop.create_connection(_RawProtocol, "127.0.0.1", self.port)
            self.all.append(conn)
        assert conn.transport is not None
        conn.waiter = loop.create_future()
        conn.transport.write(_frame(self.head, body))
        data = await conn.waiter
        conn.waiter = None
        self.idle.append(conn)
        return data

    def close(self) -> None:
        for conn in self.all:
            if conn.transport is not None:
                conn.transport.close()
        self.all.clear()
        self.idle.clear()


class AiohttpClient:
    """aiohttp's `ClientSession`, created once on first use (it binds to the running loop), with
    a connector sized for the benchmark's concurrency."""

    def __init__(self, url: str, limit: int = 64) -> None:
        self.url = url
        self.limit = limit
        self.session: aiohttp.ClientSession | None = None

    async def post(self, body: bytes) -> bytes:
        session = self.session
        if session is None:
            connector = aiohttp.TCPConnector(limit=self.limit)
            session = self.session = aiohttp.ClientSession(connector=connector)
        async with session.post(self.url, data=body, headers=JSON_HEADERS) as response:
            if response.status != 200:
                raise RuntimeError(f"unexpected status {response.status}")
            return await response.read()

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()


def _sse_data(lines: Iterator[str]) -> Iterator[str]:
    """The data of each SSE event, up to ``[DONE]`` (the servers here send one line each)."""
    for line in lines:
        if line.startswith("data: "):
            if line == "data: [DONE]":
                return
            yield line[6:]


def _person_from_completion(body: bytes) -> Person:
    content = _completion.decode(body).choices[0].message.content
    assert content is not None
    return _person.decode(content)


# -- one call, small structured response ----------------------------------------------------------


def small_call_scenarios(port: int, uds: str | None = None) -> list[Scenario]:
    """The small call by each client; with ``uds`` (the server's Unix socket) lmclient's over the
    socket too, against the same server process."""
    base = f"http://127.0.0.1:{port}/small/v1"
    url = base + "/chat/completions"

    raw = RawClient(port, "/small/v1/chat/completions")

    def raw_floor() -> Person:
        return _person_from_completion(raw.fetch(request_body(PERSON_FIELDS)))

    def raw_realistic() -> Person:
        return _person_from_completion(raw.fetch(realistic_body(PERSON_FIELDS)))

    hx = httpx.Client()

    def httpx_client() -> Person:
        response = hx.post(url, content=request_body(PERSON_FIELDS), headers=JSON_HEADERS)
        return _person_from_completion(response.content)

    transport = httpx.HTTPTransport()

    def httpx_transport() -> Person:
        request = httpx.Request(
            "POST", url, content=request_body(PERSON_FIELDS), headers=JSON_HEADERS
        )
        response = transport.handle_request(request)
        try:
            body = response.read()
        finally:
            response.close()
        return _person_from_completion(body)

    oai = openai.OpenAI(base_url=base, api_key="bench")
    extra = {"structured_outputs": {"json": PersonModel.model_json_schema()}}

    def openai_create() -> PersonModel:
        completion = oai.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": PROMPT}],
            extra_body=extra,
        )
        content = completion.choices[0].message.content
        assert content is not None
        return PersonModel.model_validate_json(content)

    def openai_parse() -> PersonModel:
        completion = oai.chat.completions.parse(
            model=MODEL,
            messages=[{"role": "user", "content": PROMPT}],
            response_format=PersonModel,
        )
        parsed = completion.choices[0].message.parsed
        assert parsed is not None
        return parsed

    lm = lmclient.Client(base, model=MODEL, dialect="vllm")

    def lmclient_sync() -> Person:
        return lm.generate(PROMPT, Person)

    def lmclient_realistic() -> Person:
        return lm.generate(realistic_messages(), Person, **SAMPLING)

    alm = lmclient.AsyncClient(base, model=MODEL, dialect="vllm")

    async def lmclient_async() -> Person:
        return await alm.generate(PROMPT, Person)

    aio = AiohttpClient(url)

    async def aiohttp_post() -> Person:
        return _person_from_completion(await aio.post(request_body(PERSON_FIELDS)))

    scenarios = [
        Scenario("raw socket + msgspec, realistic (floor)", raw_realistic),
        Scenario("lmclient Client.generate, realistic", lmclient_realistic),
        Scenario("raw socket + msgspec (floor)", raw_floor, close=raw.close),
        Scenario("httpx.Client.post + msgspec", httpx_client, close=hx.close),
        Scenario("httpx transport direct + msgspec", httpx_transport, close=transport.close),
        Scenario("openai create + pydantic", openai_create, close=oai.close),
        Scenario("openai parse", openai_parse),
        Scenario("aiohttp ClientSession.post + msgspec", acall=aiohttp_post, close=aio.close),
        Scenario("lmclient Client.generate", lmclient_sync, close=lm.close),
        Scenario("lmclient AsyncClient.generate", acall=lmclient_async, close=alm.aclose),
    ]
    if uds is None:
        return scenarios
    lm_uds = lmclient.Client("http://localhost/small/v1", model=MODEL, dialect="vllm", uds=uds)

    def lmclient_uds() -> Person:
        return lm_uds.generate(PROMPT, Person)

    alm_uds = lmclient.AsyncClient(
        "http://localhost/small/v1", model=MODEL, dialect="vllm", uds=uds
    )

    async def lmclient_uds_async() -> Person:
        return await alm_uds.generate(PROMPT, Person)

    return [
        *scenarios,
        Scenario("lmclient Client.generate, Unix socket", lmclient_uds, close=lm_uds.close),
        Scenario(
            "lmclient AsyncClient.generate, Unix socket",
            acall=lmclient_uds_async,
            close=alm_uds.aclose,
        ),
    ]


# -- streaming: 256 chunks to a validated list -----------------------------------------------------


def stream_scenarios(port: int, chunks: int) -> list[Scenario]:
    base = f"http://127.0.0.1:{port}/sse{chunks}/v1"
    url = base + "/chat/completions"

    raw = RawClient(port, f"/sse{chunks}/v1/chat/completions")

    def raw_stream() -> list[Record]:
        return _records.decode(raw.stream_content(request_body(RECORDS_FIELDS, stream=True)))

    lm = lmclient.Client(base, model=MODEL, dialect="vllm")

    def lmclient_stream() -> list[Record]:
        with lm.stream(PROMPT, list[Record]) as stream:
            return stream.value

    oai = openai.OpenAI(base_url=base, api_key="bench")
    extra = {"structured_outputs": {"json": RecordsModel.json_schema()}}

    def openai_stream() -> list[RecordModel]:
        stream = oai.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": PROMPT}],
            stream=True,
            stream_options={"include_usage": True},
            extra_body=extra,
        )
        parts = [chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices]
        return RecordsModel.validate_json("".join(parts))

    hx = httpx.Client()

    def httpx_stream() -> list[Record]:
        body = request_body(RECORDS_FIELDS, stream=True)
        with hx.stream("POST", url, content=body, headers=JSON_HEADERS) as response:
            parts = [
                choice.delta.content or ""
                for data in _sse_data(response.iter_lines())
                for choice in _chunk.decode(data).choices
            ]
        return _records.decode("".join(parts))

    return [
        Scenario("raw socket + msgspec (floor)", raw_stream, close=raw.close),
        Scenario("httpx.Client.stream + iter_lines + msgspec", httpx_stream, close=hx.close),
        Scenario("openai create(stream=True) + pydantic", openai_stream, close=oai.close),
        Scenario("lmclient Client.stream(...).value", lmclient_stream, close=lm.close),
    ]


# -- decode + validate only: the `large` body, no network -----------------------------------------


def decode_scenarios(large_body: bytes) -> list[Scenario]:
    from openai.types.chat import ChatCompletion

    base = _core.ClientCore("http://bench/v1", MODEL, dialect="vllm", max_response_bytes=1 << 30)
    call = base.prepare("generate", PROMPT, list[Record], "chat", {})
    headers = {"content-type": "application/json"}

    def lmclient_decode() -> list[Record]:
        response = call.finish(200, headers, large_body)
        assert not isinstance(response, _call.Next)
        value: list[Record] = response.value
        return value

    def pydantic_decode() -> list[RecordModel]:
        completion = ChatCompletion.model_validate_json(large_body)
        content = completion.choices[0].message.content
        assert content is not None
        return RecordsModel.validate_json(content)

    return [
        Scenario("pydantic: ChatCompletion + list[RecordModel]", pydantic_decode),
        Scenario("lmclient: Call.finish -> list[Record]", lmclient_decode),
    ]


# -- async throughput: many calls at a fixed concurrency ------------------------------------------


def throughput_scenarios(port: int, concurrency: int) -> list[Scenario]:
    """Async one-call functions; the harness runs many at a fixed concurrency. The clients are
    created here, outside a running loop, and bind to the loop on first use."""
    base = f"http://127.0.0.1:{port}/small/v1"
    url = base + "/chat/completions"

    raw = RawAsyncClient(port, "/small/v1/chat/completions")

    async def raw_async() -> Person:
        return _person_from_completion(await raw.fetch(request_body(PERSON_FIELDS)))

    async def raw_async_realistic() -> Person:
        return _person_from_completion(await raw.fetch(realistic_body(PERSON_FIELDS)))

    alm = lmclient.AsyncClient(base, model=MODEL, dialect="vllm")

    async def lmclient_async() -> Person:
        return await alm.generate(PROMPT, Person)

    async def lmclient_async_realistic() -> Person:
        return await alm.generate(realistic_messages(), Person, **SAMPLING)

    aio = AiohttpClient(url, limit=concurrency)

    async def aiohttp_post() -> Person:
        return _person_from_completion(await aio.post(request_body(PERSON_FIELDS)))

    aoai = openai.AsyncOpenAI(base_url=base, api_key="bench")
    extra = {"structured_outputs": {"json": PersonModel.model_json_schema()}}

    async def openai_async() -> PersonModel:
        completion = await aoai.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": PROMPT}],
            extra_body=extra,
        )
        content = completion.choices[0].message.content
        assert content is not None
        return PersonModel.model_validate_json(content)

    ahx = httpx.AsyncClient()

    async def httpx_async() -> Person:
        response = await ahx.post(url, content=request_body(PERSON_FIELDS), headers=JSON_HEADERS)
        return _person_from_completion(response.content)

    return [
        Scenario("raw asyncio.Protocol + msgspec, realistic (floor)", acall=raw_async_realistic),
        Scenario("lmclient AsyncClient.generate, realistic", acall=lmclient_async_realistic),
        Scenario("raw asyncio.Protocol + msgspec (floor)", acall=raw_async, close=raw.close),
        Scenario("httpx.AsyncClient (defaults) + msgspec", acall=httpx_async, close=ahx.aclose),
        Scenario("openai.AsyncOpenAI + pydantic", acall=openai_async, close=aoai.close),
        Scenario("aiohttp ClientSession.post + msgspec", acall=aiohttp_post, close=aio.close),
        Scenario("lmclient AsyncClient.generate", acall=lmclient_async, close=alm.aclose),
    ]


def same_value(a: Any, b: Any) -> bool:
    """Whether two scenarios' results are the same value (msgspec Struct vs pydantic model)."""
    return bool(msgspec.to_builtins(_plain(a)) == msgspec.to_builtins(_plain(b)))


def _plain(value: Any) -> Any:
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
