"""Confidence for choices (`create(..., probabilities=True)`, `lmclient._confidence`): the
fields each dialect is sent, the refusals before any request, the arithmetic on recorded real
bodies (vLLM 0.32, llama.cpp) and on the shapes the recorded ones do not cover, and both
clients over real sockets against the fake."""

from __future__ import annotations

import asyncio
import enum
import json
import math
from typing import Any, Literal

import httpx
import msgspec
import pytest
import respx

import lmclient
from lmclient import Choice, _confidence, _core, errors
from lmclient._call import Next
from lmclient._dialects import DIALECTS
from lmclient._output.types import compile_output
from lmclient._wire.protocol import ChatCompletion, TokenLogprob, TopLogprob, Usage
from lmclient.testing import FakeLLM
from tests.helpers import ANIMALS, FIXTURES, LLAMACPP_LIVE, answered, body_of, make_core

YES_NO = Literal["yes", "no"]


class Mood(enum.Enum):
    HAPPY = "happy"
    SAD = "sad"


def tokens(*steps: tuple[str, float, dict[str, float]]) -> list[TokenLogprob]:
    """The answer's tokens: each its text, logprob and alternatives (the token itself among
    them, as servers send it)."""
    return [
        TokenLogprob(text, lp, [TopLogprob(text, lp)] + [TopLogprob(t, a) for t, a in alts.items()])
        for text, lp, alts in steps
    ]


def chances(
    output_type: Any, text: str, value: Any, path: list[TokenLogprob], dialect: str = "vllm"
) -> dict[Any, float]:
    spec = compile_output(output_type)
    return _confidence.probabilities(spec, DIALECTS[dialect].plan(spec, "chat"), text, value, path)


def recorded(path: Any) -> tuple[str, list[TokenLogprob]]:
    """A recorded chat body's first answer and its tokens."""
    choice = msgspec.json.decode(path.read_bytes(), type=ChatCompletion).choices[0]
    assert choice.message.content is not None and choice.logprobs is not None
    assert choice.logprobs.content is not None
    return choice.message.content, choice.logprobs.content


# -- recorded real bodies --------------------------------------------------------------------


def test_vllm_choice_body() -> None:
    """vLLM 0.32's answer ``y`` ``es`` ``<eos>`` (`structured_outputs.choice`, top 2): ``yes`` is
    settled by its first character, so ``y`` and the one-token alternative ``yes`` both count,
    ``es`` and the forced ``<eos>`` do not; ``no`` is not among the 2 alternatives: 0."""
    text, path = recorded(FIXTURES / "vllm" / "chat_logprobs_choice.response.json")
    found = chances(YES_NO, text, "yes", path)
    assert found == {"yes": 1.0, "no": 0.0}
    assert list(found) == ["yes", "no"]  # the type's order


def test_vllm_bodies_with_20_alternatives() -> None:
    """vLLM 0.32's logprobs come after the constraint: at the first token ``y``, ``yes`` and
    ``ye`` settle yes, ``n`` (two tokens of that text) and ``no`` settle no, and they hold
    nearly all the mass. For the fruits (apple and apricot settled by their third character,
    banana by its first), every way the alternatives show counts: apple is the first token's
    ``apple``, ``app``, ``appl``, then ``a`` × (``pp`` + ``pple``); apricot ``apr``, then ``a`` ×
    (``pr`` + ``pri`` + ``pric``); banana ``b`` (twice), ``banana``, ``ban``, ``ba``. ``ap``
    and ``p`` begin apple without settling it, and are left out."""
    folder = FIXTURES / "vllm"
    text, path = recorded(folder / "chat_probabilities_literal.response.json")
    first = [(t.token, t.logprob) for t in path[0].top_logprobs]
    yes = sum(math.exp(lp) for token, lp in first if token in ("y", "yes", "ye"))
    no = sum(math.exp(lp) for token, lp in first if token in ("n", "no"))
    assert yes + no == pytest.approx(1.0, abs=1e-3)  # after the constraint
    found = chances(YES_NO, text, "yes", path)
    assert found == pytest.approx({"yes": yes / (yes + no), "no": no / (yes + no)})
    assert found["no"] == pytest.approx(0.0266, abs=1e-4)

    text, path = recorded(folder / "chat_probabilities_multitoken.response.json")
    first = [(t.token, t.logprob) for t in path[0].top_logprobs]
    second = [(t.token, t.logprob) for t in path[1].top_logprobs]

    def mass(pairs: list[tuple[str, float]], *texts: str) -> float:
        return sum(math.exp(lp) for token, lp in pairs if token in texts)

    a = math.exp(path[0].logprob)
    apple = mass(first, "apple", "app", "appl") + a * mass(second, "pp", "pple")
    apricot = mass(first, "apr") + a * mass(second, "pr", "pri", "pric")
    banana = mass(first, "b", "banana", "ban", "ba")
    total = apple + apricot + banana
    found = chances(Literal["apple", "apricot", "banana"], text, "apricot", path)
    expected = {"apple": apple / total, "apricot": apricot / total, "banana": banana / total}
    assert found == pytest.approx(expected, rel=1e-12)
    assert found == pytest.approx({"apple": 0.399, "apricot": 0.5369, "banana": 0.0641}, abs=1e-3)


