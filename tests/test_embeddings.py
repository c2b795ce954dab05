"""Embeddings and token counts: the decoding of every answer shape and its malformed kinds, the
input checks and refusals before any request, the exact bodies per dialect, batching (order,
usage, concurrency), retries and limits, sync and async, over real sockets with FakeLLM."""

from __future__ import annotations

import array
import base64
import json
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pytest
import respx

import lmclient
from lmclient import _embeddings
from lmclient._embeddings import ENDPOINTS, decode_embeddings
from lmclient.testing import FakeLLM
from lmclient.testing._embeddings import DIMENSIONS, chat_text, fake_tokens, fake_vector
from tests.helpers import FAKE_SERVER

BASE = "http://embed.test/v1"


def b64(values: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode()


def body(*items: tuple[int, Any], usage: Any = None) -> bytes:
    data = [{"object": "embedding", "index": i, "embedding": e} for i, e in items]
    return json.dumps({"object": "list", "data": data, "model": "m", "usage": usage}).encode()


# -- decoding -------------------------------------------------------------------------------


def test_base64_and_floats_decode_to_the_same_float32_arrays() -> None:
    values = [0.5, -1.25, 3.0e-8, 123456.789]
    as_floats = decode_embeddings(body((0, values)), 1).vectors[0]
    as_base64 = decode_embeddings(body((0, b64(values))), 1).vectors[0]
    assert isinstance(as_base64, array.array) and as_base64.typecode == "f"
    assert as_base64 == as_floats == array.array("f", values)
    assert bytes(memoryview(as_base64)) == struct.pack("<4f", *values)  # a buffer, as numpy reads


def test_vectors_come_in_input_order_by_index_whatever_the_answer_order() -> None:
    answer = body((2, b64([2.0])), (0, [0.0]), (1, b64([1.0])))
    decoded = decode_embeddings(answer, 3)
    assert [list(v) for v in decoded.vectors] == [[0.0], [1.0], [2.0]]


def test_big_endian_hosts_swap_the_little_endian_wire_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_embeddings, "_LITTLE", False)
    swapped = decode_embeddings(body((0, b64([1.0]))), 1).vectors[0]
    assert swapped.tobytes() == struct.pack(">f", 1.0)  # what a big-endian host reads as 1.0


@pytest.mark.parametrize(
    ("answer", "expected", "dimensions", "message"),
    [
        (b"{not json", 1, None, "unexpected embeddings body"),
        (b'{"data": "x"}', 1, None, "unexpected embeddings body"),
        (body((0, "@@@not base64@@@")), 1, None, "unexpected embeddings body"),
        (body((0, [1.0, "x"])), 1, None, "unexpected embeddings body"),
        (body((0, base64.b64encode(b"12345").decode())), 1, None, "not whole float32"),
        (body((0, [1.0])), 2, None, "1 embeddings for 2 inputs"),
        (body((0, [1.0]), (1, [1.0]), (2, [1.0])), 2, None, "3 embeddings for 2 inputs"),
        (body((0, [1.0]), (0, [1.0])), 2, None, "index 0 is out of place"),
        (body((0, [1.0]), (2, [1.0])), 2, None, "index 2 is out of place"),
        (body((0, [1.0]), (-1, [1.0])), 2, None, "index -1 is out of place"),
        (body((0, [1.0, 2.0]), (1, b64([1.0]))), 2, None, "embedding 1 has 1 dimensions"),
        (body((0, [1.0, 2.0])), 1, 3, "may ignore dimensions"),
        (body((0, [1.0]), usage={"prompt_tokens": -2}), 1, None, r"`int` >= 0 - at `\$.usage"),
    ],
)
def test_a_malformed_answer_is_a_protocol_error_carrying_the_body(
    answer: bytes, expected: int, dimensions: int | None, message: str
) -> None:
    with pytest.raises(lmclient.ProtocolError, match=message) as caught:
        decode_embeddings(answer, expected, dimensions)
    assert caught.value.body == answer


