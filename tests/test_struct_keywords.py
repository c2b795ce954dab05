"""No call in the client's modules passes more than 15 keywords: msgspec (0.23) builds a Struct
given more on a slower path, about 1.2 µs where 15 cost nothing extra, and a 16th keyword to
`Response` once put that on every call (issue 37's `unmetered`, +7k instructions). A Struct
with more fields takes the rare ones by `msgspec.structs.replace` (`Call._response`).
`lmclient.testing` is not on a user's call path and is not held to it."""

from __future__ import annotations

import ast
from pathlib import Path

LMCLIENT = Path(__file__).resolve().parents[1] / "lmclient"
MOST = 15


def wide_calls(source: str) -> list[tuple[int, str, int]]:
    """Each call in ``source`` given more than `MOST` keywords: its line, callee and count."""
    return [
        (node.lineno, ast.unparse(node.func), len(node.keywords))
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and len(node.keywords) > MOST
    ]


def test_no_call_of_the_client_passes_more_than_15_keywords() -> None:
    found = {
        str(path.relative_to(LMCLIENT)): wide
        for path in sorted(LMCLIENT.rglob("*.py"))
        if "testing" not in path.relative_to(LMCLIENT).parts
        and (wide := wide_calls(path.read_text()))
    }
    assert found == {}


def test_the_check_sees_a_wide_call() -> None:
    keywords = ", ".join(f"f{i}={i}" for i in range(MOST + 1))
    assert wide_calls(f"Response({keywords})\nResponse(a=1)\n") == [(1, "Response", MOST + 1)]
