"""Print the dialect capability matrix (server × constraint × endpoint) from the dialect tables.

The matrix in docs/servers.md is this script's output; `tests/test_dialects.py` checks they agree.

    .venv/bin/python scripts/capabilities.py            # print it
    .venv/bin/python scripts/capabilities.py --write    # refresh docs/servers.md
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

import msgspec

from lmclient import Grammar, Regex, UnsupportedConstraintError
from lmclient._dialects import DIALECTS, Fields
from lmclient._types import compile_output


class _Object(msgspec.Struct):
    a: int


COLUMNS: list[tuple[str, Any]] = [
    ("JSON schema (Struct…)", _Object),
    ("JSON array (list[T])", list[int]),
    ("int / float / bool", int),
    ("choice (Literal…)", Literal["a", "b"]),
    ("Regex", Regex("[a-z]+")),
    ("Grammar gbnf", Grammar('root ::= "a"')),
    ("Grammar lark", Grammar('start: "a"', syntax="lark")),
    ("Any JSON", Any),
]


def _field(fields: Fields) -> str:
    """The field that carries the constraint, as a reader would look for it in a request."""
    key, value = next(iter(fields.items()))
    if key == "response_format":
        return f"response_format {value['type']}"
    if key == "structured_outputs":
        return f"structured_outputs.{next(iter(value))}"
    return key


def cell(dialect: str, output_type: Any, endpoint: Literal["chat", "completions"]) -> str:
    try:
        plan = DIALECTS[dialect].plan(compile_output(output_type), endpoint)
    except UnsupportedConstraintError:
        return "refused"
    notes = [
        name for name, flag in (("emulated", plan.emulated), ("wrapped", plan.wrapped)) if flag
    ]
    return f"`{_field(plan.fields)}`" + (f" ({', '.join(notes)})" if notes else "")


def matrix() -> str:
    lines = [
        "| dialect | endpoint | " + " | ".join(name for name, _ in COLUMNS) + " |",
        "|---|---|" + "---|" * len(COLUMNS),
    ]
    for dialect in DIALECTS:
        for endpoint in ("chat", "completions"):
            cells = [cell(dialect, tp, endpoint) for _, tp in COLUMNS]  # type: ignore[arg-type]
            lines.append(f"| `{dialect}` | {endpoint} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


START, END = "<!-- capabilities:start -->\n", "<!-- capabilities:end -->"
PAGE = Path(__file__).resolve().parents[1] / "docs" / "servers.md"


def readme_matrix() -> str:
    """The matrix as docs/servers.md shows it (the name is from when it lived in the README)."""
    text = PAGE.read_text()
    return text[text.index(START) + len(START) : text.index(END)].strip()


def write_readme() -> None:
    """Write the matrix into docs/servers.md, between its markers."""
    text = PAGE.read_text()
    head, rest = text.split(START, 1)
    PAGE.write_text(head + START + matrix() + "\n" + END + rest.split(END, 1)[1])


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write_readme()
    else:
        print(matrix())
