"""The fake sends logprobs when asked, as the server it plays: ``probabilities=True`` works
against it (the answer the most likely), in each server's shape, and a test can script them."""

from __future__ import annotations

import math
from typing import Any, Literal

import httpx
import msgspec
import pytest

import lmclient
from lmclient.testing import FakeLLM
from lmclient.testing._embeddings import fake_tokens
from tests.helpers import FIXTURES, LLAMACPP_LIVE

YES_NO = Literal["yes", "no"]
SERVERS = ["vllm", "vllm-guided", "llamacpp", "sglang", "tgi", "ollama", "generic", None]
ENDPOINTS: dict[str, list[Endpoint]] = {"tgi": ["chat"], "ollama": ["chat"]}  # chat only
Endpoint = Literal["chat", "completions"]
MESSAGES = [{"role": "user", "content": "Is the sky blue?"}]


def _check(probabilities: dict[Any, float], value: Any) -> None:
    assert math.fsum(probabilities.values()) <= 1 + 1e-9
    assert all(chance > 0 for chance in probabilities.values()), probabilities
    assert max(probabilities, key=lambda option: probabilities[option]) == value


def test_probabilities_under_the_fixture(fake_llm: FakeLLM) -> None:
    """The example of docs/output-types.md, as written there, against the `fake_llm` fixture."""
    with lmclient.Client(fake_llm.base_url) as client:
        r = client.create("Is the sky blue?", Literal["yes", "no"], probabilities=True)
    assert r.value in ("yes", "no")
    assert list(r.probabilities) == ["yes", "no"]  # keyed by the options, in the type's order
    _check(r.probabilities, r.value)


@pytest.mark.fake_llm(server="llamacpp", mode="respx")
def test_probabilities_under_the_fixture_on_llamacpp(fake_llm: FakeLLM) -> None:
    with lmclient.Client(fake_llm.base_url) as client:
        r = client.create("Is the sky blue?", Literal["yes", "no"], probabilities=True)
    _check(r.probabilities, r.value)


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("tp", [YES_NO, bool, lmclient.Choice(["Paris", "Parma", "London"])])
def test_probabilities_on_every_server_and_endpoint(server: str | None, tp: Any) -> None:
    endpoints: list[Endpoint] = ["chat", "completions"]
    for endpoint in ENDPOINTS.get(server or "", endpoints):
        for seed in range(3):
            with FakeLLM(server=server, seed=seed).mock() as url, lmclient.Client(url) as client:
                r = client.create("Q?", tp, probabilities=True, endpoint=endpoint)
            assert len(r.probabilities) == (2 if tp in (YES_NO, bool) else 3)
            _check(r.probabilities, r.value)


def test_openai_s_wrapped_choice() -> None:
    with FakeLLM().mock() as url, lmclient.Client(url, dialect="openai") as client:
        r = client.create("Q?", YES_NO, probabilities=True)
    _check(r.probabilities, r.value)


def test_the_same_seed_gives_the_same_probabilities() -> None:
    def once(seed: int) -> dict[Any, float]:
        with FakeLLM(seed=seed).mock() as url, lmclient.Client(url) as client:
            return client.create("Q?", YES_NO, probabilities=True).probabilities

    assert once(3) == once(3)
    assert once(3) != once(4)


def _logprobs(fake: FakeLLM, path: str, body: dict[str, Any]) -> Any:
    response = fake.handle("POST", path, {}, msgspec.json.encode(body))
    assert response.status == 200, response.body
    return msgspec.json.decode(response.body)["choices"][0]["logprobs"]


def _recorded(path: Any) -> Any:
    return msgspec.json.decode(path.read_bytes())["choices"][0]["logprobs"]


def _keys(logprobs: Any) -> tuple[set[str], set[str], set[str]]:
    """The chat shape's keys: of the object, of a token, of an alternative."""
    token = logprobs["content"][0]
    return set(logprobs), set(token), set(token["top_logprobs"][0])


@pytest.mark.parametrize(
    ("server", "recording"),
    [
        ("vllm", FIXTURES / "vllm" / "chat_logprobs_choice.response.json"),
        ("llamacpp", LLAMACPP_LIVE / "chat_logprobs_literal.response.json"),
    ],
)
def test_chat_logprobs_have_the_server_s_shape(server: str, recording: Any) -> None:
    body = {"messages": MESSAGES, "logprobs": True, "top_logprobs": 2}
    choice: dict[str, Any] = {"structured_outputs": {"choice": ["yes", "no"]}}
    if server == "llamacpp":
        choice = {"grammar": 'root ::= "yes" | "no"'}
    sent = _logprobs(FakeLLM(server=server), "/v1/chat/completions", body | choice)
    assert _keys(sent) == _keys(_recorded(recording))
    assert len(sent["content"][0]["top_logprobs"]) == 2


