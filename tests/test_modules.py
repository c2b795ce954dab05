"""One job per module, held by what can be read mechanically: each module names its job in its
docstring's first line, and what other modules take from it is its interface, its ``__all__``.

No test can judge "one job"; these hold its two symptoms. A module split by size rather than by
job shows as names that cross the split with their underscore still on (the halves only make
sense together), and a module with two jobs shows as two interfaces in one ``__all__`` or a
first line that needs an "and" (CONTRIBUTING.md, "How the code is organised", says how to
tell). Read from the source: every ``from lmclient... import name``, at any depth (a function's
import and one under ``if TYPE_CHECKING:`` couple the modules all the same). A submodule
imported by name (``from lmclient import _otel``) is a module, not a name, and a dunder
(``__version__``) is the language's, not an interface's."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import lmclient

PACKAGE = Path(lmclient.__file__).parent


def _module_name(path: Path) -> str:
    parts = ["lmclient", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


SOURCES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
TREES = {name: ast.parse(path.read_text()) for name, path in SOURCES.items()}


class Taken(NamedTuple):
    """One name a module takes from another lmclient module."""

    importer: str
    line: int
    module: str
    name: str


def _taken(importer: str, tree: ast.Module) -> Iterator[Taken]:
    path = SOURCES[importer]
    package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        module = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join([*anchor, *([module] if module else [])])
        if module not in SOURCES:
            continue  # not lmclient's (the standard library's, a dependency's)
        for alias in node.names:
            if f"{module}.{alias.name}" in SOURCES or re.fullmatch(r"__\w+__", alias.name):
                continue  # a submodule, or a dunder
            yield Taken(importer, node.lineno, module, alias.name)


TAKEN = [taken for name, tree in TREES.items() for taken in _taken(name, tree)]


def _interface(tree: ast.Module) -> set[str] | None:
    """The names a module's ``__all__`` lists, or None when it has none."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return set(ast.literal_eval(node.value))
    return None


def test_the_walk_sees_imports() -> None:
    """The walk finds what it should: a relative import and an absolute one, resolved."""
    assert Taken("lmclient._output.gbnf", 0, "lmclient._output.gbnf_ir", "seq") in {
        t._replace(line=0) for t in TAKEN
    }
    assert any(t.module == "lmclient._core" and t.importer == "lmclient.batch" for t in TAKEN)


def test_no_private_name_crosses_modules() -> None:
    crossing = [f"{t.importer}:{t.line} takes {t.name} from {t.module}" for t in TAKEN]
    crossing = [c for c, t in zip(crossing, TAKEN, strict=True) if t.name.startswith("_")]
    assert not crossing, (
        "a name another module uses is its module's interface: drop the underscore and list it"
        " in the module's __all__ (or, if the two modules only make sense together, merge them)"
        f": {crossing}"
    )


def test_what_others_take_is_the_interface() -> None:
    outside = sorted(
        f"{t.importer}:{t.line} takes {t.name} from {t.module}"
        for t in TAKEN
        if t.name not in (_interface(TREES[t.module]) or set())
    )
    assert not outside, f"list each in the __all__ of the module it comes from: {outside}"


def _bound(body: list[ast.stmt]) -> Iterator[str]:
    """The names a module's top level binds, in any branch of an ``if`` or ``try``."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            yield from (n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            yield from (a.asname or a.name.partition(".")[0] for a in node.names)
        elif isinstance(node, (ast.If, ast.Try)):
            handlers = [h.body for h in node.handlers] if isinstance(node, ast.Try) else []
            for block in [node.body, node.orelse, *handlers]:
                yield from _bound(block)


def test_every_interface_is_defined() -> None:
    """What a module's ``__all__`` lists exists in it (a renamed name is not left behind);
    the lazy packages (`lmclient`, `lmclient.testing`) resolve theirs on first use."""
    missing = [
        f"{name}.{listed}"
        for name, tree in TREES.items()
        if "lazy_attributes" not in set(_bound(tree.body))
        for listed in sorted((_interface(tree) or set()) - set(_bound(tree.body)))
    ]
    assert not missing, missing


def test_every_module_names_its_job_first() -> None:
    """The docstring's first line names the module's job: a phrase that ends there, at a colon
    or a full stop, before anything else is said."""
    unnamed = [
        name
        for name, tree in TREES.items()
        if not re.search(r"[.:](\s|$)", (ast.get_docstring(tree) or "").partition("\n")[0])
    ]
    assert not unnamed, (
        "open each module's docstring with its job, a phrase ending with ':' or '.' on the first"
        f" line: {unnamed}"
    )
