#!/usr/bin/env python3
"""Run the unit suite on every Python the project claims (``requires-python``) that this machine
has, other than the one ``make test`` already ran the whole suite on.

Interpreters are found as a developer would have them: ``$PYTHONS`` (paths, separated by spaces
or commas) if set, else pyenv's versions (the newest patch release of each minor version), else
``python3.X`` on ``PATH``. Each gets its own virtualenv, ``.venv-3.X``, installed with the
``dev`` extra and reinstalled when ``pyproject.toml`` changes. The unit suite there is the whole
suite but the end-to-end tests against the real model server and the real HTTP stacks: those
test servers and transports, not the interpreter, and run once on the main one.

Prints one line per interpreter (``python 3.12.1: 3142 passed in 151 s``) and exits non-zero if
any run failed. A claimed version missing from the machine is said, not failed: which versions a
machine has is not the project's to decide. Stdlib only.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NEWEST_MINOR = 13  # the newest CPython release the project claims to run on
UNIT = ["--ignore=tests/e2e", "--ignore=tests/stacks", "-q", "-p", "no:cacheprovider"]


def claimed_minors() -> list[int]:
    text = (ROOT / "pyproject.toml").read_text()
    found = re.search(r'requires-python\s*=\s*">=\s*3\.(\d+)"', text)
    if found is None:
        raise SystemExit('pythons: no requires-python = ">=3.X" in pyproject.toml')
    return list(range(int(found.group(1)), NEWEST_MINOR + 1))


def version_of(python: str) -> tuple[int, int, int] | None:
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print(*sys.version_info[:3])"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    major, minor, micro = (int(part) for part in out.split())
    return major, minor, micro


def pyenv_pythons() -> list[str]:
    if shutil.which("pyenv") is None:
        return []
    root = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip()
    versions = Path(root, "versions")
    if not root or not versions.is_dir():
        return []
    return [str(p / "bin" / "python") for p in versions.iterdir() if (p / "bin/python").exists()]


def find_pythons(minors: list[int]) -> dict[int, tuple[str, str]]:
    """minor -> (interpreter path, full version), the newest patch release of each."""
    given = os.environ.get("PYTHONS", "").replace(",", " ").split()
    candidates = given or pyenv_pythons() or [f"python3.{m}" for m in minors]
    best: dict[int, tuple[tuple[int, int, int], str]] = {}
    for python in candidates:
        version = version_of(python)
        if version is None or version[0] != 3 or version[1] not in minors:
            continue
        if version[1] not in best or version > best[version[1]][0]:
            best[version[1]] = (version, python)
    return {m: (python, ".".join(map(str, v))) for m, (v, python) in best.items()}


def ensure_venv(minor: int, python: str) -> Path:
    venv = ROOT / f".venv-3.{minor}"
    stamp = venv / ".installed"
    pyproject = ROOT / "pyproject.toml"
    if stamp.exists() and stamp.stat().st_mtime >= pyproject.stat().st_mtime:
        return venv
    print(f"pythons: installing .venv-3.{minor} (the dev extra)", flush=True)
    if not (venv / "bin" / "python").exists():
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, "-e", f"{ROOT}[dev]"], check=True, cwd=ROOT)
    stamp.touch()
    return venv


def main() -> int:
    minors = claimed_minors()
    running = sys.version_info[1]  # the main venv's: make test has run everything on it
    found = find_pythons([m for m in minors if m != running])
    failed = False
    lines = []
    for minor in minors:
        if minor == running:
            continue
        if minor not in found:
            lines.append(f"python 3.{minor}: not on this machine (claimed by requires-python)")
            continue
        python, version = found[minor]
        venv = ensure_venv(minor, python)
        started = time.monotonic()
        run = subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pytest", *UNIT],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        seconds = time.monotonic() - started
        tail = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else "no output"
        summary = re.sub(r"^=+ | =+$", "", tail)
        summary = re.sub(r" in [0-9.]+s.*$", "", summary)
        if run.returncode != 0:
            failed = True
            print(run.stdout[-20000:], run.stderr[-5000:], sep="\n", flush=True)
        lines.append(f"python {version}: {summary} in {seconds:.0f} s")
    for line in lines:
        print(line, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