def test_vllm_choice_body_with_a_seen_alternative() -> None:
    """The same body with ``n`` among the first token's alternatives: its share of the two."""
    text, path = recorded(FIXTURES / "vllm" / "chat_logprobs_choice.response.json")
    first = path[0]
    path[0] = TokenLogprob(first.token, first.logprob, [*first.top_logprobs, TopLogprob("n", -2)])
    yes = math.exp(-0.5112431049346924) + math.exp(-1.050675630569458)
    found = chances(YES_NO, text, "yes", path)
    assert found["no"] == pytest.approx(math.exp(-2) / (yes + math.exp(-2)))
    assert math.fsum(found.values()) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("name", "output_type", "endpoint", "expected"),
    [
        ("chat_logprobs_literal", YES_NO, "chat", {"yes": 1.0, "no": 0.0}),
        (
            "chat_logprobs_multitoken",
            Literal["apple", "apricot", "banana"],
            "chat",
            {"apple": 0.0, "apricot": 1.0, "banana": 0.0},
        ),
        ("completions_logprobs_literal", YES_NO, "completions", {"yes": 1.0, "no": 0.0}),
    ],
)
def test_llamacpp_bodies(name: str, output_type: Any, endpoint: Any, expected: Any) -> None:
    """llama.cpp's logprobs are the model's before the grammar: the options' tokens are far
    down its list (``y`` at -5.85, ``yes`` at -6.58, ``Is`` at -1.01), and neither ``n`` nor
    ``no`` is among the 100 alternatives, so the answer's option takes it all. ``apricot`` is
    settled by ``a`` ``pr`` (``ap`` + ``r``); no alternative settles apple or banana. On
    /v1/completions the logprobs come in the chat shape."""
    folder = LLAMACPP_LIVE
    request = msgspec.json.decode((folder / f"{name}.request.json").read_bytes())
    params = {"temperature": 0.0, "seed": 1, "probabilities": True}
    call = make_core(dialect="llamacpp").prepare("create", "Q", output_type, endpoint, params)
    assert {
        k: v for k, v in msgspec.json.decode(call.request.body or b"").items() if "log" in k
    } == {k: v for k, v in request.items() if "log" in k}
    response = answered(call, (folder / f"{name}.response.json").read_bytes())
    assert response.probabilities == expected
    assert response.logprobs is not None and len(response.logprobs[0].top_logprobs) == 100


# -- the arithmetic --------------------------------------------------------------------------


def test_multi_token_options_follow_the_answer_then_its_alternatives() -> None:
    """``apple``/``apricot``/``banana`` answered ``apricot`` as ``ap`` ``ric`` ``ot``: apricot is
    settled at its third character (it shares ``ap`` with apple), so ``ap`` then ``ric`` count;
    apple leaves the answer at ``ric``, where its alternatives ``ple`` and ``p`` both settle it
    (``app`` is apple's alone); banana leaves at the first token (``ban``; ``a`` settles none)."""
    path = tokens(
        ("ap", -0.2, {"ban": -2.0, "a": -4.0}),
        ("ric", -0.7, {"ple": -1.0, "p": -3.0}),
        ("ot", -0.01, {}),
    )
    found = chances(Literal["apple", "apricot", "banana"], "apricot", "apricot", path)
    apple = math.exp(-0.2) * (math.exp(-1.0) + math.exp(-3.0))
    apricot, banana = math.exp(-0.2 - 0.7), math.exp(-2.0)
    total = apple + apricot + banana
    assert found == pytest.approx(
        {"apple": apple / total, "apricot": apricot / total, "banana": banana / total}
    )


def test_an_option_reached_only_through_a_shared_alternative_is_an_error() -> None:
    """``banana`` answered; ``ap`` begins both apple and apricot, and the tokens after it were
    never generated: their probabilities are not in the logprobs, unless a continuation tells
    (below)."""
    path = tokens(("ban", -0.1, {"ap": -2.5}), ("ana", -0.01, {}))
    with pytest.raises(errors.ConfidenceError, match="begins other options too"):
        chances(Literal["apple", "apricot", "banana"], "banana", "banana", path)


def test_a_settling_alternative_beside_a_shared_one_counts_alone() -> None:
    """``apple`` (a one-token alternative) counts; ``ap``, shared with apricot, is left out of
    apple's sum; apricot, reachable only through ``ap``, is an error."""
    path = tokens(("ban", -0.1, {"ap": -2.5, "apple": -3.0}), ("ana", -0.01, {}))
    with pytest.raises(errors.ConfidenceError, match="apricot"):
        chances(Literal["apple", "apricot", "banana"], "banana", "banana", path)
    found = chances(Literal["apple", "banana"], "banana", "banana", path)
    expected = (math.exp(-2.5) + math.exp(-3.0)) / (math.exp(-0.1) + math.exp(-2.5) + math.exp(-3))
    assert found["apple"] == pytest.approx(expected)  # two options: "ap" settles apple here


def test_alternative_tokenizations_of_the_answer_count() -> None:
    """The answer's own option sums the answer's token and its alternatives that settle it."""
    path = tokens(("no", -0.5, {"n": -2.0, "yes": -1.5}))
    found = chances(YES_NO, "no", "no", path)
    no, yes = math.exp(-0.5) + math.exp(-2.0), math.exp(-1.5)
    assert found == pytest.approx({"yes": yes / (yes + no), "no": no / (yes + no)})


def test_json_quoted_options_and_a_wrapper() -> None:
    """Where a choice is sent as a JSON schema the model writes ``"yes"``; OpenAI's object root
    wraps it as ``{"value":"yes"}``: the shared text around the option is the answer's own."""
    path = tokens(('"', 0.0, {}), ("yes", -0.3, {"no": -1.4}), ('"', 0.0, {}))
    found = chances(YES_NO, '"yes"', "yes", path, dialect="generic")
    assert found["no"] == pytest.approx(math.exp(-1.4) / (math.exp(-0.3) + math.exp(-1.4)))
    wrapped = tokens(('{"', 0.0, {}), ('value":"', 0.0, {}), ("yes", -0.3, {"no": -1.4}))
    wrapped += tokens(('"}', 0.0, {}))
    assert chances(YES_NO, '{"value":"yes"}', "yes", wrapped, dialect="openai") == found