def test_completions_logprobs_have_the_server_s_shape() -> None:
    body = {"prompt": "Is the sky blue?", "logprobs": 2}
    legacy = _logprobs(FakeLLM(server="vllm"), "/v1/completions", body)
    recorded = _recorded(FIXTURES / "vllm" / "completions_greedy_check.response.json")
    assert set(legacy) == set(recorded)  # tokens, token_logprobs, top_logprobs, text_offset
    assert "".join(legacy["tokens"]) == "This is a fake reply."
    assert all(len(top) <= 2 for top in legacy["top_logprobs"])
    grammar = {"grammar": 'root ::= "yes" | "no"'}
    llamacpp = _logprobs(FakeLLM(server="llamacpp"), "/v1/completions", body | grammar)
    recorded = _recorded(LLAMACPP_LIVE / "completions_logprobs_literal.response.json")
    assert _keys(llamacpp) == _keys(recorded)  # llama.cpp answers completions in chat's shape


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": MESSAGES}),
        ("/v1/chat/completions", {"messages": MESSAGES, "logprobs": False}),
        ("/v1/completions", {"prompt": "Hi"}),
    ],
)
def test_no_logprobs_unless_asked(path: str, body: dict[str, Any]) -> None:
    assert _logprobs(FakeLLM(), path, body) is None


@pytest.mark.parametrize("server", ["vllm", "llamacpp", "generic"])
def test_scripted_probabilities(server: str) -> None:
    """Keyed by the options; written where the answer writes its own (a JSON string on a
    server sent a schema)."""
    fake = FakeLLM(server=server)
    fake.reply('"no"' if server == "generic" else "no", probabilities={"yes": 0.3, "no": 0.6})
    with fake.mock() as url, lmclient.Client(url) as client:
        r = client.create("Q?", YES_NO, probabilities=True)
    assert r.value == "no"
    assert r.probabilities == pytest.approx({"yes": 1 / 3, "no": 2 / 3})


def test_scripted_probabilities_need_the_answer_among_them() -> None:
    with pytest.raises(ValueError, match="the answer's option among its keys"):
        FakeLLM().reply("maybe", probabilities={"yes": 0.3, "no": 0.6})


def test_a_reply_scripted_without_them_still_sends_none() -> None:
    fake = FakeLLM()
    fake.reply("no")
    with (
        fake.mock() as url,
        lmclient.Client(url) as client,
        pytest.raises(lmclient.ConfidenceError, match="no logprobs"),
    ):
        client.create("Q?", YES_NO, probabilities=True)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"logprob_token_ids": [1]}, "`logprobs` must be set to true"),
        ({"logprobs": True, "logprob_token_ids": list(range(129))}, "greater than max allowed"),
        ({"logprobs": True, "logprob_token_ids": [-1, 32_000]}, "out-of-vocab token ids"),
    ],
)
def test_vllm_s_400s_for_listed_ids(fields: dict[str, Any], message: str) -> None:
    """Where it plays vLLM 0.32 or later, the fake refuses what vLLM refuses; elsewhere the
    field is one it does not read."""
    body = {"model": "m", "messages": MESSAGES, **fields}
    with FakeLLM(server="vllm").mock() as url:
        answer = httpx.post(f"{url}/chat/completions", json=body)
    assert answer.status_code == 400 and message in answer.text
    with FakeLLM(server="sglang").mock() as url:
        assert httpx.post(f"{url}/chat/completions", json=body).status_code == 200


def test_the_listed_ids_shape_as_vllm_s() -> None:
    """The generated token first, then every listed id once, in the order listed; an id of no
    text among the options at -9999, as vLLM floors a masked token."""
    ids = [fake_tokens(text, False)[0] for text in ("no", "y", "yes")]
    body = {"model": "m", "messages": MESSAGES, "logprobs": True, "logprob_token_ids": ids}
    body["structured_outputs"] = {"choice": ["yes", "no"]}
    fake = FakeLLM(server="vllm")
    fake.reply("yes", probabilities={"yes": 0.75, "no": 0.25})
    with fake.mock() as url:
        answer = httpx.post(f"{url}/chat/completions", json=body).json()
    (first,) = answer["choices"][0]["logprobs"]["content"]
    shown = [(alt["token"], alt["logprob"]) for alt in first["top_logprobs"]]
    assert shown == [
        ("yes", pytest.approx(math.log(0.75))),
        ("no", pytest.approx(math.log(0.25))),
        ("y", -9999.0),
    ]
