"""Real third-party HTTP server stacks, each a process on 127.0.0.1 (or a Unix socket in a
temporary directory) started and stopped by PID.

`Stacks.get(name)` starts a stack on first use (one per session) and returns its `Stack`;
`Stacks.close()` stops every process it started. A stack that cannot run raises
`StackUnavailable` (its program is not installed: the tests skip, saying why) or `StackFailed`
(it should run but did not start: the tests fail, with the end of its log).

Every stack closes a connection left idle for `KEEPALIVE` seconds.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

__all__ = [
    "KEEPALIVE",
    "PYTHON_STACKS",
    "STACKS",
    "Stack",
    "StackFailed",
    "StackUnavailable",
    "Stacks",
    "raw_client",
]

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.stacks.app:app"
KEEPALIVE = 1  # seconds: every stack's idle keep-alive timeout
UDS_ORIGIN = "http://localhost"  # what a client of a Unix-socket stack names (Host: localhost)
READY_WITHIN = 30.0  # seconds for a process to answer GET /v1/models
STOP_WITHIN = 10.0

PYTHON_STACKS = (
    "uvicorn-h11",
    "uvicorn-httptools",
    "hypercorn",
    "granian",
    "aiohttp",
    "uvicorn-tls",
    "uvicorn-uds",
)
PROXY_STACKS = ("nginx", "nginx-nobuffer", "nginx-gzip", "haproxy")
STACKS = PYTHON_STACKS + PROXY_STACKS


@dataclass(frozen=True)
class Stack:
    """A running stack: ``url`` is its origin (``http(s)://127.0.0.1:PORT``), or with ``uds``
    (the Unix socket it listens on) the origin clients name in their requests."""

    name: str
    url: str
    uds: str | None = None
    ca_file: str | None = None  # the CA that signed its certificate (TLS)
    proxy: bool = False  # a reverse proxy in front of uvicorn
    compresses: bool = False  # gzips responses itself when the request accepts gzip


class StackUnavailable(Exception):
    """The stack's program is not installed here (and could not be): skip, saying why."""


class StackFailed(Exception):
    """The stack should run here but did not start."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def find_program(name: str) -> str | None:
    """A system program (nginx and haproxy live in /usr/sbin, not always on PATH)."""
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin", "/sbin"])
    return shutil.which(name, path=path)


class Process:
    """One server process: its own session (so that workers it forks can be found), output to a
    log file, stopped by PID."""

    def __init__(self, name: str, argv: list[str], log: Path) -> None:
        self.name = name
        self.argv = argv
        self.log = log
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        env["PYTHONUNBUFFERED"] = "1"
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                argv,
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def wait_ready(self, url: str, ca_file: str | None, uds: str | None = None) -> None:
        """Poll ``GET url/v1/models`` (over the Unix socket ``uds``, if given) until it answers
        200, the process exits, or `READY_WITHIN` passes. Between attempts the wait is on the
        process itself."""
        verify: ssl.SSLContext | bool = (
            ssl.create_default_context(cafile=ca_file) if ca_file else False
        )
        deadline = time.monotonic() + READY_WITHIN
        last = "no attempt"
        with raw_client(verify, timeout=2.0, uds=uds) as client:
            while time.monotonic() < deadline:
                try:
                    response = client.get(f"{url}/v1/models")
                    if response.status_code == 200:
                        return
                    last = f"GET /v1/models answered {response.status_code}"
                except httpx.HTTPError as exc:
                    last = f"{type(exc).__name__}: {exc}"
                try:
                    code = self.proc.wait(timeout=0.05)
                except subprocess.TimeoutExpired:
                    continue
                raise StackFailed(
                    f"{self.name} exited with status {code} before answering: "
                    f"{' '.join(self.argv)}\n{self.log_tail()}"
                )
        raise StackFailed(
            f"{self.name} did not answer within {READY_WITHIN:.0f} s ({last}): "
            f"{' '.join(self.argv)}\n{self.log_tail()}"
        )

    def stop(self) -> None:
        """SIGTERM by PID and wait (SIGKILL if it lingers); then SIGKILL whatever it left in its
        session (worker processes), which belongs to this process alone."""
        proc = self.proc
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=STOP_WITHIN)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_WITHIN)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class Stacks:
    """The session's stacks, each started on first use; the outcome of every attempt (ran,
    skipped or failed, and why) is kept for the summary line."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="lmclient-stacks-"))
        # nginx's workers run as another user when nginx starts as root; they read its dirs
        self.tmp.chmod(0o755)
        self.processes: list[Process] = []
        self.outcomes: dict[str, Stack | StackUnavailable | StackFailed] = {}
        self._ca: tuple[str, str, str] | None = None
        self._upstream: int | None = None

    def get(self, name: str) -> Stack:
        if name not in self.outcomes:
            try:
                self.outcomes[name] = self._start(name)
            except (StackUnavailable, StackFailed) as exc:
                self.outcomes[name] = exc
            if name.startswith("nginx"):  # one nginx serves the three nginx stacks
                for other in ("nginx", "nginx-nobuffer", "nginx-gzip"):
                    self.outcomes.setdefault(other, self.outcomes[name])
        outcome = self.outcomes[name]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def close(self) -> None:
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def summary(self) -> str:
        """One line: which stacks ran, which did not and why."""
        ran = [n for n in STACKS if isinstance(self.outcomes.get(n), Stack)]
        others = []
        for name in STACKS:
            outcome = self.outcomes.get(name)
            if isinstance(outcome, Exception):
                verb = "skipped" if isinstance(outcome, StackUnavailable) else "FAILED to start"
                others.append(f"{name} {verb} ({str(outcome).splitlines()[0]})")
            elif outcome is None:
                others.append(f"{name} not used")
        return (
            f"real HTTP stacks: {', '.join(ran) or 'none'} ran; "
            f"{'; '.join(others) if others else 'none missing'}"
        )

    # -- starting --------------------------------------------------------------------------

    def _launch(
        self,
        name: str,
        argv_for: Callable[[list[int]], list[str]],
        ports: int = 1,
        scheme: str = "http",
        ca_file: str | None = None,
    ) -> list[int]:
        """Start a process listening on ``ports`` free ports and wait until each answers; a
        port taken between its choice and the bind (another program's) is chosen again."""
        for attempt in range(3):
            chosen = [free_port() for _ in range(ports)]
            process = Process(name, argv_for(chosen), self.tmp / f"{name}.log")
            self.processes.append(process)
            try:
                for port in chosen:
                    process.wait_ready(f"{scheme}://127.0.0.1:{port}", ca_file)
            except StackFailed as exc:
                process.stop()
                if attempt == 2 or "already in use" not in str(exc).lower():
                    raise
                continue
            return chosen
        raise AssertionError("unreachable")

    def _start(self, name: str) -> Stack:
        if name in ("uvicorn-h11", "uvicorn-httptools"):
            http = name.split("-")[1]
            [port] = self._launch(name, lambda p: self._uvicorn(p[0], http))
            return Stack(name, f"http://127.0.0.1:{port}")
        if name == "uvicorn-tls":
            ca, cert, key = self._certificates()
            tls = ["--ssl-certfile", cert, "--ssl-keyfile", key]
            [port] = self._launch(
                name,
                lambda p: [*self._uvicorn(p[0], "httptools"), *tls],
                scheme="https",
                ca_file=ca,
            )
            return Stack(name, f"https://127.0.0.1:{port}", ca_file=ca)
        if name == "uvicorn-uds":
            return self._uvicorn_uds(name)
        if name == "hypercorn":
            argv = [
                sys.executable, "-m", "hypercorn", APP,
                "--keep-alive", str(KEEPALIVE),
                "--workers", "1",
                "--log-level", "warning",
            ]  # fmt: skip
            [port] = self._launch(name, lambda p: [*argv, "--bind", f"127.0.0.1:{p[0]}"])
            return Stack(name, f"http://127.0.0.1:{port}")
        if name == "granian":
            # granian has no HTTP/1 idle timeout of its own; hyper's header read timeout starts
            # when a kept-alive connection goes idle, so it closes idle connections after 1 s
            argv = [
                sys.executable, "-m", "granian",
                "--interface", "asgi",
                "--host", "127.0.0.1",
                "--workers", "1",
                "--http", "1",
                "--no-ws",
                "--http1-header-read-timeout", str(KEEPALIVE * 1000),
                "--no-access-log",
                "--log-level", "warning",
            ]  # fmt: skip
            [port] = self._launch(name, lambda p: [*argv, "--port", str(p[0]), APP])
            return Stack(name, f"http://127.0.0.1:{port}")
        if name == "aiohttp":
            argv = [sys.executable, "-m", "tests.stacks.aiohttp_app", "--port"]
            [port] = self._launch(name, lambda p: [*argv, str(p[0])])
            return Stack(name, f"http://127.0.0.1:{port}")
        if name.startswith("nginx"):
            return self._nginx(name)
        if name == "haproxy":
            return self._haproxy()
        raise ValueError(f"unknown stack {name!r}")

    def _uvicorn_uds(self, name: str) -> Stack:
        """uvicorn (httptools) on a Unix socket: a path short enough for any kernel (the
        temporary directory is short), new for each attempt, as a socket file left behind by a
        failed start would make the next bind fail."""
        for attempt in range(3):
            path = str(self.tmp / f"uvicorn-{attempt}.sock")
            process = Process(name, self._uvicorn(path, "httptools"), self.tmp / f"{name}.log")
            self.processes.append(process)
            try:
                process.wait_ready(UDS_ORIGIN, None, path)
            except StackFailed:
                process.stop()
                if attempt == 2:
                    raise
                continue
            return Stack(name, UDS_ORIGIN, uds=path)
        raise AssertionError("unreachable")

    @staticmethod
    def _uvicorn(port: int | str, http: str, keepalive: int = KEEPALIVE) -> list[str]:
        """uvicorn on ``port`` of 127.0.0.1, or on the Unix socket at the path ``port``."""
        bind = ["--uds", port] if isinstance(port, str) else ["--port", str(port)]
        return [
            sys.executable, "-m", "uvicorn", APP,
            "--host", "127.0.0.1",
            *bind,
            "--http", http,
            "--timeout-keep-alive", str(keepalive),
            "--log-level", "warning",
            "--no-access-log",
        ]  # fmt: skip

    def _certificates(self) -> tuple[str, str, str]:
        """A trustme CA and a certificate for 127.0.0.1: (CA file, certificate chain, key)."""
        if self._ca is None:
            import trustme

            ca = trustme.CA()
            cert = ca.issue_cert("127.0.0.1")
            ca_file, cert_file, key_file = (self.tmp / n for n in ("ca.pem", "cert.pem", "key.pem"))
            ca.cert_pem.write_to_path(str(ca_file))
            cert_file.write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
            cert.private_key_pem.write_to_path(str(key_file))
            self._ca = (str(ca_file), str(cert_file), str(key_file))
        return self._ca

    def _upstream_port(self) -> int:
        """The one uvicorn behind the reverse proxies. Its keep-alive (30 s) outlasts the
        proxies' idle upstream connections, so a proxy never reuses one it has closed."""
        if self._upstream is None:
            [self._upstream] = self._launch(
                "upstream-uvicorn", lambda p: self._uvicorn(p[0], "httptools", 30)
            )
        return self._upstream

    def _nginx(self, name: str) -> Stack:
        nginx = find_program("nginx")
        if nginx is None:
            raise StackUnavailable("nginx is not installed; `make stacks` installs it as root")
        upstream = self._upstream_port()
        prefix = self.tmp / "nginx"
        prefix.mkdir(exist_ok=True)
        prefix.chmod(0o755)
        config = prefix / "nginx.conf"
        names = ("nginx", "nginx-nobuffer", "nginx-gzip")

        def argv(ports: list[int]) -> list[str]:
            config.write_text(nginx_config(prefix, upstream, dict(zip(names, ports, strict=True))))
            return [nginx, "-p", str(prefix), "-c", str(config), "-e", str(prefix / "error.log")]

        try:
            ports = self._launch("nginx", lambda p: [*argv(p), "-g", "daemon off;"], len(names))
        except StackFailed as exc:
            errors = (prefix / "error.log").read_text(errors="replace")[-2000:]
            raise StackFailed(f"{exc}\n{errors}") from None
        for stack, port in zip(names, ports, strict=True):
            self.outcomes[stack] = Stack(
                stack, f"http://127.0.0.1:{port}", proxy=True, compresses=stack == "nginx-gzip"
            )
        outcome = self.outcomes[name]
        assert isinstance(outcome, Stack)
        return outcome

    def _haproxy(self) -> Stack:
        haproxy = find_program("haproxy")
        if haproxy is None:
            raise StackUnavailable("haproxy is not installed; `make stacks` installs it as root")
        upstream = self._upstream_port()
        config = self.tmp / "haproxy.cfg"

        def argv(ports: list[int]) -> list[str]:
            config.write_text(haproxy_config(ports[0], upstream))
            return [haproxy, "-f", str(config), "-db"]

        [port] = self._launch("haproxy", argv)
        return Stack("haproxy", f"http://127.0.0.1:{port}", proxy=True)


