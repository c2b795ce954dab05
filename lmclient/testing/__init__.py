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

With pytest, the ``fake_llm`` fixture (this package's pytest plugin) gives a served FakeLLM per
test. The names below are imported on first use (PEP 562): pytest imports the plugin module of
this package in every session, and that must not pay for msgspec and the fake. respx and httpx
are imported when :meth:`FakeLLM.mock` is used, lmclient's clients when an output type is
compared (:meth:`RecordedRequest.asks_for`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lmclient._lazy import lazy_attributes as _lazy_attributes

if TYPE_CHECKING:
    from ._constraints import Constraint, ConstraintKind, read_constraint
    from ._errors import ConstraintError, UnsatisfiableError
    from ._fake import FakeLLM
    from ._faults import FAULTS, Fault, FaultKind
    from ._recording import Endpoint, RecordedRequest
    from ._regex_gen import regex_instance
    from ._schema_instance import OptionalFields, schema_instance
    from ._script import Match, Reply, StreamStyle, When
    from ._wire import FakeResponse, Pause, StreamDropped, estimate_tokens

_LAZY = {
    "Constraint": "_constraints",
    "ConstraintKind": "_constraints",
    "read_constraint": "_constraints",
    "ConstraintError": "_errors",
    "UnsatisfiableError": "_errors",
    "FakeLLM": "_fake",
    "FAULTS": "_faults",
    "Fault": "_faults",
    "FaultKind": "_faults",
    "Endpoint": "_recording",
    "RecordedRequest": "_recording",
    "regex_instance": "_regex_gen",
    "OptionalFields": "_schema_instance",
    "schema_instance": "_schema_instance",
    "Match": "_script",
    "Reply": "_script",
    "StreamStyle": "_script",
    "When": "_script",
    "FakeResponse": "_wire",
    "Pause": "_wire",
    "StreamDropped": "_wire",
    "estimate_tokens": "_wire",
}


__getattr__, __dir__ = _lazy_attributes(__name__, _LAZY, globals())

__all__ = [
    "FAULTS",
    "Constraint",
    "ConstraintError",
    "ConstraintKind",
    "Endpoint",
    "FakeLLM",
    "FakeResponse",
    "Fault",
    "FaultKind",
    "Match",
    "OptionalFields",
    "Pause",
    "RecordedRequest",
    "Reply",
    "StreamDropped",
    "StreamStyle",
    "UnsatisfiableError",
    "When",
    "estimate_tokens",
    "read_constraint",
    "regex_instance",
    "schema_instance",
]
