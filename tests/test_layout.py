"""The suite's own layout: no test module imports another test module (nor a ``conftest``).

What modules share lives in helper modules (`tests.helpers`, `tests.kinds`, ...): importing a
test module runs its set-up and carries its fixtures into the importer, and the two can then no
longer be moved, renamed or changed apart. Read from the source (every ``import`` and ``from``
statement, at any depth), so a helper moved back into a test module fails here, not at a rename.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _imported(source: str, module: str) -> list[tuple[int, str]]:
    """Each module (or name in a module) that ``source``, the text of ``module``, imports,
    with its line; relative imports resolved."""
    package = module.split(".")[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            name = ".".join([*base, *([node.module] if node.module else [])])
            # ``from tests import test_x`` and ``from . import test_x`` name modules too
            found.extend((node.lineno, f"{name}.{alias.name}") for alias in node.names)
    return found


def _is_test_module(name: str) -> bool:
    """Whether ``name`` is a test module of the suite, or a name in one."""
    parts = name.split(".")
    return parts[0] == "tests" and any(p.startswith("test_") or p == "conftest" for p in parts)


def test_no_test_module_imports_another() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in sorted(TESTS.rglob("*.py"))
        for line, name in _imported(path.read_text(encoding="utf-8"), _module_name(path))
        if _is_test_module(name)
    ]
    assert offenders == [], "import it from a helper module instead:\n" + "\n".join(offenders)


def test_the_check_sees_each_form_of_import() -> None:
    """The walk resolves every spelling of an import of a test module (else the test above
    could pass by not seeing one), and lets helper modules through."""
    source = "\n".join(
        [
            "from tests.client.test_core import make_core",
            "from .test_core import call",
            "from . import test_stream, helpers",
            "from .. import conftest",
            "import tests.wire.test_sse",
            "def f() -> None:",
            "    from tests.helpers import chat_body",
            "    from ..stacks.helpers import Echo",
        ]
    )
    found = _imported(source, "tests.client.test_example")
    assert [(line, name) for line, name in found if _is_test_module(name)] == [
        (1, "tests.client.test_core.make_core"),
        (2, "tests.client.test_core.call"),
        (3, "tests.client.test_stream"),
        (4, "tests.conftest"),
        (5, "tests.wire.test_sse"),
    ]
    assert [name for _, name in found if not _is_test_module(name)] == [
        "tests.client.helpers",
        "tests.helpers.chat_body",
        "tests.stacks.helpers.Echo",
    ]
