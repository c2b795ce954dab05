"""Compare the constraint a request carried with what lmclient sends for an output type.

Kept apart, and imported only when used, because it needs lmclient's own translation of types
(and so httpx); the rest of :mod:`lmclient.testing` reads requests without it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ._constraints import Constraint, read_constraint
from ._errors import ConstraintError

__all__ = ["asks_for", "expected_constraints"]


def asks_for(endpoint: str, body: object, output_type: Any) -> bool:
    """See :meth:`RecordedRequest.asks_for` (its endpoint and body: this module does not import
    the recording, which imports it)."""
    if endpoint not in ("chat", "completions"):
        return False
    try:
        carried = read_constraint(body)
    except ConstraintError:
        return False
    wanted = (carried.kind, carried.value)
    return any((c.kind, c.value) == wanted for c in expected_constraints(output_type, endpoint))


def expected_constraints(output_type: Any, endpoint: str) -> list[Constraint]:
    """The constraint each lmclient dialect sends for ``output_type`` on ``endpoint``, with
    either ``whitespace=`` setting of the client (its compact grammar, the server's converter),
    in neutral form and JSON-normalised (lists, not tuples), without repeats."""
    from lmclient._dialects import DIALECTS
    from lmclient._output.types import compile_output
    from lmclient.errors import UnsupportedConstraintError

    spec = compile_output(output_type)
    found: list[Constraint] = []
    for dialect in DIALECTS.values():
        for compact in (True, False):
            try:
                plan = dialect.plan(
                    spec, "chat" if endpoint == "chat" else "completions", compact=compact
                )
            except UnsupportedConstraintError:
                break
            constraint = read_constraint(msgspec.json.decode(msgspec.json.encode(plan.fields)))
            if all((c.kind, c.value) != (constraint.kind, constraint.value) for c in found):
                found.append(constraint)
    return found
