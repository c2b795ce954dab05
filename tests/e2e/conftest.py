"""The real servers of the e2e tests, one each for the whole session: llama.cpp (Gemma 3 270M),
built and cached by `scripts/llamacpp.py`, and vLLM on the CPU (the same model, converted),
installed and cached by `scripts/vllm.py`. If one cannot be built or started, its tests fail
and say why: they are never skipped. The one way to run without vLLM is to say so,
``LMCLIENT_E2E_VLLM=0``; its tests are then reported as not run, with that reason."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scripts import llamacpp, vllm


@pytest.fixture(scope="session")
def llama() -> Iterator[llamacpp.LlamaServer]:
    llamacpp.ensure_installed()  # `make test` has already run the (long, verbose) first install
    with llamacpp.LlamaServer(parallel=4) as server:  # 4 slots: concurrency tests
        yield server


@pytest.fixture(scope="session")
def llama_embeddings() -> Iterator[llamacpp.LlamaServer]:
    """A second llama-server, computing embeddings (``--embeddings``): mean pooling of the last
    hidden states, as the Gemma 3 base model defines no pooling of its own (and ``none`` is not
    OpenAI-compatible). One slot: with two, this build embeds the sequences batched together
    differently from the same texts alone (by up to 0.16 per value, measured), so identical
    texts would not get identical vectors. Stopped, by its process, when the session ends."""
    llamacpp.ensure_installed()
    extra = ("--embeddings", "--pooling", "mean")
    with llamacpp.LlamaServer(parallel=1, extra_args=extra) as server:
        yield server


@pytest.fixture
def base_url(llama: llamacpp.LlamaServer) -> str:
    return llama.base_url


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The first test to use the vLLM server waits for it to start: a minute or two, more on a
    loaded machine. That wait is bounded by the server's own readiness deadline, so the test's
    timeout (the guard against a hang) counts the test function only: the module's or the
    test's own timeout where it has one, else the suite's."""
    for item in items:
        if "vllm_server" in getattr(item, "fixturenames", ()):
            own = item.get_closest_marker("timeout")
            timeout = float(own.args[0] if own is not None else item.config.getini("timeout"))
            item.add_marker(pytest.mark.timeout(timeout, func_only=True), append=False)


@pytest.fixture(scope="session")
def vllm_installed() -> vllm.Installation:
    if vllm.opted_out():
        pytest.skip(f"{vllm.OPT_OUT_ENV}=0 is set: the vLLM e2e tests were not run")
    return vllm.ensure_installed()  # `make test` has already run the first install, verbosely


@pytest.fixture(scope="session")
def vllm_server(vllm_installed: vllm.Installation) -> Iterator[vllm.VllmServer]:
    with vllm.VllmServer() as server:  # a minute or two to start: once per session
        yield server


@pytest.fixture
def vllm_url(vllm_server: vllm.VllmServer) -> str:
    return vllm_server.base_url