def test_bool_enum_and_choice_keys() -> None:
    path = tokens(("true", -0.1, {"false": -2.3}))
    assert set(chances(bool, "true", True, path)) == {True, False}
    path = tokens(("sad", -0.4, {"happy": -1.1}))
    assert list(chances(Mood, "sad", Mood.SAD, path)) == [Mood.HAPPY, Mood.SAD]
    path = tokens(("b", -0.4, {"a": -1.1}))
    assert list(chances(Choice(["a", "b"]), "b", "b", path)) == ["a", "b"]


def test_reasoning_tokens_before_the_answer_are_skipped() -> None:
    """The tokens are walked from the last boundary that spells the answer: thinking that says
    ``yes`` too comes first and is not read."""
    path = tokens(("<think>", 0.0, {}), ("yes", -3.0, {}), ("</think>", 0.0, {}))
    path += tokens(("no", -0.2, {"yes": -1.9}), ("<eos>", 0.0, {}))
    found = chances(YES_NO, "no", "no", path)
    assert found["yes"] == pytest.approx(math.exp(-1.9) / (math.exp(-0.2) + math.exp(-1.9)))


@pytest.mark.parametrize(
    ("path", "match"),
    [
        (None, "no logprobs"),
        ([], "no logprobs"),
        (tokens(("maybe", -0.1, {})), "do not spell the answer"),
        (tokens(("yes", -math.inf, {})), "probability of 0"),
    ],
)
def test_logprobs_that_cannot_tell(path: list[TokenLogprob] | None, match: str) -> None:
    with pytest.raises(errors.ConfidenceError, match=match):
        chances(YES_NO, "yes", "yes", path or [])
    if path is None:
        spec = compile_output(YES_NO)
        plan = DIALECTS["vllm"].plan(spec, "chat")
        with pytest.raises(errors.ConfidenceError, match=match):
            _confidence.probabilities(spec, plan, "yes", "yes", None)


def test_an_answer_without_its_option_written_as_expected() -> None:
    """A JSON string escaped otherwise than msgspec writes it: said, not guessed."""
    path = tokens(('"', 0.0, {}), ("\\u0079es", -0.3, {}), ('"', 0.0, {}))
    with pytest.raises(errors.ConfidenceError, match="does not hold its option"):
        chances(YES_NO, '"\\u0079es"', "yes", path, dialect="generic")


# -- the request -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dialect", "endpoint", "expected"),
    [
        ("vllm", "chat", {"logprobs": True, "top_logprobs": 20}),
        ("llamacpp", "chat", {"logprobs": True, "top_logprobs": 100}),
        ("tgi", "chat", {"logprobs": True, "top_logprobs": 5}),
        ("llamacpp", "completions", {"logprobs": 100}),
    ],
)
def test_fields_per_dialect(dialect: str, endpoint: str, expected: dict[str, Any]) -> None:
    body = body_of(dialect, YES_NO, endpoint, probabilities=True)
    assert {k: body.get(k) for k in ("logprobs", "top_logprobs") if k in body} == expected


def test_the_calls_top_logprobs_over_the_dialects() -> None:
    body = body_of("vllm", YES_NO, probabilities=True, top_logprobs=3, logprobs=False)
    assert (body["logprobs"], body["top_logprobs"]) == (True, 3)
    assert "logprobs" not in body_of("vllm", YES_NO)  # only when asked
    assert "logprobs" not in body_of("vllm", YES_NO, probabilities=False)


def test_refusals_before_any_request() -> None:
    with pytest.raises(TypeError, match="needs a choice output type"):
        body_of("vllm", int, probabilities=True)
    with pytest.raises(errors.ConfidenceError, match="lmstudio servers do not give"):
        body_of("lmstudio", YES_NO, probabilities=True)
    with pytest.raises(ValueError, match="cannot tell 'a' from 'ab'"):
        body_of("llamacpp", Literal["a", "ab"], probabilities=True)
    assert body_of("generic", Literal["a", "ab"], probabilities=True)["logprobs"] is True
    with pytest.raises(TypeError, match="probabilities is a parameter of create"):
        make_core().prepare("generate", "Q", YES_NO, "chat", {"probabilities": True})
    with pytest.raises(TypeError, match="probabilities must be bool"):
        body_of("vllm", YES_NO, probabilities=1)
    # the type is refused before the set-up requests too (no dialect known yet)
    core = _core.ClientCore("http://h/v1", None)
    with pytest.raises(TypeError, match="needs a choice output type"):
        core.validate("create", "Q", str, "chat", {"probabilities": True})


def test_a_response_not_asked_has_no_probabilities() -> None:
    fake = FakeLLM(server="vllm")
    fake.reply("yes")
    with fake.serve() as url, lmclient.Client(url, "m", dialect="vllm") as client:
        response = client.create("Q", YES_NO)
        with pytest.raises(errors.ConfidenceError, match="probabilities=True"):
            _ = response.probabilities


# -- both clients over sockets ---------------------------------------------------------------


def _logprobs_of(path: Any) -> Any:
    return json.loads(path.read_text())["choices"][0]["logprobs"]


VLLM_LOGPROBS = _logprobs_of(FIXTURES / "vllm" / "chat_probabilities_literal.response.json")
VLLM_ANSWER = {"yes": pytest.approx(0.97344, abs=1e-5), "no": pytest.approx(0.02656, abs=1e-5)}


def test_sync_client_over_sockets() -> None:
    fake = FakeLLM(server="vllm")
    fake.reply("yes", logprobs=VLLM_LOGPROBS)
    with fake.serve() as url, lmclient.Client(url, "m", dialect="vllm") as client:
        response = client.create("Sky blue?", YES_NO, probabilities=True)
    assert response.value == "yes"
    assert response.probabilities == VLLM_ANSWER
    sent = fake.last_request.body
    assert (sent["logprobs"], sent["top_logprobs"]) == (True, 20)


