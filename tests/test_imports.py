"""lmclient's modules import each other without a cycle, each imports alone, and ``import
lmclient`` stays cheap.

The graph is read from the source: every import of an lmclient module that can run — at module
level and inside functions (a function's import runs on its first call, and a loop through it
is a loop all the same: the module on the other side sees this one half made, or the two can
only be understood together) — but not under ``if TYPE_CHECKING:``, which never runs.
``from . import errors`` depends on ``lmclient.errors``, not on the package."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement

import lmclient

PACKAGE = Path(lmclient.__file__).parent


def module_name(path: Path) -> str:
    parts = ["lmclient", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, name: str, modules: set[str]) -> set[str]:
    """The lmclient modules that ``path`` imports when it runs (type-checking imports aside)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    pending: list[ast.AST] = [ast.parse(path.read_text())]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and _type_checking(node.test):
            pending.extend(node.orelse)  # the body never runs
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                out.add(candidate if candidate in modules else base)
        pending.extend(ast.iter_child_nodes(node))
    return {m for m in out if m in modules and m != name}


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {name: imported(path, name, modules) for name, path in paths.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``edges`` (depth first), as the list of its nodes; None if there is none."""
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> list[str] | None:
        if name in path:
            return [*path[path.index(name) :], name]
        if name in done:
            return None
        for dependency in sorted(edges[name]):
            cycle = visit(dependency, [*path, name])
            if cycle:
                return cycle
        done.add(name)
        return None

    for name in sorted(edges):
        cycle = visit(name, [])
        if cycle:
            return cycle
    return None


def test_no_import_cycle() -> None:
    edges = graph()
    assert edges["lmclient._transports.sync"] >= {
        "lmclient._transports.common",
        "lmclient._request",
    }
    assert "lmclient._otel" in edges["lmclient._hooks"]  # a function's import counts
    assert "lmclient._cli_probe" in edges["lmclient._cli"]
    assert "lmclient._core" not in edges["lmclient._hooks"]  # a TYPE_CHECKING one does not
    assert find_cycle(edges) is None


def test_the_graph_reads_function_imports_and_skips_type_checking(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(
        "from typing import TYPE_CHECKING\n"
        "import typing\n"
        "from . import a\n"
        "if TYPE_CHECKING:\n"
        "    from . import b\n"
        "if typing.TYPE_CHECKING:\n"
        "    from .c import C\n"
        "else:\n"
        "    from .d import D\n"
        "def f():\n"
        "    from .e import E\n"
    )
    modules = {f"p.{n}" for n in "abcde"}
    assert imported(path, "p.m", modules) == {"p.a", "p.d", "p.e"}


# Optional dependencies: a module that needs one imports when it is installed (the dev venv has
# them all), else fails saying which is missing.
# Each module behind an extra: the package it needs, and what its import says without it.
OPTIONAL = {
    "lmclient.ray": ("ray", "pip install 'lmclient[ray]'"),
    "lmclient._otel": ("opentelemetry", "No module named 'opentelemetry"),
}

# One fresh interpreter imports the third-party modules lmclient's modules use (only to pay for
# them once: they import nothing of lmclient), then forks a child per lmclient module, in which
# that module is the first lmclient module imported.
_EACH_ALONE = """
import importlib, os, sys
for dependency in ("asyncio", "httpx", "msgspec", "opentelemetry.trace"):
    try:
        importlib.import_module(dependency)
    except ImportError:
        pass
assert not [m for m in sys.modules if m.partition(".")[0] == "lmclient"]
for name in sys.argv[1:]:
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(name)
        except BaseException as exc:
            print(name, type(exc).__name__, exc, flush=True)
            os._exit(1)
        os._exit(0)
    os.waitpid(pid, 0)
"""


def test_each_module_imports_alone() -> None:
    """Each module imported first: an import loop (module A needs a name of B while B is still
    importing A) fails here whichever module comes first, where the suite, importing in one
    order, would not see it."""
    names = sorted(set(graph()) - {"lmclient.__main__"})  # `python -m lmclient`: runs the command
    out = subprocess.run(
        [sys.executable, "-c", _EACH_ALONE, *names],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    failed = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    for name, (dependency, said) in OPTIONAL.items():
        if importlib.util.find_spec(dependency) is None:
            assert said in failed.pop(name, ""), name
    assert not failed, failed


def test_the_import_check_sees_a_failure() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _EACH_ALONE, "lmclient.errors", "lmclient.no_such_module"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.startswith("lmclient.no_such_module ModuleNotFoundError")


# What a sub-package's modules may import from lmclient (docs/architecture.md, "The layout"):
# the output-type compiler and the wire decoders sit below everything else.
ALLOWED = {
    "lmclient._output": ("lmclient._output", "lmclient.errors", "lmclient._log"),
    "lmclient._wire": ("lmclient._wire", "lmclient._output", "lmclient.errors"),
}


def test_the_lower_packages_import_only_below_them() -> None:
    wrong = {
        name: sorted(m for m in deps if not m.startswith(ALLOWED[package]))
        for package in ALLOWED
        for name, deps in graph().items()
        if name == package or name.startswith(package + ".")
    }
    assert not {name: deps for name, deps in wrong.items() if deps}


def test_the_check_finds_cycles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_import_lmclient_imports_no_httpx_nor_asyncio() -> None:
    code = "import sys, lmclient; print(sorted({'httpx', 'asyncio', 'msgspec'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_sync_client_does_not_import_asyncio() -> None:
    code = "import sys, lmclient; lmclient.Client; print('asyncio' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_no_opentelemetry_unless_the_application_imports_it() -> None:
    """Tracing is automatic once the application has imported OpenTelemetry (`_hooks`): until
    then neither ``import lmclient`` nor a client (with hooks or not) imports it, even where it
    is installed (as in the dev venv)."""
    code = (
        "import sys, lmclient\n"
        "before = [m for m in sys.modules if m.startswith('opentelemetry')]\n"
        "lmclient.Client('http://127.0.0.1:9/v1', model='m')\n"
        "lmclient.AsyncClient('http://127.0.0.1:9/v1', model='m', hooks=[id])\n"
        "after = [m for m in sys.modules if m.startswith('opentelemetry')]\n"
        "import opentelemetry.trace\n"
        "print(before, after)"  # that import succeeded: installed, so the check means something
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] []"


def test_ray_only_behind_its_extra() -> None:
    """`lmclient.ray` is the one module that imports Ray (and pyarrow): neither ``import
    lmclient``, nor a client's calls, nor the fake import them, and the distribution's runtime
    requirements are still httpx and msgspec, Ray only under the ``ray`` extra."""
    code = (
        "import sys, lmclient\n"
        "from lmclient.testing import FakeLLM\n"
        "with FakeLLM().serve() as url, lmclient.Client(url) as client:\n"
        "    client.generate_many(['a', 'b'], int)\n"
        "heavy = ('ray', 'pyarrow', 'pandas', 'numpy')\n"
        "print(sorted(m for m in sys.modules if m.partition('.')[0] in heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    requirements = [Requirement(r) for r in importlib.metadata.requires("lmclient") or []]
    runtime = sorted(r.name for r in requirements if r.marker is None)
    assert runtime == ["httpx", "msgspec"]
    ray = [r for r in requirements if r.marker is not None and r.marker.evaluate({"extra": "ray"})]
    assert [(r.name, r.extras) for r in ray] == [("ray", {"data"})]


def test_the_transports_import_no_core() -> None:
    """The transports need only the prepared request and its timeouts (`lmclient._request`):
    importing one loads neither the core nor the dialects, tools and output types."""
    code = (
        "import sys, lmclient._transports.sync, lmclient._transports.aio; "
        "print(sorted(m for m in sys.modules if m.startswith('lmclient.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(eval(out.stdout))  # a list of str, printed by the code above
    assert "lmclient._request" in loaded
    assert not loaded & {
        "lmclient._core",
        "lmclient._call",
        "lmclient._dialects",
        "lmclient._output.types",
    }
