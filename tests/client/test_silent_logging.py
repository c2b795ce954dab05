"""Silent unless asked: a library call that retries writes nothing to stderr when the
application configured no logging (the ``lmclient`` logger has a NullHandler, so Python's
last-resort handler stays quiet); with logging configured, each retry's WARNING names the
request the user made, not a set-up request. Run in a fresh interpreter each, as an
application would be."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = """
import asyncio, logging, sys
import lmclient
from lmclient.testing import FakeLLM

if sys.argv[1] == "configured":
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
fake = FakeLLM(gateway=True)  # no probe: detection asks and gets 404s
fake.add_route("GET", "/v1/models", {"detail": "busy"}, status=503)  # not retried: not the call
fake.fail(503, retry_after=0, times=2)  # the call itself is retried twice
fake.reply("hi")
with fake.serve() as url:
    if sys.argv[2] == "sync":
        with lmclient.Client(url, model="m") as client:
            assert client.generate("Q") == "hi"
    else:
        async def main():
            async with lmclient.AsyncClient(url, model="m") as client:
                assert await client.generate("Q") == "hi"
        asyncio.run(main())
print("done")
"""


def _run(logging_: str, kind: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT), logging_, kind],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_nothing_on_stderr_unless_logging_is_configured(kind: str) -> None:
    done = _run("unconfigured", kind)
    assert (done.stdout, done.stderr) == ("done\n", "")


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_retry_warning_names_the_users_request(kind: str) -> None:
    lines = _run("configured", kind).stderr.splitlines()
    assert len(lines) == 2, lines
    for n, line in enumerate(lines, 1):
        assert line.startswith(f"WARNING retry {n} of 2 for POST /v1/chat/completions "), line
