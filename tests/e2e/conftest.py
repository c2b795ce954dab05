"""One real llama.cpp server (Gemma 3 270M) for the whole session, built and cached by
`scripts/llamacpp.py`. If it cannot be built or started, these tests fail and say why: they are
never skipped."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scripts import llamacpp


@pytest.fixture(scope="session")
def llama() -> Iterator[llamacpp.LlamaServer]:
    llamacpp.ensure_installed()  # `make test` has already run the (long, verbose) first install
    with llamacpp.LlamaServer(parallel=4) as server:  # 4 slots: concurrency tests
        yield server


@pytest.fixture
def base_url(llama: llamacpp.LlamaServer) -> str:
    return llama.base_url
