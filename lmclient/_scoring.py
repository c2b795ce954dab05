"""Scoring: every decision of `rerank`, `score` and `classify`, none of their I/O.

Which server answers which of the three, at which path and from which release, is one table
(`SCORING`, keyed by dialect name, beside `_embeddings.ENDPOINTS`), read from each server's
source:

* vLLM (``entrypoints/pooling/scoring/api_router.py`` and ``protocol.py``,
  ``pooling/classify/protocol.py``): ``POST /rerank`` (also ``/v1/rerank``, ``/v2/rerank``;
  from 0.7.2, PR #12376) takes ``{model, query, documents, top_n}`` (``top_n`` 0: all) and
  answers Jina's shape, ``{id, model, usage, results: [{index, document, relevance_score}]}``,
  best first; ``POST /score`` takes ``{model, text_1, text_2}`` (a str and a str, a str and a
  list, or two lists of one length) and answers ``{data: [{index, score}], ...}``, a score per
  pair; the first releases (0.6.5's documentation lists it: refused before) served it at
  ``/v1/score`` only, which every later one still answers (with a warning; 0.32 does, tested),
  so the releases before structured outputs (``vllm-guided``) are sent there; ``POST
  /classify`` (from 0.9, PR #17032) takes ``{model, input}`` and answers ``{data: [{index,
  label, probs, num_classes}], ...}``.
* SGLang (``serving_rerank.py``, ``serving_classify.py``): ``POST /v1/rerank`` takes ``{query,
  documents}`` and answers a bare JSON array ``[{score, document, index, meta_info}]``, best
  first, with no ``top_n``; ``POST /v1/classify`` in vLLM's shape. Its ``/v1/score`` is another
  API (the probabilities of chosen next tokens after a query and each item), refused here.
* llama.cpp (``tools/server``, started with ``--reranking``): ``POST /v1/rerank`` (also
  ``/rerank``) takes ``{model, query, documents, top_n}`` and answers ``{model, object, usage,
  results: [{index, relevance_score}]}``, best first and cut to ``top_n`` (builds before that
  answered every document, in order: the client sorts and cuts them itself). A server started
  without ``--reranking`` answers 501, which is raised as it comes. No score, no classify.
* TGI, Ollama, LM Studio, OpenAI, the SGLang gateway and unknown servers: none of the three.

Each answer is decoded strictly: one result per input (per pair, per text), each index in range
and once, exactly one score per result; anything else is a `ProtocolError` carrying the body.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

import msgspec

from . import errors
from ._call import Lookup
from ._embeddings import attempt_params
from ._output.depth import body_decoder
from ._request import PreparedRequest
from ._servers import SERVERS, release

if TYPE_CHECKING:
    from ._core import ClientCore
    from ._dialects import ServerInfo

__all__ = [
    "SCORING",
    "Classification",
    "RerankResult",
    "Route",
    "ScoringJob",
    "classify_job",
    "decode_classes",
    "decode_ranking",
    "decode_scores",
    "rerank_job",
    "score_job",
]

E = TypeVar("E")


class Route(NamedTuple):
    """Where one dialect's server answers one of the three: a path at the server's root, the
    first release that answers it (``()``: every release the dialect speaks to), and, for
    rerank, whether the server reads ``top_n`` (else the client alone cuts the answer)."""

    path: str
    since: tuple[int, ...] = ()
    top_n: bool = False


SCORING: dict[str, dict[str, Route]] = {
    "vllm": {
        "rerank": Route("/rerank", top_n=True),
        "score": Route("/score"),
        "classify": Route("/classify"),
    },
    "vllm-guided": {
        "rerank": Route("/rerank", since=(0, 7, 2), top_n=True),
        "score": Route("/v1/score", since=(0, 6, 5)),
        "classify": Route("/classify", since=(0, 9)),
    },
    "sglang": {"rerank": Route("/v1/rerank"), "classify": Route("/v1/classify")},
    "llamacpp": {"rerank": Route("/v1/rerank", top_n=True)},
    "tgi": {},
    "ollama": {},
    "lmstudio": {},
    "sglang-gateway": {},
    "openai": {},
    "generic": {},
}

# Why a server that has an endpoint of that name is still refused.
_ELSEWHERE = {
    ("sglang", "score"): "SGLang's /v1/score is another API (the probabilities of chosen next "
    "tokens), not a pair score; use rerank()",
}


class RerankResult(msgspec.Struct, frozen=True):
    """One document of a `Client.rerank` answer: its ``index`` in the documents given, the
    server's relevance ``score`` (higher is more relevant; its scale is the model's), and the
    ``document`` itself, as given (not as the server echoed it, if it did)."""

    index: int
    score: float
    document: str


class Classification(msgspec.Struct, frozen=True):
    """One text's class by a `Client.classify` answer: the model's ``label`` for the likeliest
    class (``None`` where the model names no labels) and the ``probabilities`` of every class,
    in the model's order of classes."""

    label: str | None
    probabilities: list[float]