def raw_client(
    verify: ssl.SSLContext | bool, timeout: float, uds: str | None = None
) -> httpx.Client:
    """A plain httpx client for a stack (over its Unix socket, if it has one), not lmclient."""
    transport = httpx.HTTPTransport(verify=verify, uds=uds)
    return httpx.Client(transport=transport, timeout=timeout, trust_env=False)


def nginx_config(prefix: Path, upstream: int, ports: dict[str, int]) -> str:
    """Three servers in front of one uvicorn: proxy buffering on, off, and gzip (buffering on).
    Under ``/close/`` each answers one request per connection (``connection: close``)."""

    def server(port: int, extra: str) -> str:
        return f"""
    server {{
        listen 127.0.0.1:{port};
        {extra}
        location / {{ proxy_pass http://app; }}
        location /close/ {{ keepalive_requests 1; proxy_pass http://app/; }}
    }}"""

    gzip = (
        "gzip on; gzip_types application/json text/event-stream; gzip_min_length 0; "
        "gzip_proxied any;"
    )
    return f"""
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/client_body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    keepalive_timeout {KEEPALIVE}s;
    upstream app {{
        server 127.0.0.1:{upstream};
        keepalive 32;
        keepalive_timeout 10s;
    }}
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_set_header X-Client-Port $remote_port;
    proxy_read_timeout 60s;
    {server(ports["nginx"], "proxy_buffering on;")}
    {server(ports["nginx-nobuffer"], "proxy_buffering off;")}
    {server(ports["nginx-gzip"], "proxy_buffering on; " + gzip)}
}}
"""


def haproxy_config(port: int, upstream: int) -> str:
    """haproxy in http mode in front of uvicorn; ``/close/`` answers with ``connection: close``."""
    return f"""
global
    maxconn 1024
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-request 10s
    timeout http-keep-alive {KEEPALIVE}s
frontend front
    bind 127.0.0.1:{port}
    http-request set-header X-Client-Port %[src_port]
    http-request set-var(txn.close) bool(true) if {{ path_beg /close/ }}
    http-request set-path %[path,regsub(^/close/,/)] if {{ var(txn.close) -m bool }}
    http-after-response set-header Connection close if {{ var(txn.close) -m bool }}
    default_backend app
backend app
    server uvicorn 127.0.0.1:{upstream}
"""