async def test_async_client_over_sockets() -> None:
    fake = FakeLLM(server="vllm")
    fake.reply("yes", logprobs=VLLM_LOGPROBS)
    with fake.serve() as url:
        async with lmclient.AsyncClient(url, "m", dialect="vllm") as client:
            response = await client.create("Sky blue?", YES_NO, probabilities=True)
    assert response.probabilities == VLLM_ANSWER


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_server_that_sends_no_logprobs(asynchronous: bool) -> None:
    """The answer stands on the error (``response``); its probabilities cannot."""
    fake = FakeLLM(server="vllm")
    fake.reply("no")
    with fake.serve() as url, pytest.raises(errors.ConfidenceError) as info:
        if asynchronous:

            async def main() -> None:
                async with lmclient.AsyncClient(url, "m", dialect="vllm") as client:
                    await client.create("Q", YES_NO, probabilities=True)

            asyncio.run(main())
        else:
            with lmclient.Client(url, "m", dialect="vllm") as client:
                client.create("Q", YES_NO, probabilities=True)
    assert "no logprobs" in str(info.value)
    assert info.value.response is not None and info.value.response.value == "no"
    assert len(fake.calls) == 1  # not retried, not re-asked


@pytest.mark.parametrize("asynchronous", [False, True])
def test_lm_studio_is_refused_before_sending(asynchronous: bool) -> None:
    fake = FakeLLM()
    with fake.serve() as url, pytest.raises(errors.ConfidenceError, match="nothing was sent"):
        if asynchronous:

            async def main() -> None:
                async with lmclient.AsyncClient(url, "m", dialect="lmstudio") as client:
                    await client.create("Q", YES_NO, probabilities=True)

            asyncio.run(main())
        else:
            with lmclient.Client(url, "m", dialect="lmstudio") as client:
                client.create("Q", YES_NO, probabilities=True)
    assert fake.calls == []


# -- shared prefixes: a continuation of the answer -------------------------------------------

CITIES = Choice(["Paris", "Parma", "London"])
FRUITS = Literal["apple", "apricot", "banana"]


def _replayed(name: str, prompt: str) -> tuple[Any, list[dict[str, Any]]]:
    """The recorded llama.cpp exchange ``name`` replayed through a call: its response, and
    the continuations the call sent (each compared with the one recorded)."""
    folder = LLAMACPP_LIVE
    core = _core.ClientCore("http://h/v1", "gemma-3-270m", dialect="llamacpp")
    params = {"temperature": 0.0, "seed": 1, "probabilities": True}
    call = core.prepare("create", prompt, CITIES, "chat", params)
    assert call.request.body == (folder / f"{name}.request.json").read_bytes()
    body = (folder / f"{name}.response.json").read_bytes()
    sent: list[dict[str, Any]] = []
    while True:
        outcome = call.finish(200, {}, body)
        if not isinstance(outcome, Next):
            return outcome, sent
        assert outcome.invalid is None  # a continuation, not a re-ask
        call = outcome.call
        assert call.request.body is not None
        stem = f"{name}_continued_{len(sent) + 1}"
        assert call.request.body == (folder / f"{stem}.request.json").read_bytes()
        sent.append(msgspec.json.decode(call.request.body))
        body = (folder / f"{stem}.response.json").read_bytes()


def test_llamacpp_continuation_of_a_shared_prefix() -> None:
    """llama.cpp answered ``Paris`` as ``P`` ``ari`` ``s``; Parma's only way among the first
    token's alternatives is ``Par`` (-5.52), which Paris begins too. The continuation from
    ``Par`` (the assistant's message prefilled, one token, no grammar) put ``ma`` at -1.40 and
    ``is`` at -6.19 (and ``m``, ``i`` lower): Parma gets that share of ``Par``'s chance; Paris
    keeps its own ways."""
    text, path = recorded(LLAMACPP_LIVE / "chat_probabilities_shared.response.json")
    spec = compile_output(CITIES)
    plan = DIALECTS["llamacpp"].plan(spec, "chat")
    reading = _confidence.read(spec, plan, text, "Paris", path)
    par = next(t.logprob for t in path[0].top_logprobs if t.token == "Par")
    assert [shared.prefix for shared in reading.waiting] == ["Par"]
    assert reading.waiting[0].chance == pytest.approx(math.exp(par))
    assert reading.blind == {1} and reading.chances[1] == 0.0
    response, sent = _replayed("chat_probabilities_shared", CITIES_PROMPT)
    assert [m["messages"][-1] for m in sent] == [{"role": "assistant", "content": "Par"}]
    assert sent[0]["max_tokens"] == 1 and "grammar" not in sent[0]
    assert (sent[0]["logprobs"], sent[0]["top_logprobs"]) == (True, 100)
    _, after = recorded(LLAMACPP_LIVE / "chat_probabilities_shared_continued_1.response.json")
    ma, is_ = (
        math.fsum(
            math.exp(t.logprob) for t in after[0].top_logprobs if t.token and r.startswith(t.token)
        )
        for r in ("ma", "is")
    )
    assert math.log(ma) == pytest.approx(-1.38, abs=0.01)  # ``ma`` at -1.40, and ``m``
    parma = math.exp(par) * ma / (ma + is_)
    paris = reading.chances[0]
    assert response.probabilities == pytest.approx(
        {"Paris": paris / (paris + parma), "Parma": parma / (paris + parma), "London": 0.0}
    )
    assert response.probabilities["Parma"] == pytest.approx(0.209, abs=1e-3)
    # the continuation's usage is counted in the call's total, not in the answer's own
    assert response.usage is not None and response.usage.total_tokens == 27
    assert response.total_usage is not None and response.total_usage.total_tokens == 52
    assert response.value == "Paris" and response.texts == ["Paris"]


CITIES_PROMPT = "Pick one: Paris, Parma, London. Answer with one word."