class _Ranked(msgspec.Struct, gc=False):
    index: int
    relevance_score: float | None = None  # vLLM's, llama.cpp's (Jina's name)
    score: float | None = None  # SGLang's


class _Ranking(msgspec.Struct, gc=False):
    results: list[_Ranked]


class _Scored(msgspec.Struct, gc=False):
    index: int
    score: float


class _Scores(msgspec.Struct, gc=False):
    data: list[_Scored]


class _Classified(msgspec.Struct, gc=False):
    index: int
    label: str | None
    probs: list[float]
    num_classes: int | None = None


class _Classes(msgspec.Struct, gc=False):
    data: list[_Classified]


_RANKING = body_decoder(_Ranking | list[_Ranked], "rerank")
_SCORES = body_decoder(_Scores, "score")
_CLASSES = body_decoder(_Classes, "classify")
_encode = msgspec.json.Encoder().encode


def _placed(items: Sequence[Any], size: int, body: bytes, what: str) -> list[Any]:
    """``items`` at their ``index`` in a list of ``size`` (``None`` where none came); a
    `ProtocolError` for an index out of range or repeated."""
    placed: list[Any] = [None] * size
    for item in items:
        index = item.index
        if not 0 <= index < size or placed[index] is not None:
            raise errors.ProtocolError(f"{what} index {index} is out of place", body=body)
        placed[index] = item
    return placed


def decode_ranking(body: bytes, documents: Sequence[str], top_n: int | None) -> list[RerankResult]:
    """A rerank answer for ``documents``, best first (ties in the documents' order), cut to
    ``top_n``: Jina's ``{results: [...]}`` or SGLang's bare array, each result's score under
    either name. The server may have cut the answer to ``top_n`` already, or not."""
    answer = _RANKING(body)
    items = answer.results if isinstance(answer, _Ranking) else answer
    size = len(documents)
    wanted = size if top_n is None else min(top_n, size)
    if len(items) not in (size, wanted):
        raise errors.ProtocolError(
            f"{len(items)} rerank results for {size} documents (top_n {top_n})", body=body
        )
    results = []
    for item in _placed(items, size, body, "rerank"):
        if item is None:
            continue
        given = [s for s in (item.relevance_score, item.score) if s is not None]
        if len(given) != 1:
            raise errors.ProtocolError(
                f"rerank result {item.index} has {len(given)} scores, not one", body=body
            )
        results.append(RerankResult(item.index, given[0], documents[item.index]))
    results.sort(key=lambda r: -r.score)  # stable: equal scores keep the documents' order
    return results[:wanted]


def decode_scores(body: bytes, pairs: int) -> list[float]:
    """A score answer for ``pairs`` pairs: one score per pair, in the pairs' order."""
    items = _SCORES(body).data
    if len(items) != pairs:
        raise errors.ProtocolError(f"{len(items)} scores for {pairs} pairs", body=body)
    return [item.score for item in _placed(items, pairs, body, "score")]


def decode_classes(body: bytes, texts: int) -> list[Classification]:
    """A classify answer for ``texts`` texts: one class per text, in the texts' order, each
    with as many probabilities as the classes the server counts."""
    items = _CLASSES(body).data
    if len(items) != texts:
        raise errors.ProtocolError(f"{len(items)} classes for {texts} texts", body=body)
    out = []
    for item in _placed(items, texts, body, "classify"):
        if item.num_classes is not None and item.num_classes != len(item.probs):
            raise errors.ProtocolError(
                f"class {item.index} has {len(item.probs)} probabilities for "
                f"{item.num_classes} classes",
                body=body,
            )
        out.append(Classification(item.label, item.probs))
    return out


def _texts(where: str, name: str, texts: Any) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"{where}(): {name} must be a sequence of str, not a single str")
    if not isinstance(texts, Sequence):
        raise TypeError(f"{where}(): {name} must be a sequence of str, not {type(texts).__name__}")
    for text in texts:
        if not isinstance(text, str):
            raise TypeError(f"{where}(): each of {name} must be a str, not {type(text).__name__}")
    return list(texts)


