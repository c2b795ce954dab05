"""Fixtures every test module may use: the fake and its loopback URL (the helpers that modules
share are functions in `tests.helpers`)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from lmclient.testing import FakeLLM

# Loopback servers are reached directly, even where the environment sets a proxy (lmclient, like
# httpx, honours HTTP_PROXY); other traffic (pip, in the plugin test) keeps the proxy.
for _name in ("no_proxy", "NO_PROXY"):
    os.environ[_name] = ",".join(filter(None, [os.environ.get(_name), "127.0.0.1", "localhost"]))


@pytest.fixture
def fake() -> FakeLLM:
    return FakeLLM()


@pytest.fixture
def url(fake: FakeLLM) -> Iterator[str]:
    """The fake served on 127.0.0.1 for the test's duration."""
    with fake.serve() as base_url:
        yield base_url