def test_llamacpp_two_shared_prefixes() -> None:
    """``P`` and ``Par`` both begin Paris and Parma: one continuation each, the more likely
    first; after ``P`` the model saw no way to either (``.``, then other words), so Parma's
    share is ``Par``'s alone, and the answer still stands."""
    response, sent = _replayed(
        "chat_probabilities_shared_twice", "What is the best: Paris, Parma, London?"
    )
    assert [m["messages"][-1]["content"] for m in sent] == ["P", "Par"]
    assert response.probabilities == pytest.approx(
        {"Paris": 0.8701, "Parma": 0.0714, "London": 0.0586}, abs=1e-4
    )


def test_the_split_of_a_shared_prefix() -> None:
    """``ap`` (-2.5) begins apple and apricot; the continuation settles apple with ``ple`` and
    ``p`` (``app`` is apple's alone), apricot with ``ric``; ``x`` settles neither. Each gets its
    share of ``ap``'s chance; banana (the answer) keeps its own."""
    path = tokens(("ban", -0.1, {"ap": -2.5}), ("ana", -0.01, {}))
    spec = compile_output(FRUITS)
    reading = _confidence.read(spec, DIALECTS["vllm"].plan(spec, "chat"), "banana", "banana", path)
    assert [shared.prefix for shared in reading.waiting] == ["ap"]
    assert reading.waiting[0].chance == pytest.approx(math.exp(-2.5))
    assert reading.blind == {0, 1}
    after = tokens(("ple", -0.5, {"p": -2.0, "ric": -1.0, "x": -0.1}))
    found = _confidence.split(reading, after).result()
    apple, apricot = math.exp(-0.5) + math.exp(-2.0), math.exp(-1.0)
    ap, banana = math.exp(-2.5), math.exp(-0.1)
    total = banana + ap
    assert found == pytest.approx(
        {
            "apple": ap * apple / (apple + apricot) / total,
            "apricot": ap * apricot / (apple + apricot) / total,
            "banana": banana / total,
        }
    )


def test_a_split_counts_the_generated_token_and_shares_with_the_seen() -> None:
    """The continuation's own token counts where the server left it out of the alternatives;
    an option that begins with the prefix and has a way of its own takes part in the split (a
    share of the whole) but gains nothing from it."""
    path = tokens(("ban", -0.1, {"ap": -2.5, "apple": -3.0}), ("ana", -0.01, {}))
    spec = compile_output(FRUITS)
    reading = _confidence.read(spec, DIALECTS["vllm"].plan(spec, "chat"), "banana", "banana", path)
    assert reading.blind == {1}
    after = [TokenLogprob("ric", -1.0, [TopLogprob("ple", -1.0)])]
    split = _confidence.split(reading, after)
    assert split.waiting == ()
    assert split.chances[0] == reading.chances[0] == pytest.approx(math.exp(-3.0))
    assert split.chances[1] == pytest.approx(math.exp(-2.5) / 2)


@pytest.mark.parametrize(
    ("after", "match"),
    [
        (None, "no logprobs with the continuation of 'ap'"),
        (tokens((".", -0.1, {"p": -1.0})), "settles none of the options"),
    ],
)
def test_a_continuation_that_cannot_tell(after: list[TokenLogprob] | None, match: str) -> None:
    """No logprobs, or no alternative that settles an option beginning with the prefix: ``p``
    after ``ap`` begins both ``apple pie`` and ``apple tart`` and settles neither."""
    options = Literal["apple pie", "apple tart", "banana"]
    path = tokens(("ban", -0.1, {"ap": -2.5}), ("ana", -0.01, {}))
    spec = compile_output(options)
    reading = _confidence.read(spec, DIALECTS["vllm"].plan(spec, "chat"), "banana", "banana", path)
    with pytest.raises(errors.ConfidenceError, match=match):
        _confidence.split(reading, after)


def test_more_shared_prefixes_than_options_are_not_continued() -> None:
    path = tokens(("z", -0.1, {"a": -2.0, "ab": -2.1, "abc": -2.2, "abcd": -2.3}))
    with pytest.raises(errors.ConfidenceError, match="more continuations than options"):
        chances(Literal["abcdx", "abcdy", "z"], "z", "z", path)


@pytest.mark.parametrize(
    ("dialect", "extra"),
    [
        ("vllm", {"continue_final_message": True, "add_generation_prompt": False}),
        ("vllm-guided", {"continue_final_message": True, "add_generation_prompt": False}),
        ("sglang", {"continue_final_message": True}),
        ("llamacpp", {}),
    ],
)
def test_the_continuation_body(dialect: str, extra: dict[str, Any]) -> None:
    """The first body, continued from the prefix: one token, the constraint and the stream
    fields dropped, the assistant's message appended, and the dialect's field to continue it."""
    body = body_of(dialect, FRUITS, probabilities=True, max_tokens=9, temperature=0.5)
    spec = compile_output(FRUITS)
    plan = DIALECTS[dialect].plan(spec, "chat")
    more = _confidence.continuation(body | {"n": 1, "stream": False}, "chat", plan, "ap")
    assert more is not None
    kept = {k: v for k, v in body.items() if k not in plan.fields}
    assert kept != body  # the constraint was there
    assert more == kept | extra | {
        "max_tokens": 1,
        "messages": [*body["messages"], {"role": "assistant", "content": "ap"}],
    }


def test_the_continuation_on_completions_and_where_there_is_none() -> None:
    spec = compile_output(FRUITS)
    plan = DIALECTS["llamacpp"].plan(spec, "completions")
    body = body_of("llamacpp", FRUITS, "completions", probabilities=True)
    more = _confidence.continuation(body, "completions", plan, "ap")
    assert more is not None and more["prompt"] == body["prompt"] + "ap"
    assert not set(plan.fields) & set(more) and more["max_tokens"] == 1
    assert _confidence.continuation(body | {"prompt": [1, 2]}, "completions", plan, "ap") is None
    for dialect in ("generic", "openai", "tgi", "ollama"):
        plan = DIALECTS[dialect].plan(spec, "chat")
        assert _confidence.continuation(body_of(dialect, FRUITS), "chat", plan, "ap") is None


