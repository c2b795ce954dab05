"""The clients' `rerank`, `score` and `classify`: a mixin around `_scoring`'s pure core, so
that each client's own module stays within its size. The blocking and the asyncio mixin read
alike but for ``await``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from ._scoring import (
    Classification,
    RerankResult,
    ScoringJob,
    classify_job,
    rerank_job,
    score_job,
)

if TYPE_CHECKING:
    from ._call import Lookup
    from ._core import ClientCore

__all__ = ["AsyncScoring"]

T = TypeVar("T")
E = TypeVar("E")


class AsyncScoring:
    """The scoring methods; the client that mixes them in gives ``_core``, ``_run`` and
    ``_setup``."""

    if TYPE_CHECKING:
        _core: ClientCore

        async def _run(self, call: Lookup[T]) -> T: ...

        async def _setup(self, params: dict[str, Any]) -> None: ...

    async def rerank(
        self,
        query: str,
        documents: Sequence[str],
        *,
        top_n: int | None = None,
        model: str | None = None,
        timeout: float | httpx.Timeout | None = None,
        deadline: float | None = None,
        max_retries: int | None = None,
    ) -> list[RerankResult]:
        """The documents by their relevance to ``query``, best first, the ``top_n`` best (all
        by default): each a `RerankResult` (its index in ``documents``, the server's score,
        the document). A reranking model's endpoint: vLLM's ``/rerank``, SGLang's and
        llama.cpp's ``/v1/rerank``; refused before any request elsewhere."""
        params = {"timeout": timeout, "deadline": deadline, "max_retries": max_retries}
        job = rerank_job(self._core, query, documents, top_n=top_n, model=model, params=params)
        return await self._scored(job)

    async def score(
        self,
        a: str | Sequence[str],
        b: str | Sequence[str],
        *,
        model: str | None = None,
        timeout: float | httpx.Timeout | None = None,
        deadline: float | None = None,
        max_retries: int | None = None,
    ) -> list[float]:
        """The score of each pair of texts by a cross-encoder (vLLM's ``/score``), in the
        pairs' order: ``a`` and ``b`` pair up one to one, or a single str with each text of the
        other side. Refused before any request on the other servers."""
        params = {"timeout": timeout, "deadline": deadline, "max_retries": max_retries}
        return await self._scored(score_job(self._core, a, b, model=model, params=params))

    async def classify(
        self,
        texts: Sequence[str],
        *,
        model: str | None = None,
        timeout: float | httpx.Timeout | None = None,
        deadline: float | None = None,
        max_retries: int | None = None,
    ) -> list[Classification]:
        """The class of each text by a classification model (vLLM's ``/classify``, SGLang's
        ``/v1/classify``), in the texts' order: its label and every class's probability.
        Refused before any request on the other servers."""
        params = {"timeout": timeout, "deadline": deadline, "max_retries": max_retries}
        return await self._scored(classify_job(self._core, texts, model=model, params=params))

    async def _scored(self, job: ScoringJob[E]) -> list[E]:
        if not job.ready:
            await self._setup({"model": job.model})
        call = job.call()
        return [] if call is None else await self._run(call)
