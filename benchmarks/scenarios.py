"""The benchmark scenarios: each is one call, made the way a user of that library would make it.

Every scenario asks the same loopback server (`server.py`) for the same reply and ends with the
same validated value; `check` runs each one once before timing and compares the values, so no
scenario does less work than the others. Clients are created once and kept (connection pools
warm), as a service keeps them.
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec
import openai
import pydantic

import lmclient
from lmclient import core

PROMPT = "Invent a person."
MESSAGES = [{"role": "user", "content": PROMPT}]
MODEL = "bench-model"


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

PERSON_SCHEMA = msgspec.json.schema(Person)
RECORDS_SCHEMA = msgspec.json.schema(list[Record])
JSON_HEADERS = {"content-type": "application/json"}


def request_body(schema: dict[str, Any], *, stream: bool = False) -> bytes:
    """What the hand-written clients send: the fields lmclient sends for vLLM."""
    body: dict[str, Any] = {"model": MODEL, "messages": MESSAGES}
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    body["structured_outputs"] = {"json": schema}
    return msgspec.json.encode(body)


@dataclass
class Scenario:
    """One call: ``call`` for sync scenarios, ``acall`` for async ones (run on one loop)."""

    name: str
    call: Callable[[], Any] | None = None
    acall: Callable[[], Awaitable[Any]] | None = None
    close: Callable[[], Any] | None = None


# -- raw socket floor -----------------------------------------------------------------------------


class RawClient:
    """The floor: one persistent socket, the request bytes prebuilt, the response framed by its
    Content-Length with no general HTTP parsing, then the same msgspec decoding as by hand."""

    def __init__(self, port: int, path: str, body: bytes) -> None:
        self.request = (
            f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        ).encode() + body
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def fetch(self) -> bytes:
        self.sock.sendall(self.request)
        data = self.sock.recv(262144)
        while (end := data.find(b"\r\n\r\n")) < 0:
            data += self.sock.recv(262144)
        at = data.find(b"content-length: ")
        total = end + 4 + int(data[at + 16 : data.find(b"\r\n", at)])
        while len(data) < total:
            data += self.sock.recv(262144)
        return data[end + 4 : total]

    def close(self) -> None:
        self.sock.close()


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


def small_call_scenarios(port: int) -> list[Scenario]:
    base = f"http://127.0.0.1:{port}/small/v1"
    url = base + "/chat/completions"

    raw = RawClient(port, "/small/v1/chat/completions", request_body(PERSON_SCHEMA))

    def raw_floor() -> Person:
        return _person_from_completion(raw.fetch())

    hx = httpx.Client()

    def httpx_client() -> Person:
        response = hx.post(url, content=request_body(PERSON_SCHEMA), headers=JSON_HEADERS)
        return _person_from_completion(response.content)

    transport = httpx.HTTPTransport()

    def httpx_transport() -> Person:
        request = httpx.Request(
            "POST", url, content=request_body(PERSON_SCHEMA), headers=JSON_HEADERS
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

    alm = lmclient.AsyncClient(base, model=MODEL, dialect="vllm")

    async def lmclient_async() -> Person:
        return await alm.generate(PROMPT, Person)

    return [
        Scenario("raw socket + msgspec (floor)", raw_floor, close=raw.close),
        Scenario("httpx.Client.post + msgspec", httpx_client, close=hx.close),
        Scenario("httpx transport direct + msgspec", httpx_transport, close=transport.close),
        Scenario("openai create + pydantic", openai_create, close=oai.close),
        Scenario("openai parse", openai_parse),
        Scenario("lmclient Client.generate", lmclient_sync, close=lm.close),
        Scenario("lmclient AsyncClient.generate", acall=lmclient_async, close=alm.aclose),
    ]


# -- streaming: 256 chunks to a validated list -----------------------------------------------------


def stream_scenarios(port: int, chunks: int) -> list[Scenario]:
    base = f"http://127.0.0.1:{port}/sse{chunks}/v1"
    url = base + "/chat/completions"

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
        body = request_body(RECORDS_SCHEMA, stream=True)
        with hx.stream("POST", url, content=body, headers=JSON_HEADERS) as response:
            parts = [
                choice.delta.content or ""
                for data in _sse_data(response.iter_lines())
                for choice in _chunk.decode(data).choices
            ]
        return _records.decode("".join(parts))

    return [
        Scenario("httpx.Client.stream + iter_lines + msgspec", httpx_stream, close=hx.close),
        Scenario("openai create(stream=True) + pydantic", openai_stream, close=oai.close),
        Scenario("lmclient Client.stream(...).value", lmclient_stream, close=lm.close),
    ]


# -- decode + validate only: the `large` body, no network -----------------------------------------


def decode_scenarios(large_body: bytes) -> list[Scenario]:
    from openai.types.chat import ChatCompletion

    base = core.ClientCore("http://bench/v1", MODEL, dialect="vllm", max_response_bytes=1 << 30)
    call = base.prepare("generate", PROMPT, list[Record], "chat", {})
    headers = {"content-type": "application/json"}

    def lmclient_decode() -> list[Record]:
        value: list[Record] = call.finish(200, headers, large_body).value
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


def throughput_scenarios(port: int) -> list[Scenario]:
    """Async one-call functions; the harness runs many at a fixed concurrency. The clients are
    created here, outside a running loop, and bind to the loop on first use."""
    base = f"http://127.0.0.1:{port}/small/v1"
    url = base + "/chat/completions"

    alm = lmclient.AsyncClient(base, model=MODEL, dialect="vllm")

    async def lmclient_async() -> Person:
        return await alm.generate(PROMPT, Person)

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
        response = await ahx.post(url, content=request_body(PERSON_SCHEMA), headers=JSON_HEADERS)
        return _person_from_completion(response.content)

    return [
        Scenario("httpx.AsyncClient (defaults) + msgspec", acall=httpx_async, close=ahx.aclose),
        Scenario("openai.AsyncOpenAI + pydantic", acall=openai_async, close=aoai.close),
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
