"""The media parts lmclient sends, read by the servers' own request code: vLLM's
``ChatCompletionRequest`` and its content-part parser (``chat_utils``), which hands each part to
the multimodal parser, and its media connector, which decodes the image; SGLang's
``ChatCompletionRequest`` (its ``protocol`` module, from its wheel, on the same Python). Each
runs in the vLLM venv (`scripts/vllm.py`) on the exact bytes lmclient's bodies carry; no model
is loaded (the one here has no vision)."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from lmclient import Audio, Image, Video, _core
from scripts import sglang_source, vllm

pytestmark = pytest.mark.timeout(600, func_only=True)

# A real 1x1 PNG (red), and the heads of a WAV and an MP4 (parsed, not decoded, here)
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00" + bytes(20)
MP4 = b"\x00\x00\x00\x18ftypmp42" + bytes(30)
PROMPT = [
    "What is in them?",
    Image.from_bytes(PNG),
    Image.from_url("https://example.com/a.png"),
    Audio.from_bytes(WAV),
    Video.from_bytes(MP4),
]

VLLM_READS = r"""
import json, sys
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.multimodal.media.connector import MediaConnector
from vllm.renderers.chat_utils import _parse_chat_message_content_part

class Parser:
    # what vLLM's content-part parser hands the multimodal parser, by its method names
    class model_config:
        enable_prompt_embeds = False
    def __init__(self):
        self.calls = []
    def __getattr__(self, name):
        return lambda content, uuid: self.calls.append([name, content])

out = []
for body in json.loads(sys.stdin.read()):
    request = ChatCompletionRequest.model_validate_json(body)
    parser = Parser()
    for part in request.messages[0]["content"]:
        _parse_chat_message_content_part(part, parser, wrap_dicts=False, interleave_strings=False)
    image = MediaConnector().fetch_image(parser.calls[0][1], image_mode=None)
    out.append({"calls": parser.calls, "image": [image.size, image.getpixel((0, 0))]})
print(json.dumps(out))
"""

SGLANG_READS = r"""
import json, sys, types
sglang = types.ModuleType("sglang")  # its __init__ starts the runtime; the protocol needs none
sglang.__path__ = [sys.argv[1] + "/sglang"]
sys.modules["sglang"] = sglang
# sglang.utils imports its notebook helpers from IPython, which no request touches
sys.modules["IPython"] = types.ModuleType("IPython")
sys.modules["IPython.display"] = types.SimpleNamespace(HTML=None, display=None)
from sglang.srt.entrypoints.openai.protocol import ChatCompletionRequest

request = ChatCompletionRequest.model_validate_json(sys.stdin.read())
print(json.dumps([part.model_dump(exclude_none=True) for part in request.messages[0].content]))
"""


def body(dialect: str, prompt: list[Any] = PROMPT) -> str:
    core = _core.ClientCore("http://h/v1", vllm.MODEL_ALIAS, dialect=dialect)
    sent = core.prepare("generate", prompt, str, "chat", {}).request.body
    assert sent is not None
    return sent.decode()


def run(python: Path, script: str, stdin: str, *args: str) -> Any:
    done = subprocess.run(
        [str(python), "-c", script, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def data_url(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def test_vllm_reads_every_part_lmclient_sends(vllm_installed: vllm.Installation) -> None:
    """vLLM's dialect (each kind a ``<kind>_url``), and llama.cpp's (``input_audio``), which
    vLLM reads too."""
    image = ["parse_image", data_url("image/png", PNG)]
    fetched = ["parse_image", "https://example.com/a.png"]
    vllm_sent, llamacpp_sent = run(
        vllm_installed.python, VLLM_READS, json.dumps([body("vllm"), body("llamacpp", PROMPT[:4])])
    )
    assert vllm_sent["calls"] == [
        image,
        fetched,
        ["parse_audio", data_url("audio/wav", WAV)],
        ["parse_video", data_url("video/mp4", MP4)],
    ]
    audio = {"data": base64.b64encode(WAV).decode(), "format": "wav"}
    assert llamacpp_sent["calls"] == [image, fetched, ["parse_input_audio", audio]]
    assert vllm_sent["image"] == [[1, 1], [255, 0, 0, 127]]  # the PNG, from lmclient's URL


@pytest.fixture(scope="module")
def sglang_root(vllm_installed: vllm.Installation) -> Path:
    """SGLang's Python source, which `make test` downloads (never this test): absent, a failure
    naming that step."""
    try:
        return sglang_source.locate()
    except FileNotFoundError as exc:
        pytest.fail(str(exc))


def test_the_source_is_found_not_fetched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Absent, it is a failure naming the make step; present, it is found without pip."""
    monkeypatch.setenv("LMCLIENT_CACHE_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"make test.*sglang_source\.py install"):
        sglang_source.locate()
    (tmp_path / "sglang-source" / sglang_source.VERSION / "sglang").mkdir(parents=True)
    monkeypatch.setattr(subprocess, "run", None)  # no pip: a call would be a TypeError
    assert sglang_source.ensure_installed() == sglang_source.locate()
    assert sglang_source.main(["path"]) == 0


def test_sglang_reads_every_part_lmclient_sends(
    vllm_installed: vllm.Installation, sglang_root: Path
) -> None:
    parts = run(vllm_installed.python, SGLANG_READS, body("sglang"), str(sglang_root))
    kinds = ["text", "image_url", "image_url", "audio_url", "video_url"]
    assert [p["type"] for p in parts] == kinds
    assert parts[1]["image_url"]["url"] == data_url("image/png", PNG)
    assert parts[2]["image_url"]["url"] == "https://example.com/a.png"
    assert parts[3]["audio_url"] == {"url": data_url("audio/wav", WAV)}
    assert parts[4]["video_url"]["url"] == data_url("video/mp4", MP4)