class ScoringJob(Generic[E]):
    """One `rerank`, `score` or `classify` call: its input checked, then, the dialect and model
    known, its one request (none for no input) and the decoder of its answer."""

    __slots__ = ("core", "count", "decode", "fields", "kind", "model", "params", "top_n")

    def __init__(
        self,
        core: ClientCore,
        kind: str,
        *,
        fields: dict[str, Any],
        count: int,
        decode: Callable[[bytes], list[E]],
        model: Any,
        params: Mapping[str, Any],
        top_n: int | None = None,
    ) -> None:
        """Every check that needs no server, before any request."""
        if model is not None and not isinstance(model, str):
            raise TypeError(f"{kind}(): model must be a str, not {type(model).__name__}")
        self.core = core
        self.kind = kind
        self.fields = fields
        self.count = count
        self.decode = decode
        self.model: str | None = model
        self.top_n = top_n
        self.params = attempt_params(kind, params)
        dialect = core.dialect or core.forced
        if dialect is not None:
            self.route(dialect.name, None)

    @property
    def ready(self) -> bool:
        """The dialect and the model are known: no set-up request is needed first."""
        if not self.count:
            return True  # nothing to send: nothing to learn first
        return self.core.dialect is not None and (self.model or self.core.model) is not None

    def route(self, dialect: str, info: ServerInfo | None) -> Route:
        """Where ``dialect``'s server (a probed one described by ``info``) answers, or
        `UnsupportedConstraintError` where it does not."""
        route = SCORING[dialect].get(self.kind)
        if route is None:
            able = sorted(name for name, routes in SCORING.items() if self.kind in routes)
            why = _ELSEWHERE.get((dialect, self.kind)) or (
                f"{dialect} servers have no {self.kind} endpoint"
            )
            # a server detection did not recognise (a gateway, a mock) may still have it
            unknown = " (pass dialect= to the client if the server is one of them)"
            raise errors.UnsupportedConstraintError(
                f"{why}; {self.kind}() works with the dialects {', '.join(able)}"
                + (unknown if dialect == "generic" else "")
            )
        server = SERVERS.get(dialect)
        version = None if info is None else info.version
        if (
            route.since
            and version is not None
            and server is not None
            and info is not None
            and info.kind == server.kind
            and release(version) < route.since
        ):
            first = ".".join(map(str, route.since))
            raise errors.UnsupportedConstraintError(
                f"{server.kind} {version} has no {self.kind} endpoint; it has from {first} on"
            )
        return route

    def call(self) -> Lookup[list[E]] | None:
        """The one request (``None`` for no input); refused where the server has no such
        endpoint."""
        if not self.count:
            return None
        core = self.core
        assert core.dialect is not None, "set-up (dialect) must come first"
        route = self.route(core.dialect.name, core.server_info)
        fields = {"model": self.model or core.model, **self.fields}
        if route.top_n and self.top_n is not None:
            fields["top_n"] = self.top_n
        request = PreparedRequest(
            "POST", core.root_url + route.path, core.post_headers, _encode(fields)
        )
        return Lookup.new(core.settings, request, self.decode, self.params)


def rerank_job(
    core: ClientCore,
    query: Any,
    documents: Any,
    *,
    top_n: Any,
    model: Any,
    params: Mapping[str, Any],
) -> ScoringJob[RerankResult]:
    """`rerank`'s input checked: a query, a sequence of documents, ``top_n`` a positive int."""
    if not isinstance(query, str):
        raise TypeError(f"rerank(): query must be a str, not {type(query).__name__}")
    docs = _texts("rerank", "documents", documents)
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1):
        raise ValueError(f"rerank(): top_n must be a positive int or None, not {top_n!r}")
    return ScoringJob(
        core,
        "rerank",
        fields={"query": query, "documents": docs},
        count=len(docs),
        decode=lambda body: decode_ranking(body, docs, top_n),
        model=model,
        params=params,
        top_n=top_n,
    )


def score_job(
    core: ClientCore, a: Any, b: Any, *, model: Any, params: Mapping[str, Any]
) -> ScoringJob[float]:
    """`score`'s input checked: a str or texts on each side; two sequences pair up one to one
    (of one length), a str pairs with each text of the other side."""
    seconds = [b] if isinstance(b, str) else _texts("score", "b", b)
    if isinstance(a, str):
        text_1: str | list[str] = a  # vLLM's one-to-many form: one text against each of b
        pairs = len(seconds)
    else:
        text_1 = _texts("score", "a", a)
        if isinstance(b, str):
            seconds *= len(text_1)
        if len(text_1) != len(seconds):
            raise ValueError(
                f"score(): a and b pair up one to one: {len(text_1)} and {len(seconds)} texts"
            )
        pairs = len(text_1)
    return ScoringJob(
        core,
        "score",
        fields={"text_1": text_1, "text_2": seconds},
        count=pairs,
        decode=lambda body: decode_scores(body, pairs),
        model=model,
        params=params,
    )


def classify_job(
    core: ClientCore, texts: Any, *, model: Any, params: Mapping[str, Any]
) -> ScoringJob[Classification]:
    """`classify`'s input checked: a sequence of texts."""
    given = _texts("classify", "texts", texts)
    return ScoringJob(
        core,
        "classify",
        fields={"input": given},
        count=len(given),
        decode=lambda body: decode_classes(body, len(given)),
        model=model,
        params=params,
    )
