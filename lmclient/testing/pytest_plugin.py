"""pytest plugin of lmclient (entry point ``lmclient``): the ``fake_llm`` fixture.

``fake_llm`` is a fresh :class:`~lmclient.testing.FakeLLM` mounted for the test: served on
127.0.0.1 by default, so its ``base_url`` works for lmclient and for any other
HTTP client (the openai SDK, requests, aiohttp, ...); or, with ``mode="respx"``, mounted as a
respx route (httpx clients only, no sockets). Options come from the closest
``@pytest.mark.fake_llm(...)`` marker: ``mode`` and any :class:`FakeLLM` argument
(``server="sglang"``, ``seed=3``, ``models=[...]``, ``default_text=...``). The ``fake_llm_mode``
ini option sets the default mode for a whole project.

pytest imports this module in every session of every project that has lmclient installed, so
it imports only pytest and the standard library (its package, :mod:`lmclient.testing`, loads
its names lazily); FakeLLM is imported by the fixture, and respx only in respx mode.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from lmclient.testing import FakeLLM

__all__ = ["fake_llm"]

MODES = ("serve", "respx")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "fake_llm_mode",
        "how the fake_llm fixture is mounted: serve (127.0.0.1, any HTTP client) or respx",
        default="serve",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "fake_llm(mode='serve'|'respx', **options): how the fake_llm fixture is mounted, and "
        "arguments for its FakeLLM (server=, seed=, models=, default_text=, ...)",
    )


@pytest.fixture
def fake_llm(request: pytest.FixtureRequest) -> Iterator[FakeLLM]:
    """A FakeLLM mounted for this test; ``fake_llm.base_url`` is the URL to give clients."""
    from lmclient.testing import FakeLLM

    marker = request.node.get_closest_marker("fake_llm")
    options = dict(marker.kwargs) if marker is not None else {}
    mode = options.pop("mode", request.config.getini("fake_llm_mode"))
    if mode not in MODES:
        raise pytest.UsageError(f"fake_llm mode must be one of {MODES}, not {mode!r}")
    fake = FakeLLM(**options)
    with fake.serve() if mode == "serve" else fake.mock():
        yield fake
