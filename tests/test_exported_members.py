"""The public API is deliberate: ``lmclient.__all__`` is exactly the package's public names, and
every lmclient type that a public method takes or returns can be imported from ``lmclient``
(after httpx's tests/test_exported_members.py)."""

from __future__ import annotations

import inspect
import pkgutil
import types
import typing
from collections.abc import Iterator
from typing import Any

import typing_extensions

import lmclient
import lmclient.testing

# What the clients import only for type checkers, so that their hints resolve here.
TYPE_CHECKING_ONLY = {
    "Self": typing_extensions.Self,
    "TypeForm": typing_extensions.TypeForm,
    "Unpack": typing_extensions.Unpack,
}


def public_names(package: types.ModuleType) -> list[str]:
    """What ``from package import *`` should give: public attributes that are not submodules."""
    return sorted(
        name
        for name in dir(package)
        if (not name.startswith("_") or name == "__version__")
        and not isinstance(getattr(package, name), types.ModuleType)
        and name != "annotations"  # `from __future__ import annotations`
        and name != "TYPE_CHECKING"
    )


def test_all_is_the_public_names() -> None:
    assert sorted(lmclient.__all__) == public_names(lmclient)
    assert sorted(lmclient.testing.__all__) == public_names(lmclient.testing)


def test_testing_exports_what_a_test_author_writes() -> None:
    """The fake, and the types its ``when=`` takes; its methods script replies and faults and
    mount it, and the fixture is the plugin's. The machinery behind it stays private."""
    assert sorted(lmclient.testing.__all__) == ["FakeLLM", "Match", "RecordedRequest"]


def test_every_name_in_all_can_be_imported() -> None:
    for package in (lmclient, lmclient.testing):
        for name in package.__all__:
            assert getattr(package, name) is not None, name


def lmclient_classes(hint: Any) -> Iterator[type]:
    """The classes defined in lmclient that a type hint mentions, however nested."""
    if isinstance(hint, type) and hint.__module__.startswith("lmclient"):
        yield hint
    origin = typing.get_origin(hint)
    if isinstance(origin, type) and origin.__module__.startswith("lmclient"):
        yield origin
    for arg in typing.get_args(hint):
        yield from lmclient_classes(arg)


def test_types_of_the_public_methods_are_exported() -> None:
    exported = {getattr(lmclient, name) for name in lmclient.__all__}
    missing: set[type] = set()
    for cls in (lmclient.Client, lmclient.AsyncClient):
        for name, method in inspect.getmembers(cls):
            if name.startswith("_") and name not in ("__init__", "__enter__", "__aenter__"):
                continue
            target = method.fget if isinstance(method, property) else method
            if not callable(target):
                continue
            names = {**TYPE_CHECKING_ONLY, **{n: getattr(lmclient, n) for n in lmclient.__all__}}
            hints = typing.get_type_hints(target, vars(inspect.getmodule(cls)), names)
            for hint in hints.values():
                missing.update(c for c in lmclient_classes(hint) if c not in exported)
    assert not missing, sorted(c.__qualname__ for c in missing)


def test_the_version_is_stated_once_and_sent() -> None:
    from lmclient.__version__ import __version__

    assert lmclient.__version__ == __version__
    with lmclient.Client("http://127.0.0.1:1/v1", model="m") as client:
        headers = dict(client._core._get_headers)
    assert headers["user-agent"] == f"lmclient/{__version__}"


def test_only_the_public_modules_have_public_names() -> None:
    """Everything else is an implementation detail, free to move: its name starts with ``_``."""

    def public_modules(package: types.ModuleType) -> set[str]:
        return {m.name for m in pkgutil.iter_modules(package.__path__) if m.name[0] != "_"}

    assert public_modules(lmclient) == {"batch", "errors", "ray", "testing"}
    assert public_modules(lmclient.testing) == {"pytest_plugin"}
