"""Test helpers for code that talks to OpenAI-compatible LLM servers.

:class:`FakeLLM` answers chat, completions, models and server-probe requests like vLLM (or
another server kind) does: from scripted replies, or with text that satisfies the constraint
each request carries (a valid JSON instance for a schema, a match for a regex, one of the
choices, a sentence of a grammar). Faults (error statuses, delays, stalls, cut connections,
corrupt bodies, broken streams) are scripted the same way::

    from lmclient.testing import FakeLLM

    fake = FakeLLM()
    fake.fail(503, times=1, retry_after=0)  # the first call fails, the retry succeeds
    fake.reply({"name": "Ada", "age": 36})
    with fake.serve() as base_url:          # a real server on 127.0.0.1
        ...                                 # or: with fake.mock() as base_url: (respx)
    fake.assert_called(times=2, with_output_type=Person)

With pytest, the ``fake_llm`` fixture (this package's pytest plugin,
:mod:`lmclient.testing.pytest_plugin`) gives a served FakeLLM per test. The names below are
imported on first use (PEP 562): pytest imports the plugin module of this package in every
session, and that must not pay for msgspec and the fake. respx and httpx are imported when
:meth:`FakeLLM.mock` is used, lmclient's clients when an output type is compared
(:meth:`RecordedRequest.asks_for`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lmclient._lazy import lazy_attributes as _lazy_attributes

if TYPE_CHECKING:
    from ._fake import FakeLLM
    from ._recording import RecordedRequest
    from ._script import Match

# What a test author writes: the fake (its methods script replies and faults, mount it, assert
# on what it received) and the types its ``when=`` takes. The generators and the wire helpers
# behind it stay in their modules.
_LAZY = {"FakeLLM": "_fake", "RecordedRequest": "_recording", "Match": "_script"}


__getattr__, __dir__ = _lazy_attributes(__name__, _LAZY, globals())

__all__ = ["FakeLLM", "Match", "RecordedRequest"]