def test_batches_of_different_sizes_are_a_protocol_error() -> None:
    first = decode_embeddings(body((0, [1.0, 2.0])), 1)
    second = decode_embeddings(body((0, [1.0])), 1)
    with pytest.raises(lmclient.ProtocolError, match=r"differ in size: \[1, 2\]"):
        _embeddings.EmbeddingJob.result([first, second])


def test_usage_is_summed_and_none_when_a_request_reported_none() -> None:
    usage = {"prompt_tokens": 2, "total_tokens": 2}
    with_usage = decode_embeddings(body((0, [1.0]), usage=usage), 1)
    without = decode_embeddings(body((0, [1.0])), 1)
    summed = _embeddings.EmbeddingJob.result([with_usage, with_usage])
    assert summed.usage == lmclient.Usage(prompt_tokens=4, total_tokens=4)
    assert _embeddings.EmbeddingJob.result([with_usage, without]).usage is None


# -- input checks: before any request ---------------------------------------------------------


@pytest.mark.parametrize(
    ("texts", "kwargs", "error", "message"),
    [
        ("one text", {}, TypeError, r"not a single str: pass \[text\]"),
        (b"bytes", {}, TypeError, "not a single str"),
        (iter(["a"]), {}, TypeError, "sequence of str"),
        (["a", 1], {}, TypeError, "each text must be a str, not int"),
        (["a"], {"model": 3}, TypeError, "model must be a str"),
        (["a"], {"dimensions": 0}, ValueError, "dimensions must be a positive int"),
        (["a"], {"dimensions": True}, ValueError, "dimensions must be a positive int"),
        (["a"], {"batch_size": 0}, ValueError, "batch_size must be a positive int"),
        (["a"], {"concurrency": 0}, ValueError, "concurrency must be a positive int"),
        (["a"], {"timeout": "1"}, TypeError, "timeout must be"),
        (["a"], {"deadline": -1}, ValueError, "deadline must be a positive number"),
        (["a"], {"max_retries": -1}, ValueError, "max_retries must not be negative"),
    ],
)
def test_bad_input_raises_before_any_request(
    fake: FakeLLM, url: str, texts: Any, kwargs: dict[str, Any], error: type, message: str
) -> None:
    with lmclient.Client(url) as client, pytest.raises(error, match=message):
        client.embed(texts, **kwargs)
    assert fake.requests == []  # not even the probes


def test_tgi_has_no_embeddings_refused_before_any_request() -> None:
    fake = FakeLLM(server="tgi")
    with (
        fake.serve() as url,
        lmclient.Client(url, model="m", dialect="tgi") as client,
        pytest.raises(lmclient.UnsupportedConstraintError, match="no embeddings endpoint"),
    ):
        client.embed(["a"])
    assert fake.requests == []


def test_dimensions_on_llamacpp_is_refused_before_any_request() -> None:
    fake = FakeLLM(server="llamacpp")
    with (
        fake.serve() as url,
        lmclient.Client(url, model="m", dialect="llamacpp") as client,
        pytest.raises(lmclient.UnsupportedConstraintError, match="ignore dimensions"),
    ):
        client.embed(["a"], dimensions=8)
    assert fake.requests == []


def test_a_probed_dialect_refuses_after_the_probes_only() -> None:
    fake = FakeLLM(server="llamacpp")
    with (
        fake.serve() as url,
        lmclient.Client(url) as client,
        pytest.raises(lmclient.UnsupportedConstraintError),
    ):
        client.embed(["a"], dimensions=8)
    assert [r.endpoint for r in fake.requests if r.endpoint == "embeddings"] == []


def test_no_texts_no_request() -> None:
    fake = FakeLLM()
    with fake.serve() as url, lmclient.Client(url) as client:
        assert client.embed([]) == []
        assert client.create_embeddings(()) == lmclient.Embeddings([], None, None)
    assert fake.requests == []


