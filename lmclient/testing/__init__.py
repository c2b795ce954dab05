"""Test helpers for code that talks to OpenAI-compatible LLM servers.

:class:`FakeLLM` answers chat, completions and models requests like vLLM does, from scripted
replies or from the constraint each request carries (a valid JSON instance for a schema, a
match for a regex, one of the choices)::

    from lmclient.testing import FakeLLM

    fake = FakeLLM()
    fake.reply({"name": "Ada", "age": 36}, times=1)
    with fake.serve() as base_url:          # a real server on 127.0.0.1
        ...                                 # or: with fake.mock() as base_url: (respx)
    assert fake.last_request.constraint.kind == "json_schema"

Importing this package needs only the standard library and msgspec; respx and httpx are
imported when :meth:`FakeLLM.mock` is used.
"""

from ._constraints import Constraint, ConstraintKind, read_constraint
from ._errors import ConstraintError, UnsatisfiableError
from ._fake import FakeLLM
from ._recording import Endpoint, RecordedRequest
from ._regex_gen import regex_instance
from ._schema_instance import OptionalFields, schema_instance
from ._script import Reply, StreamStyle
from ._wire import FakeResponse, StreamDropped, estimate_tokens

__all__ = [
    "Constraint",
    "ConstraintError",
    "ConstraintKind",
    "Endpoint",
    "FakeLLM",
    "FakeResponse",
    "OptionalFields",
    "RecordedRequest",
    "Reply",
    "StreamDropped",
    "StreamStyle",
    "UnsatisfiableError",
    "estimate_tokens",
    "read_constraint",
    "regex_instance",
    "schema_instance",
]
