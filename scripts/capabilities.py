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

from lmclient import Grammar, Regex, Tagged, UnsupportedConstraintError
from lmclient._dialects import DIALECTS, Fields
from lmclient._output.types import compile_output
from lmclient._reasoning import reasoning_fields
from lmclient._tools import CHOICES, ENFORCEMENT


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
    ("Tagged", Tagged(_Object)),
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
    flags = (("compact", plan.compact), ("emulated", plan.emulated), ("wrapped", plan.wrapped))
    notes = [name for name, flag in flags if flag]
    return f"`{_field(plan.fields)}`" + (f" ({', '.join(notes)})" if notes else "")


def matrix() -> str:
    names = [name for name, _ in COLUMNS] + ["whitespace the server's JSON grammar allows"]
    lines = [
        "| dialect | endpoint | " + " | ".join(names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    for dialect in DIALECTS:
        for endpoint in ("chat", "completions"):
            cells = [cell(dialect, tp, endpoint) for _, tp in COLUMNS]
            cells.append(DIALECTS[dialect].json_whitespace)
            lines.append(f"| `{dialect}` | {endpoint} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\n" + reasoning_matrix() + "\n\n" + tools_matrix()


REASONING: list[tuple[str, dict[str, Any]]] = [
    ("`thinking=True`", {"thinking": True}),
    ("`thinking=False`", {"thinking": False}),
    ("`thinking_budget=N`", {"thinking_budget": 512}),
    ("`reasoning_effort=`", {"reasoning_effort": "low"}),
]


def reasoning_cell(dialect: str, params: dict[str, Any]) -> str:
    """The fields a reasoning control becomes on the chat endpoint (the completions endpoint
    refuses them all), as a reader would look for them in a request."""
    try:
        fields = reasoning_fields(dialect, "chat", params)
    except UnsupportedConstraintError:
        return "refused"
    shown = []
    for key, value in fields.items():
        if isinstance(value, dict):
            shown += [f"`{key}.{k}: {msgspec.json.encode(v).decode()}`" for k, v in value.items()]
        elif value in (params.get("thinking_budget"), params.get("reasoning_effort")):
            shown.append(f"`{key}`")  # the value as given
        else:
            shown.append(f"`{key}: {msgspec.json.encode(value).decode()}`")
    return ", ".join(shown)


def reasoning_matrix() -> str:
    """Reasoning controls per dialect, on the chat endpoint."""
    lines = [
        "| dialect (chat) | " + " | ".join(name for name, _ in REASONING) + " |",
        "|---|" + "---|" * len(REASONING),
    ]
    for dialect in DIALECTS:
        cells = [reasoning_cell(dialect, params) for _, params in REASONING]
        lines.append(f"| `{dialect}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


START, END = "<!-- capabilities:start -->\n", "<!-- capabilities:end -->"
PAGE = Path(__file__).resolve().parents[1] / "docs" / "servers.md"


def readme_matrix() -> str:
    """The matrix as docs/servers.md shows it (the name is from when it lived in the README)."""
    text = PAGE.read_text()
    return text[text.index(START) + len(START) : text.index(END)].strip()


def tools_cell(how: str, choice: str) -> str:
    """What a ``tool_choice`` becomes (`CHOICES`): sent as given, emulated, or refused."""
    if how == "named":
        return "emulated: that tool alone, `required`"
    if how != "sent":
        return "refused"
    return "named `{type: function, …}`" if choice == "tool" else f"`{choice}`"


def tools_matrix() -> str:
    """Tools per dialect, on the chat endpoint: each ``tool_choice`` and how it is held."""
    choices = ("auto", "required", "none", "tool")
    lines = [
        "| dialect (chat) | `auto` | `required` | `none` | a `Tool` | how tool calls are held |",
        "|---|---|---|---|---|---|",
    ]
    for dialect in DIALECTS:
        cells = [tools_cell(CHOICES[dialect][choice], choice) for choice in choices]
        cells.append(ENFORCEMENT[dialect])
        lines.append(f"| `{dialect}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


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