def _shared_logprobs() -> tuple[Any, Any]:
    """The recorded llama.cpp logprobs of the answer ``Paris`` and of the continuation."""
    return (
        _logprobs_of(LLAMACPP_LIVE / "chat_probabilities_shared.response.json"),
        _logprobs_of(LLAMACPP_LIVE / "chat_probabilities_shared_continued_1.response.json"),
    )


SHARED_ANSWER = {
    "Paris": pytest.approx(0.7908, abs=1e-4),
    "Parma": pytest.approx(0.2092, abs=1e-4),
    "London": 0.0,
}


@pytest.mark.parametrize("watched", [False, True])
def test_sync_client_sends_the_continuation(watched: bool) -> None:
    """The second request over a socket, with hooks too (their loop is another)."""
    answer, after = _shared_logprobs()
    fake = FakeLLM(server="vllm")
    fake.reply("Paris", logprobs=answer, times=1, usage={"prompt_tokens": 5, "total_tokens": 9})
    fake.reply("ma", logprobs=after, times=1, usage={"prompt_tokens": 6, "total_tokens": 7})
    events: list[Any] = []
    hooks = [events.append] if watched else []
    with fake.serve() as url, lmclient.Client(url, "m", dialect="vllm", hooks=hooks) as client:
        response = client.create(CITIES_PROMPT, CITIES, probabilities=True)
    assert response.value == "Paris" and response.probabilities == SHARED_ANSWER
    first, second = (call.body for call in fake.calls)
    assert "structured_outputs" in first and "structured_outputs" not in second
    assert second["messages"][-1] == {"role": "assistant", "content": "Par"}
    assert (second["continue_final_message"], second["add_generation_prompt"]) == (True, False)
    assert response.total_usage == Usage(prompt_tokens=11, total_tokens=16)
    assert bool(events) is watched


async def test_async_client_sends_the_continuation() -> None:
    answer, after = _shared_logprobs()
    fake = FakeLLM(server="vllm")
    fake.reply("Paris", logprobs=answer, times=1)
    fake.reply("ma", logprobs=after, times=1)
    events: list[Any] = []
    with fake.serve() as url:
        async with lmclient.AsyncClient(url, "m", dialect="vllm") as client:
            response = await client.create(CITIES_PROMPT, CITIES, probabilities=True)
        async with lmclient.AsyncClient(url, "m", dialect="vllm", hooks=[events.append]) as client:
            fake.reply("Paris", logprobs=answer, times=1)
            fake.reply("ma", logprobs=after, times=1)
            watched = await client.create(CITIES_PROMPT, CITIES, probabilities=True)
    assert response.probabilities == watched.probabilities == SHARED_ANSWER
    assert len(fake.calls) == 4 and events


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_server_that_cannot_continue(asynchronous: bool) -> None:
    """TGI has no way to continue an assistant's message: the error, with the answer, after
    the one request."""
    answer, _ = _shared_logprobs()
    fake = FakeLLM(server="tgi")
    fake.reply("Paris", logprobs=answer)
    with fake.serve() as url, pytest.raises(errors.ConfidenceError) as info:
        if asynchronous:

            async def main() -> None:
                async with lmclient.AsyncClient(url, "m", dialect="tgi") as client:
                    await client.create(CITIES_PROMPT, CITIES, probabilities=True)

            asyncio.run(main())
        else:
            with lmclient.Client(url, "m", dialect="tgi") as client:
                client.create(CITIES_PROMPT, CITIES, probabilities=True)
    assert "cannot continue the answer" in str(info.value) and "'Parma'" in str(info.value)
    assert info.value.response is not None and info.value.response.value == "Paris"
    assert len(fake.calls) == 1


def test_a_continuation_without_logprobs_keeps_the_answer() -> None:
    answer, _ = _shared_logprobs()
    fake = FakeLLM(server="vllm")
    fake.reply("Paris", logprobs=answer, times=1)
    fake.reply("ma", times=1)
    with (
        fake.serve() as url,
        lmclient.Client(url, "m", dialect="vllm") as client,
        pytest.raises(errors.ConfidenceError, match="continuation of 'Par'") as info,
    ):
        client.create(CITIES_PROMPT, CITIES, probabilities=True, endpoint="completions")
    assert info.value.response is not None and info.value.response.value == "Paris"
    assert fake.calls[1].body["prompt"].endswith("Par")


# -- vLLM's logprob_token_ids ----------------------------------------------------------------

VLLM = FIXTURES / "vllm"
# The recordings of `create(..., probabilities=True)` on vLLM 0.32 (tests/fixtures/vllm/README):
# name → the output type, its prompt, and the pieces' /tokenize answers.
LISTED: dict[str, tuple[Any, str]] = {
    "chat_probabilities_listed_literal": (YES_NO, "Is the sky blue? Answer yes or no."),
    "chat_probabilities_listed_multitoken": (FRUITS, "Which fruit is orange?"),
    "chat_probabilities_listed_many": (ANIMALS, "Which animal barks?"),
}


def _tokenized(name: str) -> dict[str, list[int]]:
    found: dict[str, list[int]] = json.loads((VLLM / f"{name}.tokenize.json").read_text())
    return found


def _plan(output_type: Any) -> tuple[Any, Any]:
    spec = compile_output(output_type)
    return spec, DIALECTS["vllm"].plan(spec, "chat")


def test_the_listed_fields_on_both_endpoints() -> None:
    """``logprob_token_ids`` instead of ``top_logprobs``, with the ``logprobs`` vLLM requires
    beside it (on completions, any count: vLLM ignores it then)."""
    vllm = DIALECTS["vllm"]
    chat = _confidence.fields("chat", None, vllm, (7, 3))
    assert chat == {"logprobs": True, "logprob_token_ids": [7, 3]}
    completions = _confidence.fields("completions", None, vllm, (7, 3))
    assert completions == {"logprobs": 20, "logprob_token_ids": [7, 3]}
    assert _confidence.fields("chat", None, vllm, ()) == {"logprobs": True, "top_logprobs": 20}


