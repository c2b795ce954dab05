"""lmclient's modules import each other without a cycle, and ``import lmclient`` stays cheap.

The graph is read from the source: every module-level import of an lmclient module (imports
under ``if TYPE_CHECKING:`` and inside functions are not run at import time, so they cannot
close a cycle). ``from . import errors`` depends on ``lmclient.errors``, not on the package."""

from __future__ import annotations

import ast
import importlib.metadata
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
    """The lmclient modules that ``path`` imports when it is imported."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.parse(path.read_text()).body:  # module level only
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
    return {m for m in out if m in modules and m != name}


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
    assert find_cycle(edges) is None


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
        "lmclient._types",
    }
