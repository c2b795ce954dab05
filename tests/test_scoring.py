"""rerank, score and classify: the decoding of each server's answer (recorded and built bodies,
and their malformed kinds), the input checks and refusals before any request, the path and exact
body per dialect and release, sync and async, over real sockets with FakeLLM."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import lmclient
from lmclient._scoring import SCORING, decode_classes, decode_ranking, decode_scores
from lmclient.testing import FakeLLM
from lmclient.testing._scoring import LABELS, fake_classes, fake_score
from tests.helpers import FAKE_SERVER

FIXTURES = Path(__file__).parent / "fixtures" / "scoring"
QUERY = "the cat sat"
DOCUMENTS = ["a dog barked", "the cat sat on the mat", "cat", "the cat sat"]
# The fake's order for QUERY: by shared words, best first (the last is the query itself).
BEST_FIRST = [3, 1, 2, 0]


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def scoring_requests(fake: FakeLLM) -> list[lmclient.testing.RecordedRequest]:
    return [r for r in fake.requests if r.endpoint == "scoring"]


# -- decoding: recorded and built bodies ------------------------------------------------------


def test_vllms_documented_rerank_answer_cut_to_top_n() -> None:
    documents = [
        "The capital of Brazil is Brasilia.",
        "The capital of France is Paris.",
        "Horses and cows are both animals",
    ]
    ranked = decode_ranking(fixture("vllm_rerank_top_n_2.json"), documents, 2)
    assert ranked == [
        lmclient.RerankResult(1, 0.99853515625, documents[1]),
        lmclient.RerankResult(0, 0.0005860328674316406, documents[0]),
    ]


def test_vllms_recorded_answers() -> None:
    """vLLM 0.32 serving Gemma 3 270M as a one-class classifier (tests/fixtures/scoring)."""
    documents = ["A dog barked.", "The cat sat on the mat.", "Bonjour"]
    ranked = decode_ranking(fixture("vllm_0.32_rerank_top_n_2.json"), documents, 2)
    assert [(r.index, r.document) for r in ranked] == [(1, documents[1]), (2, documents[2])]
    assert ranked[0].score == 0.4178701639175415
    scores = decode_scores(fixture("vllm_0.32_score_one_to_many.json"), 2)
    assert scores == [0.14113686978816986, ranked[0].score]  # the same pair, the same score
    assert decode_scores(fixture("vllm_0.32_v1_score_pairs.json"), 2)[1] == 0.033758245408535004
    classes = decode_classes(fixture("vllm_0.32_classify.json"), 2)
    assert classes == [
        lmclient.Classification("LABEL_0", [0.4806695282459259]),
        lmclient.Classification("LABEL_0", [0.0751747116446495]),
    ]


def test_vllms_cut_answer_is_refused_when_every_document_was_asked_for() -> None:
    body = fixture("vllm_rerank_top_n_2.json")
    with pytest.raises(lmclient.ProtocolError, match="2 rerank results for 3 documents") as caught:
        decode_ranking(body, ["a", "b", "c"], None)
    assert caught.value.body == body


def test_llamacpps_recorded_rerank_answer_cut_by_the_server() -> None:
    """llama.cpp b11434 with --reranking (Gemma 3 270M), asked for the best 2 of 3."""
    documents = ["A dog barked.", "The cat sat on the mat.", "Bonjour"]
    ranked = decode_ranking(fixture("llamacpp_rerank_top_n_2.json"), documents, 2)
    assert ranked == [
        lmclient.RerankResult(1, 3.750559091567993, documents[1]),
        lmclient.RerankResult(0, 3.3468286991119385, documents[0]),
    ]


def test_llamacpps_rerank_answer_with_negative_logits() -> None:
    ranked = decode_ranking(fixture("llamacpp_rerank_built.json"), list("abcd"), None)
    assert [(r.index, r.document) for r in ranked] == [(1, "b"), (3, "d"), (0, "a"), (2, "c")]
    assert ranked[0].score == 3.9813 and ranked[-1].score == -9.7213


def test_sglangs_bare_array_rerank_answer() -> None:
    documents = ["hi", "The giant panda (Ailuropoda melanoleuca), sometimes called a panda bear"]
    ranked = decode_ranking(fixture("sglang_rerank_built.json"), documents, 1)
    assert ranked == [lmclient.RerankResult(1, 0.9965, documents[1])]  # the document as given


def test_an_answer_in_input_order_is_sorted_and_cut_by_the_client() -> None:
    """llama.cpp builds before its sort answered every document in order, ignoring top_n."""
    body = json.dumps(
        {"results": [{"index": i, "relevance_score": s} for i, s in enumerate([0.1, 0.9, 0.5])]}
    ).encode()
    ranked = decode_ranking(body, ["a", "b", "c"], 2)
    assert [r.index for r in ranked] == [1, 2]


def test_equal_scores_keep_the_documents_order() -> None:
    body = b'[{"index": 2, "score": 0.5}, {"index": 0, "score": 0.5}, {"index": 1, "score": 0.7}]'
    assert [r.index for r in decode_ranking(body, ["a", "b", "c"], None)] == [1, 0, 2]


def test_vllms_documented_score_answers() -> None:
    assert decode_scores(fixture("vllm_score_one_to_one.json"), 1) == [1.0]  # an int on the wire
    assert decode_scores(fixture("vllm_score_one_to_many.json"), 2) == [0.001094818115234375, 1.0]


def test_the_documented_classify_answer() -> None:
    (only,) = decode_classes(fixture("sglang_classify.json"), 1)
    assert only == lmclient.Classification("Default", [0.565970778465271, 0.4340292513370514])


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (b"{not json", "unexpected rerank body"),
        (b'{"results": "x"}', "unexpected rerank body"),
        (b'[{"index": 0, "score": 1}]', "1 rerank results for 2 documents"),
        (b'[{"index": 0, "score": 1}, {"index": 0, "score": 1}]', "index 0 is out of place"),
        (b'[{"index": 0, "score": 1}, {"index": 2, "score": 1}]', "index 2 is out of place"),
        (b'[{"index": 0, "score": 1}, {"index": 1}]', "result 1 has 0 scores"),
        (
            b'[{"index": 0, "score": 1}, {"index": 1, "score": 1, "relevance_score": 1}]',
            "result 1 has 2 scores",
        ),
        (b"[" * 300 + b"]" * 300, "nested deeper than 128"),
    ],
    ids=["json", "shape", "count", "repeated", "out-of-range", "no-score", "two-scores", "deep"],
)
def test_a_malformed_rerank_answer_is_a_protocol_error(answer: bytes, message: str) -> None:
    with pytest.raises(lmclient.ProtocolError, match=message) as caught:
        decode_ranking(answer, ["a", "b"], None)
    assert caught.value.body == answer


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (b'{"data": [{"index": 0, "score": "high"}]}', "unexpected score body"),
        (b'{"data": [{"index": 0, "score": 1}]}', "1 scores for 2 pairs"),
        (b'{"data": [{"index": 1, "score": 1}, {"index": 1, "score": 1}]}', "index 1 is out"),
    ],
)
def test_a_malformed_score_answer_is_a_protocol_error(answer: bytes, message: str) -> None:
    with pytest.raises(lmclient.ProtocolError, match=message):
        decode_scores(answer, 2)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (b'{"data": [{"index": 0, "probs": [1.0]}]}', "unexpected classify body"),
        (b'{"data": []}', "0 classes for 1 texts"),
        (b'{"data": [{"index": 3, "label": "a", "probs": [1.0]}]}', "index 3 is out"),
        (
            b'{"data": [{"index": 0, "label": "a", "probs": [1.0], "num_classes": 2}]}',
            "1 probabilities for 2 classes",
        ),
    ],
)
def test_a_malformed_classify_answer_is_a_protocol_error(answer: bytes, message: str) -> None:
    with pytest.raises(lmclient.ProtocolError, match=message):
        decode_classes(answer, 1)


# -- input checks: before any request ---------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "args", "kwargs", "error", "message"),
    [
        ("rerank", (3, ["a"]), {}, TypeError, "query must be a str"),
        ("rerank", ("q", "one document"), {}, TypeError, "not a single str"),
        ("rerank", ("q", iter(["a"])), {}, TypeError, "sequence of str, not list_iterator"),
        ("rerank", ("q", ["a", 1]), {}, TypeError, "each of documents must be a str, not int"),
        ("rerank", ("q", ["a"]), {"top_n": 0}, ValueError, "top_n must be a positive int"),
        ("rerank", ("q", ["a"]), {"top_n": True}, ValueError, "top_n must be a positive int"),
        ("rerank", ("q", ["a"]), {"model": 3}, TypeError, "model must be a str"),
        ("rerank", ("q", ["a"]), {"deadline": -1}, ValueError, "deadline must be a positive"),
        ("score", ("a", [1]), {}, TypeError, "each of b must be a str"),
        ("score", (b"a", "b"), {}, TypeError, "a must be a sequence of str, not a single str"),
        ("score", (["a", "b"], ["c"]), {}, ValueError, "one to one: 2 and 1 texts"),
        ("score", ("a", "b"), {"max_retries": -1}, ValueError, "max_retries must not be"),
        ("classify", ("one text",), {}, TypeError, "texts must be a sequence of str"),
        ("classify", (["a"],), {"timeout": "1"}, TypeError, "timeout must be"),
    ],
)
def test_bad_input_raises_before_any_request(
    fake: FakeLLM,
    url: str,
    method: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    error: type,
    message: str,
) -> None:
    with lmclient.Client(url) as client, pytest.raises(error, match=message):
        getattr(client, method)(*args, **kwargs)
    assert fake.requests == []  # not even the probes


def test_no_input_no_request(fake: FakeLLM, url: str) -> None:
    with lmclient.Client(url) as client:
        assert client.rerank("q", []) == []
        assert client.score("a", []) == []
        assert client.score([], "b") == []
        assert client.classify(()) == []
    assert fake.requests == []


# -- per dialect: refused, or the path and the exact body -------------------------------------


@pytest.mark.parametrize("dialect", sorted(SCORING))
def test_rerank_per_dialect(dialect: str) -> None:
    fake = FakeLLM(server=FAKE_SERVER[dialect])
    route = SCORING[dialect].get("rerank")
    with fake.serve() as url, lmclient.Client(url, model="fake-model", dialect=dialect) as client:
        if route is None:
            with pytest.raises(lmclient.UnsupportedConstraintError, match="no rerank endpoint"):
                client.rerank(QUERY, DOCUMENTS, top_n=2)
            assert fake.requests == []  # a forced dialect refuses before anything is sent
            return
        ranked = client.rerank(QUERY, DOCUMENTS, top_n=2)
    (sent,) = scoring_requests(fake)
    assert sent.path == route.path
    expected: dict[str, Any] = {"model": "fake-model", "query": QUERY, "documents": DOCUMENTS}
    if route.top_n:
        expected["top_n"] = 2
    assert sent.body == expected
    assert [r.index for r in ranked] == BEST_FIRST[:2]  # cut here where the server reads no top_n
    assert [r.document for r in ranked] == [DOCUMENTS[i] for i in BEST_FIRST[:2]]
    assert [r.score for r in ranked] == [fake_score(QUERY, DOCUMENTS[i]) for i in BEST_FIRST[:2]]


@pytest.mark.parametrize("dialect", sorted(SCORING))
def test_score_per_dialect(dialect: str) -> None:
    fake = FakeLLM(server=FAKE_SERVER[dialect])
    route = SCORING[dialect].get("score")
    with fake.serve() as url, lmclient.Client(url, model="fake-model", dialect=dialect) as client:
        if route is None:
            with pytest.raises(lmclient.UnsupportedConstraintError, match="score"):
                client.score(QUERY, DOCUMENTS)
            assert fake.requests == []
            return
        one_to_many = client.score(QUERY, DOCUMENTS)
        pairwise = client.score(DOCUMENTS, DOCUMENTS[::-1])
        many_to_one = client.score(DOCUMENTS[:2], QUERY)
        one = client.score("cat", "cat")
    first, second, third, fourth = scoring_requests(fake)
    assert {r.path for r in (first, second, third, fourth)} == {route.path}
    assert first.body == {"model": "fake-model", "text_1": QUERY, "text_2": DOCUMENTS}
    assert second.body["text_1"] == DOCUMENTS and second.body["text_2"] == DOCUMENTS[::-1]
    assert third.body["text_1"] == DOCUMENTS[:2] and third.body["text_2"] == [QUERY, QUERY]
    assert fourth.body == {"model": "fake-model", "text_1": "cat", "text_2": ["cat"]}
    assert one_to_many == [fake_score(QUERY, d) for d in DOCUMENTS]
    assert pairwise == [fake_score(a, b) for a, b in zip(DOCUMENTS, DOCUMENTS[::-1], strict=True)]
    assert many_to_one == [fake_score(d, QUERY) for d in DOCUMENTS[:2]]
    assert one == [1.0]


@pytest.mark.parametrize("dialect", sorted(SCORING))
def test_classify_per_dialect(dialect: str) -> None:
    fake = FakeLLM(server=FAKE_SERVER[dialect])
    route = SCORING[dialect].get("classify")
    with fake.serve() as url, lmclient.Client(url, model="fake-model", dialect=dialect) as client:
        if route is None:
            with pytest.raises(lmclient.UnsupportedConstraintError, match="no classify endpoint"):
                client.classify(DOCUMENTS)
            assert fake.requests == []
            return
        classes = client.classify(DOCUMENTS)
    (sent,) = scoring_requests(fake)
    assert sent.path == route.path
    assert sent.body == {"model": "fake-model", "input": DOCUMENTS}
    for text, got in zip(DOCUMENTS, classes, strict=True):
        probabilities = fake_classes(text)
        assert got == lmclient.Classification(
            LABELS[probabilities.index(max(probabilities))], probabilities
        )


def test_sglangs_score_is_refused_as_another_api() -> None:
    with (
        lmclient.Client("http://127.0.0.1:1/v1", model="m", dialect="sglang") as client,
        pytest.raises(lmclient.UnsupportedConstraintError, match="another API"),
    ):
        client.score("a", "b")


@pytest.mark.parametrize(
    ("version", "method", "args", "first"),
    [
        ("0.7.1", "rerank", ("q", ["a"]), "0.7.2"),
        ("0.6.4", "score", ("a", "b"), "0.6.5"),
        ("0.8.5", "classify", (["a"],), "0.9"),
    ],
)
def test_a_probed_release_without_the_endpoint_is_refused_after_the_probes_only(
    version: str, method: str, args: tuple[Any, ...], first: str
) -> None:
    fake = FakeLLM(server="vllm-guided")
    fake.add_route("GET", "/version", {"version": version})
    with (
        fake.serve() as url,
        lmclient.Client(url) as client,
        pytest.raises(
            lmclient.UnsupportedConstraintError, match=re.escape(f"from {first} on")
        ) as caught,
    ):
        getattr(client, method)(*args)
    assert f"vllm {version} has no {method} endpoint" in str(caught.value)
    assert client.dialect == "vllm-guided"
    assert scoring_requests(fake) == []


def test_the_first_release_with_the_endpoint_is_sent_to() -> None:
    fake = FakeLLM(server="vllm-guided")
    fake.add_route("GET", "/version", {"version": "0.7.2"})
    with fake.serve() as url, lmclient.Client(url) as client:
        ranked = client.rerank(QUERY, DOCUMENTS)
        assert [r.index for r in ranked] == BEST_FIRST
        with pytest.raises(lmclient.UnsupportedConstraintError, match=r"from 0\.9 on"):
            client.classify(["a"])  # the same server: 0.7.2 has rerank, not classify
    assert [r.path for r in scoring_requests(fake)] == ["/rerank"]


def test_a_probed_server_without_the_endpoint_refuses_after_the_probes_only() -> None:
    fake = FakeLLM(server="llamacpp")
    with fake.serve() as url, lmclient.Client(url) as client:
        with pytest.raises(lmclient.UnsupportedConstraintError, match="no classify endpoint"):
            client.classify(["a"])
        assert client.dialect == "llamacpp"
    assert fake.requests and scoring_requests(fake) == []


def test_per_call_model_and_the_served_model() -> None:
    fake = FakeLLM(["served"], server="sglang")
    with fake.serve() as url, lmclient.Client(url) as client:
        client.rerank("q", ["a"])  # model=None: the one served
        with pytest.raises(lmclient.NotFoundError, match="`other` does not exist"):
            client.classify(["a"], model="other")
    assert [r.body["model"] for r in scoring_requests(fake)] == ["served", "other"]


# -- the server's errors and malformed answers, as they come ----------------------------------


def test_llamacpp_without_reranking_answers_501_raised_as_it_comes() -> None:
    fake = FakeLLM(server="llamacpp")
    body = fixture("llamacpp_rerank_not_supported_501.json")
    fake.add_route(
        "POST", "/v1/rerank", body, status=501, headers={"content-type": "application/json"}
    )
    with (
        fake.serve() as url,
        lmclient.Client(url, max_retries=0) as client,
        pytest.raises(lmclient.APIStatusError, match="--reranking") as caught,
    ):
        client.rerank("q", ["a"])
    assert caught.value.status_code == 501


def test_a_malformed_answer_over_the_wire_is_a_protocol_error() -> None:
    fake = FakeLLM()
    fake.add_route("POST", "/classify", {"data": [{"index": 0, "label": None, "probs": []}] * 2})
    with (
        fake.serve() as url,
        lmclient.Client(url) as client,
        pytest.raises(lmclient.ProtocolError, match="2 classes for 1 texts"),
    ):
        client.classify(["a"])


# -- async: the same calls, awaited ------------------------------------------------------------


@pytest.mark.parametrize("server", ["vllm", "sglang", "llamacpp"])
async def test_async_rerank(server: str) -> None:
    fake = FakeLLM(server=server)
    with fake.serve() as url:
        async with lmclient.AsyncClient(url) as client:
            ranked = await client.rerank(QUERY, DOCUMENTS, top_n=3)
            assert await client.rerank(QUERY, []) == []
    assert [r.index for r in ranked] == BEST_FIRST[:3]


async def test_async_score_and_classify() -> None:
    fake = FakeLLM()
    with fake.serve() as url:
        async with lmclient.AsyncClient(url) as client:
            scores = await client.score(QUERY, DOCUMENTS)
            classes = await client.classify(["good", "bad"])
            assert await client.classify([]) == []
    assert scores == [fake_score(QUERY, d) for d in DOCUMENTS]
    assert [c.probabilities for c in classes] == [fake_classes("good"), fake_classes("bad")]


async def test_async_refusals_before_any_request() -> None:
    fake = FakeLLM(server="llamacpp")
    with fake.serve() as url:
        async with lmclient.AsyncClient(url, model="m", dialect="llamacpp") as client:
            with pytest.raises(lmclient.UnsupportedConstraintError, match="no score endpoint"):
                await client.score("a", "b")
            with pytest.raises(TypeError, match="not a single str"):
                await client.rerank("q", "document")
    assert fake.requests == []


async def test_async_a_malformed_answer_is_a_protocol_error() -> None:
    fake = FakeLLM()
    fake.add_route("POST", "/score", {"data": []})
    with fake.serve() as url:
        async with lmclient.AsyncClient(url) as client:
            with pytest.raises(lmclient.ProtocolError, match="0 scores for 1 pairs"):
                await client.score("a", "b")


# -- as a user's respx suite writes it --------------------------------------------------------

RESPX_URL = "http://llm.test/v1"  # does not resolve: a request that escaped the mock fails


@pytest.mark.parametrize("using", ["httpcore", "httpx"])
def test_rerank_in_a_respx_suite_that_mocks_only_its_route(using: str) -> None:
    """A vLLM service's test: the client says which server it is (no probes), the one route
    it calls is mocked, strictly, and the recorded answer comes back typed and sorted."""
    import httpx
    import respx

    with respx.mock(using=using) as router:
        route = router.post("http://llm.test/rerank").mock(
            return_value=httpx.Response(200, content=fixture("vllm_0.32_rerank_top_n_2.json"))
        )
        with lmclient.Client(RESPX_URL, model="gemma-3-270m", dialect="vllm") as client:
            ranked = client.rerank(
                "Where is the cat?",
                ["A dog barked.", "The cat sat on the mat.", "Bonjour"],
                top_n=2,
            )
    assert [r.index for r in ranked] == [1, 2]  # the recorded scores, best first
    assert ranked[0].document == "The cat sat on the mat."
    assert route.call_count == 1
    assert json.loads(route.calls.last.request.content)["top_n"] == 2


@pytest.mark.parametrize("using", ["httpcore", "httpx"])
async def test_async_rerank_in_a_respx_suite_that_mocks_only_its_route(using: str) -> None:
    import httpx
    import respx

    with respx.mock(using=using) as router:
        route = router.post("http://llm.test/rerank").mock(
            return_value=httpx.Response(200, content=fixture("vllm_0.32_rerank_top_n_2.json"))
        )
        async with lmclient.AsyncClient(RESPX_URL, model="gemma-3-270m", dialect="vllm") as client:
            ranked = await client.rerank(
                "Where is the cat?",
                ["A dog barked.", "The cat sat on the mat.", "Bonjour"],
                top_n=2,
            )
    assert [r.index for r in ranked] == [1, 2]  # the recorded scores, best first
    assert route.call_count == 1


def test_a_server_not_recognised_is_told_how_to_say_which_it_is() -> None:
    """Behind a gateway, or in a respx suite that mocks no probe, detection says ``generic``: the
    refusal names the way round it (``dialect=``), before any request."""
    import respx

    with respx.mock(), lmclient.Client(RESPX_URL, model="m") as client:  # strict: no route
        with pytest.raises(lmclient.UnsupportedConstraintError, match="pass dialect="):
            client.rerank("q", ["a"])
        assert client.dialect == "generic"  # every probe failed (none is mocked)