# -- per dialect: the exact body sent ---------------------------------------------------------


@pytest.mark.parametrize("dialect", sorted(ENDPOINTS))
@pytest.mark.parametrize("dimensions", [None, 8])
def test_exact_embeddings_body_per_dialect(dialect: str, dimensions: int | None) -> None:
    fake = FakeLLM(server=FAKE_SERVER[dialect])
    endpoints = ENDPOINTS[dialect]
    with fake.serve() as url, lmclient.Client(url, model="fake-model", dialect=dialect) as client:
        refused = not endpoints.embeddings or (dimensions and not endpoints.dimensions)
        if refused:
            with pytest.raises(lmclient.UnsupportedConstraintError):
                client.embed(["a", "b"], dimensions=dimensions)
            assert not [r for r in fake.requests if r.endpoint == "embeddings"]
            return
        vectors = client.embed(["a", "b"], dimensions=dimensions)
    (sent,) = [r for r in fake.requests if r.endpoint == "embeddings"]
    expected: dict[str, Any] = {"model": "fake-model"}
    if endpoints.base64:
        expected["encoding_format"] = "base64"
    if dimensions is not None:
        expected["dimensions"] = dimensions
    assert sent.path == "/v1/embeddings"
    assert sent.body == {**expected, "input": ["a", "b"]}
    assert [list(v) for v in vectors] == [fake_vector(t, dimensions or DIMENSIONS) for t in "ab"]


@pytest.mark.parametrize("dialect", sorted(ENDPOINTS))
def test_exact_tokenize_body_per_dialect(dialect: str) -> None:
    fake = FakeLLM(server=FAKE_SERVER[dialect])
    shape = ENDPOINTS[dialect].tokenize
    with fake.serve() as url, lmclient.Client(url, model="fake-model", dialect=dialect) as client:
        if shape is None:
            with pytest.raises(lmclient.UnsupportedConstraintError, match="no tokenizer"):
                client.tokenize("hello")
            with pytest.raises(lmclient.UnsupportedConstraintError, match="no tokenizer"):
                client.count_tokens("hello")
            assert not [r for r in fake.requests if r.endpoint == "tokenize"]
            return
        tokens = client.tokenize("hello world")
        with_bos = client.count_tokens("hello world", add_special_tokens=True)
    first, second = [r for r in fake.requests if r.endpoint == "tokenize"]
    assert first.path == second.path == "/tokenize"  # the server's root, not /v1
    if shape == "llamacpp":
        assert first.body == {"model": "fake-model", "content": "hello world", "add_special": False}
        assert second.body["add_special"] is True
    else:
        assert first.body == {
            "model": "fake-model",
            "prompt": "hello world",
            "add_special_tokens": False,
        }
        assert second.body["add_special_tokens"] is True
    assert tokens == fake_tokens("hello world", False)
    assert with_bos == len(tokens) + 1


MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]


@pytest.mark.parametrize("dialect", sorted(d for d, e in ENDPOINTS.items() if e.tokenize))
def test_count_tokens_of_messages_per_dialect(dialect: str) -> None:
    fake = FakeLLM(server=FAKE_SERVER[dialect])
    with fake.serve() as url, lmclient.Client(url, model="fake-model", dialect=dialect) as client:
        count = client.count_tokens(MESSAGES)
    (sent,) = [r for r in fake.requests if r.endpoint == "tokenize"]
    # the servers' defaults render messages as for a chat completion: nothing else is sent
    assert sent.body == {"model": "fake-model", "messages": MESSAGES}
    if ENDPOINTS[dialect].tokenize == "llamacpp":
        assert sent.path == "/v1/chat/completions/input_tokens"
    else:
        assert sent.path == "/tokenize"
    assert count == len(fake_tokens(chat_text(MESSAGES), True))