def test_only_a_release_known_to_read_them_is_sent_them() -> None:
    def info(kind: str, version: str | None) -> Any:
        return lmclient.ServerInfo(kind, kind, version)

    assert _confidence.lists(DIALECTS["vllm"], info("vllm", "0.32.0"))
    assert _confidence.lists(DIALECTS["vllm"], info("vllm", "0.33.1rc2"))
    assert not _confidence.lists(DIALECTS["vllm"], info("vllm", "0.31.1"))
    assert not _confidence.lists(DIALECTS["vllm"], info("vllm", None))  # not asked: unknown
    assert not _confidence.lists(DIALECTS["vllm"], None)  # a forced dialect, never probed
    assert not _confidence.lists(DIALECTS["vllm-guided"], info("vllm", "0.10.1"))
    assert not _confidence.lists(DIALECTS["sglang"], info("sglang", "0.5.23"))
    assert not _confidence.lists(DIALECTS["llamacpp"], info("llamacpp", "b11434"))


def test_the_pieces_start_before_the_settling_character() -> None:
    """Every piece of each option from each character before the one that settles it: the
    prefixes of yes/no (settled by their first), and of apple/apricot from their first three
    (``pp``, ``pple``...: Gemma 3 writes ``a`` ``pr`` ``ic`` ``ot``), in the order asked."""
    assert _confidence.pieces(*_plan(YES_NO)) == ("y", "ye", "yes", "n", "no")
    fruits = _confidence.pieces(*_plan(FRUITS))
    assert fruits == tuple(_tokenized("chat_probabilities_listed_multitoken"))
    assert "pple" in fruits and "ana" not in fruits and "cot" not in fruits
    many = Choice([f"{chr(97 + i)}{'x' * 5}" for i in range(26)])  # 26 × 6 prefixes
    assert _confidence.pieces(*_plan(many)) is None


def test_the_listed_ids_once_in_order_and_bounded() -> None:
    assert _confidence.listed_ids([[5], [5, 9], [2]]) == (5, 9, 2)
    assert len(_confidence.listed_ids([[i] for i in range(128)])) == 128
    assert _confidence.listed_ids([[i] for i in range(129)]) == ()  # the top_logprobs way


@pytest.mark.parametrize("name", list(LISTED))
def test_vllm_bodies_with_listed_ids(name: str) -> None:
    """vLLM 0.32's answers to the ids lmclient lists: each token's alternatives are the sampled
    token and every listed id (-9999 where the grammar masks it). The multi-token fruits
    (``a`` ``pr`` ``ic`` ``ot``) need no second request: apple is settled at the first token
    (``app``, ``apple``...) and after ``a`` (``pp``, ``pple``), banana at the first; the
    probabilities are those of the 20 most likely, which held every option's tokens there."""
    output_type, _ = LISTED[name]
    request = json.loads((VLLM / f"{name}.request.json").read_text())
    tokenized = _tokenized(name)
    assert request["logprob_token_ids"] == list(_confidence.listed_ids(list(tokenized.values())))
    assert "top_logprobs" not in request and request["logprobs"] is True
    text, path = recorded(VLLM / f"{name}.response.json")
    spec, plan = _plan(output_type)
    value = spec.decode(text)
    reading = _confidence.read(spec, plan, text, value, path)
    assert reading.waiting == ()  # one request
    found = reading.result()
    assert math.fsum(found.values()) == pytest.approx(1.0)
    assert all(chance > 0.0 for chance in found.values())
    if output_type is YES_NO:  # as from the top 20 (test_vllm_bodies_with_20_alternatives)
        assert found == {
            "yes": pytest.approx(0.97344, abs=1e-5),
            "no": pytest.approx(0.02656, abs=1e-5),
        }
    if output_type is FRUITS:
        expected = {"apple": 0.39900, "apricot": 0.53686, "banana": 0.06414}
        assert found == {k: pytest.approx(v, abs=1e-5) for k, v in expected.items()}


def test_options_past_the_20_most_likely_are_not_0() -> None:
    """22 animals: at the first token their prefixes are more than 20 tokens; the same answer
    cut to its 20 most likely alternatives gives several options 0 (fox, gnu, ...), the listed
    ids give each its share."""
    name = "chat_probabilities_listed_many"
    text, path = recorded(VLLM / f"{name}.response.json")
    listed = chances(ANIMALS, text, "bee", path)
    assert all(chance > 0.0 for chance in listed.values())
    top20 = [
        TokenLogprob(t.token, t.logprob, sorted(t.top_logprobs, key=lambda a: -a.logprob)[:20])
        for t in path
    ]
    cut = chances(ANIMALS, text, "bee", top20)
    zeros = {option for option, chance in cut.items() if chance == 0.0}
    assert {"fox", "gnu", "owl", "zebu"} <= zeros
    assert listed["fox"] > 0.005 and listed["zebu"] > 0.001


