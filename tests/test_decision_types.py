"""The core's decisions are typed, not positional: no function of the modules that decide a call
(`_core`, `_params`, `_plans`, `_call`, `_request`) takes two adjacent ``bool`` parameters
(``f(x, True, False)`` cannot say which is which, and a swap still type-checks), nor returns a
tuple of more than three values (its reader unpacks by position, and one more field shifts the
rest). A struct built by keyword, or one enum-like value, says the same by name.

Read from the source, so a new function breaking either rule fails here, whatever calls it.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import lmclient

PACKAGE = Path(lmclient.__file__).parent
MODULES = ("_core.py", "_params.py", "_plans.py", "_call.py", "_request.py")
MOST_VALUES = 3  # a pair or a triple reads at a glance; more deserves names


def _functions(module: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    tree = ast.parse((PACKAGE / module).read_text())
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _is_bool(annotation: ast.expr | None) -> bool:
    """Whether an annotation says ``bool`` (a name, or its string under postponed annotations)."""
    if isinstance(annotation, ast.Name):
        return annotation.id == "bool"
    return isinstance(annotation, ast.Constant) and annotation.value == "bool"


def _adjacent_bools(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The pairs of neighbouring ``bool`` parameters, positional or keyword-only alike: the
    keyword-only ones cannot be swapped by position, but read as flags all the same."""
    args = function.args
    return [
        f"{before.arg}, {after.arg}"
        for group in (args.posonlyargs + args.args, args.kwonlyargs)
        for before, after in itertools.pairwise(group)
        if _is_bool(before.annotation) and _is_bool(after.annotation)
    ]


def _tuple_size(node: ast.expr | None) -> int:
    """The number of values of a ``tuple[...]`` annotation or a tuple expression (0 for
    anything else, and for ``tuple[X, ...]``, a sequence of one kind)."""
    if isinstance(node, ast.Tuple):
        return len(node.elts)
    if not (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id in ("tuple", "Tuple")
        and isinstance(node.slice, ast.Tuple)
    ):
        return 0
    elts = node.slice.elts
    ellipsis = any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in elts)
    return 0 if ellipsis else len(elts)


def _wide_returns(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    returns = function.returns
    if isinstance(returns, ast.Constant) and isinstance(returns.value, str):
        returns = ast.parse(returns.value, mode="eval").body  # a string annotation
    found = []
    if returns is not None and _tuple_size(returns) > MOST_VALUES:
        found.append(f"annotated {ast.unparse(returns)}")
    found.extend(
        f"line {node.lineno}: return {ast.unparse(node.value)}"
        for node in ast.walk(function)
        if isinstance(node, ast.Return)
        and node.value is not None
        and _tuple_size(node.value) > MOST_VALUES
    )
    return found


def test_no_two_adjacent_bool_parameters() -> None:
    found = {
        f"{module}:{function.lineno} {function.name}({pair})"
        for module in MODULES
        for function in _functions(module)
        for pair in _adjacent_bools(function)
    }
    assert not found, sorted(found)


def test_no_tuple_of_more_than_three_values_returned() -> None:
    found = {
        f"{module}:{function.lineno} {function.name}: {wide}"
        for module in MODULES
        for function in _functions(module)
        for wide in _wide_returns(function)
    }
    assert not found, sorted(found)


def test_the_checks_see_what_they_forbid() -> None:
    """The walk itself, on a sample of each (so a change to how they read the source cannot
    leave both tests passing on nothing)."""
    source = (
        "def f(a: int, special: bool, plain: bool) -> tuple[int, int, int, int]:\n"
        "    return (a, a, a, a)\n"
        "def g(a: bool, b: int, c: bool) -> tuple[int, ...]:\n"
        "    return a, b, c\n"
    )
    f, g = (n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef))
    assert _adjacent_bools(f) == ["special, plain"]
    assert _wide_returns(f) == [
        "annotated tuple[int, int, int, int]",
        "line 2: return (a, a, a, a)",
    ]
    assert _adjacent_bools(g) == [] and _wide_returns(g) == []
