#!/usr/bin/env python3
"""Install and run the SGLang Model Gateway (``sglang-router``) in front of OpenAI-compatible
workers, for the e2e tests and benchmarks that put lmclient behind a router.

The gateway is a Rust binary inside a wheel on PyPI (no GPU, no SGLang needed). It goes into its
own venv in the cache that `scripts/llamacpp.py` uses (``$LMCLIENT_CACHE_DIR``, else
``${XDG_CACHE_HOME:-~/.cache}/lmclient``), not into the project's: its Python wrapper brings
FastAPI, uvicorn and aiohttp, which the tests must not get by accident. pip's own progress is
shown. Stdlib only, like llamacpp.py.

CLI::

    python scripts/gateway.py install       # install if needed, print the command's path
    python scripts/gateway.py path          # print the path, install nothing

Python::

    from scripts import gateway
    with gateway.Gateway([w1.root_url, w2.root_url]) as router:
        ...  # router.base_url == "http://127.0.0.1:PORT/v1"

The router renames its process (``sglang::router``), so it is stopped by its PID, never looked
up by its command line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final

if not __package__:  # run as a script: make its siblings importable as in the tests
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from scripts import llamacpp

#: The release whose answers docs/servers.md records (tests/fixtures/sglang-router/).
VERSION: Final = "0.3.2"
PIN: Final = f"sglang-router=={VERSION}"
READY_TIMEOUT: Final = 60.0
_LOG_PREFIX: Final = "gateway:"


class InstallError(RuntimeError):
    """Installing the gateway failed; the message says which step and why."""


class GatewayError(RuntimeError):
    """The gateway did not start, did not become ready, or could not be stopped."""


def _say(message: str) -> None:
    print(f"{_LOG_PREFIX} {message}", file=sys.stderr, flush=True)


def root() -> Path:
    """Where this release's venv lives (one directory per release: a new pin installs anew)."""
    return llamacpp.cache_dir() / "sglang-router" / VERSION


def binary() -> Path:
    return root() / "venv" / "bin" / "sglang-router"


def is_installed() -> bool:
    return (root() / "installed").is_file() and binary().is_file()


def ensure_installed(*, quiet: bool = False) -> Path:
    """The ``sglang-router`` command, installed first if needed (about 30 MB from PyPI).

    Safe to call from several processes at once: the venv is built under a lock
    and marked complete only when it runs."""
    if is_installed():
        return binary()
    home = root()
    home.parent.mkdir(parents=True, exist_ok=True)
    with llamacpp._install_lock(home.parent):
        if is_installed():
            return binary()
        # Built where it will live (a venv's scripts name its interpreter by path); the
        # stamp written last marks it complete, so a died installer's half is rebuilt.
        shutil.rmtree(home, ignore_errors=True)
        started = time.monotonic()
        if not quiet:
            _say(f"installing {PIN} into {home} (a 30 MB wheel, once)")
        _run([sys.executable, "-m", "venv", str(home / "venv")], "creating the venv")
        pip = [str(home / "venv" / "bin" / "python"), "-m", "pip", "install"]
        _run([*pip, "--progress-bar", "on", *(["--quiet"] if quiet else []), PIN], f"pip {PIN}")
        version = subprocess.run(
            [str(binary()), "--version"], capture_output=True, text=True, check=False
        )
        if version.returncode != 0 or VERSION not in version.stdout:
            raise InstallError(
                f"{binary()} --version answered {version.returncode}: "
                f"{(version.stdout + version.stderr).strip()[-2000:]}"
            )
        (home / "installed").write_text(version.stdout, encoding="utf-8")
    if not quiet:
        elapsed = llamacpp._fmt_duration(time.monotonic() - started)
        _say(f"installed {binary()} in {elapsed}")
    return binary()


def _run(cmd: Sequence[str], what: str) -> None:
    """A step whose output (pip's progress) goes to this process's stderr."""
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    done = subprocess.run(
        list(cmd), stdin=subprocess.DEVNULL, stdout=sys.stderr, env=env, check=False
    )
    if done.returncode != 0:
        raise InstallError(f"{what} failed (exit {done.returncode}): {' '.join(cmd)}")