async def test_count_tokens_of_messages_async() -> None:
    fake = FakeLLM(server="llamacpp")
    with fake.serve() as url:
        async with lmclient.AsyncClient(url) as client:
            assert await client.count_tokens(MESSAGES) == len(
                fake_tokens(chat_text(MESSAGES), True)
            )


@pytest.mark.parametrize(
    ("prompt", "kwargs", "error", "message"),
    [
        ([], {}, TypeError, "non-empty list of message dicts"),
        ([{"content": "no role"}], {}, TypeError, "'role' str"),
        (MESSAGES, {"add_special_tokens": True}, ValueError, "chat template adds"),
        (3, {}, TypeError, "non-empty list of message dicts"),
    ],
)
def test_count_tokens_checks_messages_first(
    fake: FakeLLM, url: str, prompt: Any, kwargs: dict[str, Any], error: type, message: str
) -> None:
    with lmclient.Client(url) as client, pytest.raises(error, match=message):
        client.count_tokens(prompt, **kwargs)
    assert fake.requests == []


def test_a_malformed_token_count_is_a_protocol_error() -> None:
    fake = FakeLLM(server="llamacpp")
    fake.add_route("POST", "/v1/chat/completions/input_tokens", {"input_tokens": -1})
    with (
        fake.serve() as url,
        lmclient.Client(url) as client,
        pytest.raises(lmclient.ProtocolError, match="unexpected token count body"),
    ):
        client.count_tokens(MESSAGES)


def test_tokenize_checks_its_input_first(fake: FakeLLM, url: str) -> None:
    with lmclient.Client(url) as client:
        with pytest.raises(TypeError, match="takes a str"):
            client.tokenize(["a"])  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="add_special_tokens must be a bool"):
            client.count_tokens("a", add_special_tokens=1)  # type: ignore[arg-type]
    assert fake.requests == []


@pytest.mark.parametrize(
    "answer",
    [{"tokens": [1, 2], "count": 3}, {"tokens": "12"}, {"count": 2}],
    ids=["count-mismatch", "not-a-list", "no-tokens"],
)
def test_a_malformed_tokenize_answer_is_a_protocol_error(answer: dict[str, Any]) -> None:
    fake = FakeLLM()
    fake.add_route("POST", "/tokenize", answer)
    with (
        fake.serve() as url,
        lmclient.Client(url) as client,
        pytest.raises(lmclient.ProtocolError) as caught,
    ):
        client.tokenize("abc")
    assert caught.value.body == msgspec.json.encode(answer)


# -- batching, per-call model, usage, concurrency ------------------------------------------------

TEXTS = [f"text number {i}" for i in range(10)]


