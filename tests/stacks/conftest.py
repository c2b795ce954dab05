"""Real server stacks for the session, and the line that says which ran.

Each stack starts on first use and runs until the session ends (see `servers.Stacks`). A Python
stack (a declared test dependency) that does not start fails its tests; nginx and haproxy are
skipped, saying why, only where they are not installed. The summary line is printed even with
``-q``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.stacks.helpers import started
from tests.stacks.servers import STACKS, Stack, Stacks

_SESSION: list[Stacks] = []  # the session's stacks, for the summary line


@pytest.fixture(scope="session")
def stacks() -> Iterator[Stacks]:
    registry = Stacks()
    _SESSION.append(registry)
    try:
        yield registry
    finally:
        registry.close()


@pytest.fixture(params=STACKS)
def stack(request: pytest.FixtureRequest, stacks: Stacks, monkeypatch: pytest.MonkeyPatch) -> Stack:
    """Each stack in turn; over TLS the client trusts the stack's CA (lmclient's TLS context is
    httpx's, which reads SSL_CERT_FILE when the client first connects)."""
    running = started(stacks, request.param)
    if running.ca_file is not None:
        monkeypatch.setenv("SSL_CERT_FILE", running.ca_file)
    return running


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for registry in _SESSION:
        terminalreporter.write_line(registry.summary())