def _vllm_routes(mock: Any, name: str, version: str) -> tuple[Any, Any]:
    """respx routes of a vLLM at ``version`` answering the recorded /tokenize and chat body."""
    tokenized = _tokenized(name)
    mock.get("/v1/models").respond(
        json={"object": "list", "data": [{"id": "gemma-3-270m", "owned_by": "vllm"}]}
    )
    mock.get("/version").respond(json={"version": version})

    def tokenize(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        assert body["add_special_tokens"] is False and body["model"] == "gemma-3-270m"
        ids = tokenized[body["prompt"]]
        return httpx.Response(200, json={"count": len(ids), "max_model_len": 2048, "tokens": ids})

    tokens = mock.post("/tokenize").mock(side_effect=tokenize)
    answer = (VLLM / f"{name}.response.json").read_bytes()
    chat = mock.post("/v1/chat/completions").respond(200, content=answer, headers=JSON_TYPE)
    return tokens, chat


JSON_TYPE = {"content-type": "application/json"}


@pytest.mark.parametrize("asynchronous", [False, True])
def test_the_ids_are_asked_once_per_type_and_sent(asynchronous: bool) -> None:
    """Against vLLM 0.32 under respx (the recorded answers): one /tokenize per piece on the
    type's first call, none on the next; each call one chat request carrying the ids, and the
    recorded probabilities."""
    name = "chat_probabilities_listed_multitoken"
    prompt = LISTED[name][1]
    with respx.mock(base_url="http://vllm.test", assert_all_called=False) as mock:
        tokens, chat = _vllm_routes(mock, name, "0.32.0")
        if asynchronous:

            async def main() -> list[Any]:
                async with lmclient.AsyncClient("http://vllm.test/v1") as client:
                    return [await client.create(prompt, FRUITS, probabilities=True) for _ in "ab"]

            responses = asyncio.run(main())
        else:
            with lmclient.Client("http://vllm.test/v1") as client:
                responses = [client.create(prompt, FRUITS, probabilities=True) for _ in "ab"]
    assert tokens.call_count == len(_tokenized(name)) and chat.call_count == 2
    sent = json.loads(chat.calls.last.request.content)
    recorded_body = json.loads((VLLM / f"{name}.request.json").read_text())
    assert sent["logprob_token_ids"] == recorded_body["logprob_token_ids"]
    assert sent["logprobs"] is True and "top_logprobs" not in sent
    for response in responses:
        assert response.value == "apricot"
        assert response.probabilities["apricot"] == pytest.approx(0.53686, abs=1e-5)


def test_older_releases_and_a_calls_own_top_logprobs_keep_the_top_way() -> None:
    name = "chat_probabilities_listed_literal"
    cases: list[tuple[str, Any]] = [("0.31.0", {}), ("0.32.0", {"top_logprobs": 5})]
    for version, params in cases:
        with respx.mock(base_url="http://vllm.test", assert_all_called=False) as mock:
            tokens, chat = _vllm_routes(mock, name, version)
            with lmclient.Client("http://vllm.test/v1") as client:
                client.create("Q", YES_NO, probabilities=True, **params)
        sent = json.loads(chat.calls.last.request.content)
        assert tokens.call_count == 0 and "logprob_token_ids" not in sent
        assert sent["top_logprobs"] == params.get("top_logprobs", 20)


def test_more_than_128_ids_keep_the_top_way_without_asking_again() -> None:
    """70 pieces whose tokens are 140 ids: more than vLLM takes, so the call sends
    ``top_logprobs`` as before, and the next call of the type asks no /tokenize again."""
    options = Choice([f"{chr(97 + i)}{'q' * 6}" for i in range(10)])  # 10 × 7 prefixes
    with respx.mock(base_url="http://vllm.test", assert_all_called=False) as mock:
        _vllm_routes(mock, "chat_probabilities_listed_literal", "0.32.0")
        pieces: dict[str, list[int]] = {}

        def tokenize(request: httpx.Request) -> httpx.Response:
            prompt = json.loads(request.content)["prompt"]
            ids = pieces.setdefault(prompt, [2 * len(pieces), 2 * len(pieces) + 1])
            return httpx.Response(200, json={"count": 2, "tokens": ids})

        tokens = mock.post("/tokenize").mock(side_effect=tokenize)
        answer = {"choices": [{"index": 0, "message": {"content": "aqqqqqq"}}]}
        chat = mock.post("/v1/chat/completions").respond(json=answer)
        with lmclient.Client("http://vllm.test/v1") as client:
            for _ in "ab":
                with pytest.raises(errors.ConfidenceError, match="no logprobs"):
                    client.create("Q", options, probabilities=True)
    assert tokens.call_count == 70 and chat.call_count == 2
    sent = json.loads(chat.calls.last.request.content)
    assert sent["top_logprobs"] == 20 and "logprob_token_ids" not in sent


def test_the_input_is_refused_before_the_set_up_requests() -> None:
    with respx.mock(base_url="http://vllm.test", assert_all_called=False) as mock:
        tokens, chat = _vllm_routes(mock, "chat_probabilities_listed_literal", "0.32.0")
        with lmclient.Client("http://vllm.test/v1") as client:
            client.models()
            with pytest.raises(TypeError, match="temperature"):
                client.create("Q", YES_NO, probabilities=True, temperature="hot")  # type: ignore[call-overload]
            with pytest.raises(TypeError, match="probabilities is a parameter of create"):
                client.generate("Q", YES_NO, probabilities=True)  # type: ignore[call-overload]
    assert tokens.call_count == 0 and chat.call_count == 0


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_the_fake_as_vllm_answers_the_listed_ids(endpoint: Any) -> None:
    """FakeLLM(server="vllm") says 0.33: the set-up's /tokenize (the fake tokenizer: four
    characters a token), one request a call, and the scripted probabilities read back whole,
    multi-token options and all."""
    fake = FakeLLM(server="vllm")
    scripted = {"strawberry": 0.5, "blueberry": 0.3, "banana": 0.1}
    fake.reply("strawberry", probabilities=scripted, times=2)
    kind = Choice(list(scripted))
    with fake.serve() as url, lmclient.Client(url) as client:
        first = client.create("Q", kind, probabilities=True, endpoint=endpoint)
        second = client.create("Q", kind, probabilities=True, endpoint=endpoint)
    assert first.probabilities == second.probabilities
    assert first.probabilities == pytest.approx({k: v / 0.9 for k, v in scripted.items()})
    paths = [call.path for call in fake.requests if call.method == "POST"]
    assert paths.count("/tokenize") == len(_confidence.pieces(*_plan(kind)) or ())
    generations = [call.body for call in fake.calls]
    assert len(generations) == 2 and all("logprob_token_ids" in b for b in generations)