def test_batches_keep_the_input_order_and_sum_the_usage() -> None:
    fake = FakeLLM()
    with fake.serve() as url, lmclient.Client(url) as client:
        result = client.create_embeddings(TEXTS, batch_size=3, concurrency=3)
    sent = [r.body["input"] for r in fake.requests if r.endpoint == "embeddings"]
    assert sorted(sent) == sorted([TEXTS[0:3], TEXTS[3:6], TEXTS[6:9], TEXTS[9:]])
    assert [list(v) for v in result.vectors] == [fake_vector(t) for t in TEXTS]
    tokens = sum((len(t) + 3) // 4 for t in TEXTS)
    assert result.usage == lmclient.Usage(prompt_tokens=tokens, total_tokens=tokens)
    assert result.model == "fake-model"


async def test_async_batches_keep_the_input_order() -> None:
    fake = FakeLLM()
    with fake.serve() as url:
        # no probes (they run at once): the requests in flight are the batches
        async with lmclient.AsyncClient(url, model="fake-model", dialect="vllm") as client:
            vectors = await client.embed(TEXTS, batch_size=4, concurrency=2)
            result = await client.create_embeddings(TEXTS[:1])
            tokens = await client.tokenize("abcdefgh")
            count = await client.count_tokens("abcdefgh", add_special_tokens=True)
    assert [list(v) for v in vectors] == [fake_vector(t) for t in TEXTS]
    assert list(result.vectors[0]) == fake_vector(TEXTS[0])
    assert tokens == fake_tokens("abcdefgh", False) and count == 3
    assert len([r for r in fake.requests if r.endpoint == "embeddings"]) == 4
    assert fake.max_in_flight <= 2


def test_concurrency_bounds_the_requests_in_flight() -> None:
    fake = FakeLLM()
    with fake.serve() as url, lmclient.Client(url, model="fake-model", dialect="vllm") as client:
        client.embed(TEXTS, batch_size=1, concurrency=2)
        assert fake.max_in_flight <= 2
        fake.reset()
        client.embed(TEXTS, batch_size=1, concurrency=1)
        assert fake.max_in_flight == 1


def test_the_model_can_be_chosen_per_call() -> None:
    fake = FakeLLM(models=["fake-model", "other"])
    with fake.serve() as url, lmclient.Client(url, model="fake-model") as client:
        client.embed(["a"], model="other")
        client.tokenize("a", model="other")
        client.embed(["a"])
    models = [r.body["model"] for r in fake.requests if r.endpoint in ("embeddings", "tokenize")]
    assert models == ["other", "other", "fake-model"]


def test_the_fake_embeds_for_any_model_name_unless_models_restricts_it() -> None:
    with FakeLLM().serve() as url, lmclient.Client(url, model="prod-embedder") as client:
        assert len(client.embed(["a"])) == 1
    fake = FakeLLM(models=["one"])
    with (
        fake.serve() as url,
        lmclient.Client(url, model="two") as client,
        pytest.raises(lmclient.NotFoundError),
    ):
        client.embed(["a"])


def test_a_call_that_names_its_model_needs_only_the_probes() -> None:
    """A client without a model, on a server of several: the call's model is enough."""
    fake = FakeLLM(models=["one", "two"])
    with fake.serve() as url, lmclient.Client(url) as client:
        client.embed(["a"], model="two")
        client.count_tokens("a", model="two")
        with pytest.raises(lmclient.LMClientError, match="exactly one model"):
            client.embed(["a"])
    sent = [r.body["model"] for r in fake.requests if r.endpoint in ("embeddings", "tokenize")]
    assert sent == ["two", "two"]


async def test_a_call_that_names_its_model_needs_only_the_probes_async() -> None:
    fake = FakeLLM(models=["one", "two"])
    with fake.serve() as url:
        async with lmclient.AsyncClient(url) as client:
            await client.tokenize("a", model="one")
            with pytest.raises(lmclient.LMClientError, match="exactly one model"):
                await client.count_tokens("a")


def test_a_float_answer_to_a_base64_request_is_read_too() -> None:
    """An older release that ignores encoding_format (SGLang, Ollama before it read it)."""
    fake = FakeLLM()
    fake.add_route("POST", "/v1/embeddings", json.loads(body((0, [0.25, 0.5]))))
    with fake.serve() as url, lmclient.Client(url) as client:
        assert [list(v) for v in client.embed(["a"])] == [[0.25, 0.5]]


def test_a_server_that_ignores_dimensions_is_caught() -> None:
    fake = FakeLLM(server="generic")  # the fake's generic server reads dimensions: script one
    fake.add_route("POST", "/v1/embeddings", json.loads(body((0, fake_vector("a")))))
    with (
        fake.serve() as url,
        lmclient.Client(url, model="fake-model") as client,
        pytest.raises(lmclient.ProtocolError, match="may ignore dimensions"),
    ):
        client.embed(["a"], dimensions=8)


def test_max_response_bytes_bounds_an_embeddings_answer() -> None:
    fake = FakeLLM()
    with (
        fake.serve() as url,
        lmclient.Client(url, max_response_bytes=100) as client,
        pytest.raises(lmclient.ProtocolError, match="max_response_bytes"),
    ):
        client.embed(["a"], model="fake-model")


def test_the_fake_answers_floats_unless_base64_is_asked_and_honours_dimensions() -> None:
    fake = FakeLLM()
    with fake.serve() as url:
        root = url.removesuffix("/v1")
        plain = httpx.post(url + "/embeddings", json={"input": "a", "dimensions": 4}).json()
        packed = httpx.post(
            url + "/embeddings", json={"input": ["a"], "encoding_format": "base64"}
        ).json()
        bad = httpx.post(url + "/embeddings", json={"input": [], "model": "fake-model"})
        vllm = httpx.post(root + "/tokenize", json={"prompt": "abcde"}).json()
    assert plain["data"][0]["embedding"] == fake_vector("a", 4)
    assert packed["data"][0]["embedding"] == b64(fake_vector("a"))
    assert bad.status_code == 400
    assert vllm == {"count": 3, "max_model_len": 8192, "tokens": fake_tokens("abcde", True)}
    assert [r.endpoint for r in fake.requests] == ["embeddings"] * 3 + ["tokenize"]


def test_the_fake_imitates_each_server() -> None:
    for server, status in (("tgi", 404), ("ollama", 200), ("llamacpp", 200)):
        fake = FakeLLM(server=server)
        with fake.serve() as url:
            answer = httpx.post(url + "/embeddings", json={"input": "a", "dimensions": 4})
        assert answer.status_code == status
        if server == "llamacpp":  # reads no dimensions
            assert len(answer.json()["data"][0]["embedding"]) == DIMENSIONS
    fake = FakeLLM(server="llamacpp")
    with fake.serve() as url:
        tokens = httpx.post(url.removesuffix("/v1") + "/tokenize", json={"content": "abcde"})
    assert tokens.json() == {"tokens": fake_tokens("abcde", False)}  # llama.cpp's default


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A server that accepts connections and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"


def test_a_batch_that_outlives_the_deadline_fails_the_call(silent_url: str) -> None:
    client = lmclient.Client(silent_url, model="m", dialect="vllm", max_retries=3)
    started = time.monotonic()
    with client, pytest.raises(lmclient.APITimeoutError):
        client.embed(TEXTS, batch_size=2, concurrency=1, deadline=0.3)
    assert time.monotonic() - started < 10  # a hang guard: retries stop at the deadline


async def test_a_batch_that_outlives_the_deadline_fails_the_call_async(silent_url: str) -> None:
    async with lmclient.AsyncClient(silent_url, model="m", dialect="llamacpp") as client:
        with pytest.raises(lmclient.APITimeoutError):
            await client.embed(TEXTS, batch_size=2, concurrency=2, deadline=0.3)
        with pytest.raises(lmclient.APITimeoutError):
            await client.count_tokens("abc", timeout=0.3, max_retries=0)


# -- retries (respx: one answer then another) ---------------------------------------------------


def test_a_failed_batch_is_retried_like_any_call(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(BASE + "/embeddings").mock(
        side_effect=[
            httpx.Response(503, json={"error": {"message": "busy"}}, headers={"retry-after": "0"}),
            httpx.Response(200, content=body((0, b64([1.0, 2.0])))),
        ]
    )
    with lmclient.Client(BASE, model="m", dialect="vllm") as client:
        assert [list(v) for v in client.embed(["a"])] == [[1.0, 2.0]]
    assert route.call_count == 2


def test_a_malformed_answer_is_not_retried(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(BASE + "/embeddings").mock(
        return_value=httpx.Response(200, content=b'{"data": []}')
    )
    with lmclient.Client(BASE, model="m", dialect="vllm") as client:
        with pytest.raises(lmclient.ProtocolError, match="0 embeddings for 1 inputs"):
            client.embed(["a"])
        with pytest.raises(lmclient.BadRequestError):
            route.mock(return_value=httpx.Response(400, json={"error": {"message": "no"}}))
            client.embed(["a"], max_retries=5)
    assert route.call_count == 2