class Gateway:
    """An ``sglang-router launch`` process on 127.0.0.1 in front of ``workers`` (root URLs);
    a context manager. ``start()`` blocks until every worker is listed healthy (bounded by
    ``ready_timeout``); ``stop()`` sends SIGTERM to its PID, then SIGKILL, and reaps it.

    Health checks every ``health_interval`` seconds (the gateway's default is 60), a worker
    out after ``health_failures`` failed ones: a stopped worker leaves the rotation quickly."""

    def __init__(
        self,
        workers: Sequence[str],
        *,
        backend: str = "openai",
        policy: str = "cache_aware",
        health_interval: int = 1,
        health_failures: int = 1,
        request_timeout: int = 60,
        extra_args: Sequence[str] = (),
        ready_timeout: float = READY_TIMEOUT,
        log_path: Path | None = None,
    ) -> None:
        self.workers = list(workers)
        self.backend = backend
        self.policy = policy
        self.health_interval = health_interval
        self.health_failures = health_failures
        self.request_timeout = request_timeout
        self.extra_args = tuple(extra_args)
        self.ready_timeout = ready_timeout
        self._log_path_arg = log_path
        self._proc: subprocess.Popen[bytes] | None = None
        self._port: int | None = None
        self.metrics_port = 0
        self.log_path: Path | None = None

    @property
    def root_url(self) -> str:
        if self._port is None:
            raise GatewayError("gateway not started")
        return f"http://{llamacpp.LOOPBACK}:{self._port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise GatewayError("gateway not started")
        return self._proc.pid

    @property
    def metrics_url(self) -> str:
        """The gateway's Prometheus metrics (``/metrics``)."""
        return f"http://{llamacpp.LOOPBACK}:{self.metrics_port}/metrics"

    def command(self, port: int) -> list[str]:
        return [
            str(binary()),
            "launch",
            "--host",
            llamacpp.LOOPBACK,
            "--port",
            str(port),
            "--worker-urls",
            *self.workers,
            "--backend",
            self.backend,
            "--policy",
            self.policy,
            "--health-check-interval-secs",
            str(self.health_interval),
            "--health-failure-threshold",
            str(self.health_failures),
            "--health-success-threshold",
            "1",
            "--health-check-timeout-secs",
            "2",
            # A worker stopped mid-request must not hold the request for the default 30 min.
            "--request-timeout-secs",
            str(self.request_timeout),
            # Its metrics listener defaults to port 29000: a second gateway would die on it.
            "--prometheus-host",
            llamacpp.LOOPBACK,
            "--prometheus-port",
            str(self.metrics_port),
            *self.extra_args,
        ]

    def start(self) -> Gateway:
        if self._proc is not None:
            raise GatewayError("gateway already started")
        ensure_installed()
        self._port = port = llamacpp._free_port()
        self.metrics_port = llamacpp._free_port()
        logs = llamacpp.cache_dir() / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        self.log_path = self._log_path_arg or logs / f"sglang-router-{port}.log"
        with self.log_path.open("wb") as log:
            self._proc = subprocess.Popen(
                self.command(port),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=llamacpp._child_death_hook(),
                close_fds=True,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        last = "no answer yet"
        while True:
            assert self._proc is not None and self.log_path is not None
            code = self._proc.poll()
            if code is not None:
                raise GatewayError(
                    f"sglang-router exited with code {code} before becoming ready; log "
                    f"{self.log_path}:\n{llamacpp._tail(self.log_path)}"
                )
            try:
                listed = self.get("/workers")["workers"]
                healthy = [w for w in listed if w.get("is_healthy", True)]
                if len(healthy) == len(self.workers):
                    return
                last = f"{len(healthy)} of {len(self.workers)} workers healthy"
            except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError) as exc:
                last = str(getattr(exc, "reason", exc))
            if time.monotonic() > deadline:
                raise GatewayError(
                    f"sglang-router not ready within {self.ready_timeout:.0f} s ({last}); log "
                    f"{self.log_path}:\n{llamacpp._tail(self.log_path)}"
                )
            time.sleep(0.1)

    def get(self, path: str) -> Any:
        """A GET on the gateway's root, decoded from JSON."""
        with llamacpp._NO_PROXY.open(self.root_url + path, timeout=5) as resp:
            return json.loads(resp.read())

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM to the gateway's PID, then SIGKILL; idempotent."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(timeout=10)

    def __enter__(self) -> Gateway:
        return self if self._proc is not None else self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["install", "path"])
    args = parser.parse_args(argv)
    if args.command == "install":
        try:
            print(ensure_installed())
        except InstallError as exc:
            _say(f"error: {exc}")
            return 1
        return 0
    print(binary())
    return 0 if is_installed() else 1


if __name__ == "__main__":
    sys.exit(main())
