"""Images, audio and video in prompts (`lmclient._media`): the media types, the exact bytes each
dialect sends, the refusals before any request, and both clients against FakeLLM over real
sockets, which records them (`RecordedRequest.media`)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import socket
import tracemalloc
from pathlib import Path
from typing import Any

import msgspec
import pytest

import lmclient
from lmclient import Audio, Image, Media, MediaError, Video, _core
from lmclient._dialects import DIALECTS, PROBE_PATHS, detect
from lmclient._media import MAX_MEDIA_BYTES, TAKES, data_url, read_part
from lmclient._status import api_error
from lmclient.testing import FakeLLM, RecordedRequest
from tests.helpers import LLAMACPP_LIVE

# A real 1x1 PNG, a WAV head, an MP3 frame head, an MP4 box: what the sniffer reads
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00" + bytes(20)
MP3 = b"ID3\x03\x00\x00\x00\x00\x00\x00" + bytes(30)
MP4 = b"\x00\x00\x00\x18ftypmp42" + bytes(30)
QUESTION = "What is in it?"
# What tests/fixtures/llamacpp-live/chat_*_no_mmproj sent: the PNG, and a WAV of 8 silent samples
IMAGE_PNG = Image.from_bytes(PNG)
AUDIO_WAV = Audio.from_bytes(
    b"RIFF\x34\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x40\x1f\x00\x00\x80\x3e\x00\x00"
    b"\x02\x00\x10\x00data\x10\x00\x00\x00" + bytes(16)
)
# The recorded /props of a real llama.cpp (Gemma 3 270M, no --mmproj)
PROPS = json.loads((LLAMACPP_LIVE / "props.response.json").read_bytes())


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def body_bytes(dialect: str, prompt: Any, **kw: Any) -> bytes:
    core = _core.ClientCore("http://h/v1", "m", dialect=dialect, **kw)
    body = core.prepare("generate", prompt, str, "chat", {}).request.body
    assert body is not None
    return body


def compact(value: Any) -> bytes:
    """JSON as the body spells it: no whitespace."""
    return json.dumps(value, separators=(",", ":")).encode()


def url_part(kind: str, url: str) -> dict[str, Any]:
    return {"type": f"{kind}_url", f"{kind}_url": {"url": url}}


# -- the media types -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "data", "mime"),
    [
        (Image, PNG, "image/png"),
        (Image, b"\xff\xd8\xff\xe0" + bytes(8), "image/jpeg"),
        (Image, b"GIF89a" + bytes(8), "image/gif"),
        (Image, b"RIFF\x00\x00\x00\x00WEBPVP8 ", "image/webp"),
        (Audio, WAV, "audio/wav"),
        (Audio, MP3, "audio/mpeg"),
        (Audio, b"\xff\xfb\x90\x00" + bytes(8), "audio/mpeg"),
        (Audio, b"\xff\xf3\x90\x00" + bytes(8), "audio/mpeg"),
        (Audio, b"fLaC" + bytes(8), "audio/flac"),
        (Audio, b"OggS" + bytes(8), "audio/ogg"),
        (Video, MP4, "video/mp4"),
        (Video, b"\x1a\x45\xdf\xa3" + bytes(8), "video/webm"),
    ],
)
def test_from_bytes_reads_the_type_from_the_first_bytes(
    cls: type[Media], data: bytes, mime: str
) -> None:
    media = cls.from_bytes(data)
    assert (type(media), media.mime, media.data, media.url) == (cls, mime, data, None)


def test_from_bytes_takes_a_given_type_of_its_kind_only() -> None:
    assert Image.from_bytes(b"raw", "IMAGE/X-Raw").mime == "image/x-raw"
    assert Image.from_bytes(bytearray(PNG)).data == PNG
    with pytest.raises(MediaError, match="Audio cannot be of MIME type 'image/png'"):
        Audio.from_bytes(PNG, "image/png")
    with pytest.raises(MediaError, match="Video cannot be of MIME type 'image/png'"):
        Video.from_bytes(PNG)
    with pytest.raises(MediaError, match="MIME type is not known: pass mime="):
        Image.from_bytes(b"not a known format")
    with pytest.raises(MediaError, match="Image is empty"):
        Image.from_bytes(b"", "image/png")
    with pytest.raises(TypeError, match="takes bytes, not str"):
        Image.from_bytes("iVBOR", "image/png")  # type: ignore[arg-type]


def test_sizes_are_bounded() -> None:
    assert MAX_MEDIA_BYTES == 20 * 1024 * 1024
    assert Image.from_bytes(PNG, max_bytes=len(PNG)).data == PNG
    with pytest.raises(MediaError, match=f"Image of {len(PNG)} bytes is over max_bytes=10"):
        Image.from_bytes(PNG, max_bytes=10)
    with pytest.raises(MediaError, match="over max_bytes=20971520"):
        Image.from_bytes(PNG + bytes(MAX_MEDIA_BYTES))


def test_from_path(tmp_path: Path) -> None:
    png = tmp_path / "dot.png"
    png.write_bytes(PNG)
    assert Image.from_path(png) == Image.from_bytes(PNG)
    assert Image.from_path(str(png), "image/x-dot").mime == "image/x-dot"
    named = tmp_path / "clip.mp3"  # not sniffed: the file name says
    named.write_bytes(b"\x00" * 16)
    assert Audio.from_path(named).mime == "audio/mpeg"
    unknown = tmp_path / "blob"
    unknown.write_bytes(b"\x00" * 16)
    with pytest.raises(MediaError, match="not known"):
        Image.from_path(unknown)
    with pytest.raises(MediaError, match=f"Image of {len(PNG)} bytes is over max_bytes=8"):
        Image.from_path(png, max_bytes=8)
    with pytest.raises(FileNotFoundError):
        Image.from_path(tmp_path / "missing.png")


@pytest.mark.timeout(30)  # the FIFO's open waited for a writer without end
def test_from_path_reads_regular_files_only(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "s"))
    try:
        for path, what in [
            (fifo, "a FIFO"),
            (tmp_path, "a directory"),
            (tmp_path / "s", "a socket"),
            (Path(os.devnull), "a character device"),
        ]:
            said = f"Image.from_path() reads regular files only: {str(path)!r} is {what}"
            with pytest.raises(MediaError, match=re.escape(said) + ".*Image.from_bytes"):
                Image.from_path(path, "image/png")
    finally:
        server.close()


def test_a_file_swapped_after_its_check_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The type is read again from the open file: a FIFO put in the path's place between the
    check and the open is opened without waiting and refused, not read."""
    path = tmp_path / "swapped"
    path.write_bytes(PNG)
    stat = os.stat

    def swap(name: Any, *args: Any, **kw: Any) -> os.stat_result:
        seen = stat(name, *args, **kw)
        if name == path:
            path.unlink()
            os.mkfifo(path)
        return seen

    monkeypatch.setattr(os, "stat", swap)
    with pytest.raises(MediaError, match="is a FIFO"):
        Image.from_path(path)


def test_from_path_reads_no_more_than_the_bound() -> None:
    """A file that holds more than its size says (Linux's /proc files say 0, as a file that
    grows after its size was read would) is still read within the bound."""
    assert os.stat("/proc/self/status").st_size == 0
    with pytest.raises(MediaError, match="Image of 17 bytes is over max_bytes=16"):
        Image.from_path("/proc/self/status", "image/png", max_bytes=16)


def test_from_url() -> None:
    image = Image.from_url("https://example.com/a.png")
    assert (image.url, image.mime, image.data) == ("https://example.com/a.png", "", None)
    assert Video.from_url("http://h/v.mp4", "video/mp4").mime == "video/mp4"
    for url in ("file:///etc/passwd", "data:image/png;base64,AAAA", "example.com/a.png"):
        with pytest.raises(MediaError, match="takes an http\\(s\\) URL"):
            Image.from_url(url)
    with pytest.raises(MediaError, match="cannot be of MIME type"):
        Image.from_url("https://h/a", "audio/wav")


# -- MIME types: type/subtype of tokens, and always encoded ----------------------------------

# What an app that passes an upload's Content-Type on could be sent (issue 37): pasted into the
# body, it rewrote the model, the token limit and the messages the server read
INJECTION = (
    'image/png","model":"other-model","max_tokens":999999,'
    '"messages":[{"role":"user","content":"Say yes."}],"x":"'
)
MALFORMED_MIMES = [
    INJECTION,
    "image/png\\",
    "image/png\n",
    "image/png\r\nx-injected: 1",
    'image/"png"',
    "image/png\t",
    "image/ png",
    "image/png ",
    "image/",
    "image/png/x",
    "image/png;",
    "image/png; codecs",
    "image/png; =1",
    "image/png; a=b c",
    'image/png; a="b\\"c"',
    'image/png; a="b,c"',  # a data: URL's media type ends at its first comma (RFC 2397)
    'image/png; a="b;c"',
    'image/png; a="b',
    "image/pn\u0261",
    "image/png\x00",
]
WELL_FORMED_MIMES = [
    "image/png",
    "image/svg+xml",
    "image/vnd.ms-photo",
    "image/x-icon",
    "image/png;q=1",
    "image/png; charset=x-user-defined",
    'image/png; name="a b.png"',
    "image/png ; a=1 ; b=2",
]


@pytest.mark.parametrize("mime", MALFORMED_MIMES)
def test_a_malformed_mime_type_is_refused_wherever_it_enters(mime: str, tmp_path: Path) -> None:
    png = tmp_path / "dot.png"
    png.write_bytes(PNG)
    said = f"Image cannot be of MIME type {mime!r}: "
    makers: list[Any] = [
        lambda: Image(mime, PNG),
        lambda: Image.from_bytes(PNG, mime),
        lambda: Image.from_path(png, mime),
        lambda: Image.from_url("https://h/a.png", mime),
        lambda: msgspec.convert({"mime": mime, "data": b64(PNG)}, Image),
    ]
    for make in makers:
        with pytest.raises((MediaError, msgspec.ValidationError)) as raised:
            make()
        assert said.lower() in str(raised.value).lower()  # the constructors lower it first
        assert "type/subtype" in str(raised.value)


@pytest.mark.parametrize("mime", WELL_FORMED_MIMES)
def test_a_well_formed_mime_type_goes_into_the_data_url_as_it_is(mime: str) -> None:
    image = Image.from_bytes(PNG, mime)
    assert image == Image(mime, PNG) == Image.from_bytes(PNG, mime.upper())
    content = msgspec.json.decode(body_bytes("vllm", [QUESTION, image]))["messages"][0]["content"]
    assert content[1] == url_part("image", f"data:{mime};base64,{b64(PNG)}")
    assert read_part(content[1]) == image


def test_a_type_with_parameters_goes_as_input_audio_by_its_type() -> None:
    """``input_audio`` has a format and no MIME type: the parameters do not change it."""
    audio = Audio.from_bytes(WAV, "audio/wav; codecs=1")
    content = msgspec.json.decode(body_bytes("llamacpp", [QUESTION, audio]))["messages"][0]
    assert content["content"][1] == {
        "type": "input_audio",
        "input_audio": {"data": b64(WAV), "format": "wav"},
    }
    with pytest.raises(MediaError, match=r"decode images of the types .* not 'image/png;q=1'"):
        body_bytes("ollama", [QUESTION, Image.from_bytes(PNG, "image/png;q=1")])


@pytest.mark.parametrize("mime", ['image/x"', "image/x\\", "image/x\n", "image/\u00e9", INJECTION])
def test_a_data_url_encodes_its_mime_type(mime: str) -> None:
    """Whatever it is given (the types check the MIME type first), a data: URL is one JSON
    string: its MIME type is encoded, never pasted."""
    body = msgspec.json.encode({"model": "m", "u": data_url(mime, PNG)})
    assert json.loads(body) == {"model": "m", "u": f"data:{mime};base64,{b64(PNG)}"}


def test_an_injected_mime_type_never_reaches_the_server(fake: FakeLLM, url: str) -> None:
    with lmclient.Client(url, model="fake-model") as client:
        with pytest.raises(MediaError, match="cannot be of MIME type"):
            client.generate([QUESTION, Image.from_bytes(PNG, INJECTION)])
        sent = [
            Image.from_bytes(PNG, "image/svg+xml"),
            Audio.from_bytes(WAV, "audio/wav; codecs=1"),
        ]
        client.generate([QUESTION, *sent])
    (request,) = fake.calls
    assert json.loads(request.raw_body)["model"] == request.model == "fake-model"
    assert request.media == sent


def test_made_directly_it_is_checked_as_the_constructors_check_it() -> None:
    assert Image("image/png", PNG) == Image.from_bytes(PNG)
    assert Audio("", url="https://h/a.wav") == Audio.from_url("https://h/a.wav")
    refused: list[tuple[Any, str]] = [
        (lambda: Image("audio/wav", PNG), "Image cannot be of MIME type 'audio/wav'"),
        (lambda: Image("IMAGE/PNG", PNG), "a lower-case image/... type"),
        (lambda: Image("", PNG), "cannot be of MIME type ''"),
        (lambda: Image(3, PNG), "cannot be of MIME type 3"),  # type: ignore[arg-type]
        (lambda: Image("image/png", b""), "Image is empty"),
        (lambda: Image("image/png", "x"), "takes data as bytes, not str"),  # type: ignore[arg-type]
        (lambda: Video("video/mp4", url="file:///etc/passwd"), "takes an http\\(s\\) URL"),
        (lambda: Video("video/mp4", url=b"https://h"), "takes an http\\(s\\) URL"),  # type: ignore[arg-type]
        (lambda: Audio("audio/wav"), "takes its bytes \\(data=\\) or a URL"),
        (lambda: Audio("audio/wav", WAV, "https://h/a.wav"), "one of them"),
    ]
    for make, match in refused:
        with pytest.raises(MediaError, match=match):
            make()
    with pytest.raises(msgspec.ValidationError, match="takes an http\\(s\\) URL"):
        msgspec.convert({"mime": "image/png", "url": "ftp://h"}, Image)  # decoded: msgspec's error


def test_the_size_bound_is_the_constructors() -> None:
    """``max_bytes=`` bounds what a constructor reads; bytes given directly are the caller's."""
    big = PNG + bytes(MAX_MEDIA_BYTES)
    assert Image.from_bytes(big, max_bytes=len(big)).data == big
    with pytest.raises(MediaError, match="over max_bytes=20971520"):
        Image.from_bytes(big)
    assert Image("image/png", big).data is big


def test_repr_never_shows_the_bytes_and_equality_is_by_content() -> None:
    assert repr(Image.from_bytes(PNG)) == f"Image(image/png, {len(PNG)} bytes)"
    assert repr(Audio.from_url("https://h/a.wav")) == "Audio(unknown type, 'https://h/a.wav')"
    assert Image.from_bytes(PNG) == Image.from_bytes(bytes(PNG))
    assert Image.from_bytes(PNG) != Image.from_bytes(PNG + b"\x00")
    assert len({Image.from_bytes(PNG), Image.from_bytes(PNG)}) == 1
    with pytest.raises(AttributeError):
        Image.from_bytes(PNG).mime = "image/gif"  # type: ignore[misc]


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 6, 1000, 65537])
def test_a_data_url_is_the_standard_base64(size: int) -> None:
    data = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    expected = f'"data:image/png;base64,{b64(data)}"'.encode()
    assert bytes(data_url("image/png", data)) == expected
    assert msgspec.json.encode({"u": data_url("image/png", data)}) == b'{"u":' + expected + b"}"


def test_base64_is_written_once() -> None:
    """A data: URL costs one buffer of its base64 beyond what the body costs anyway, which is
    what bytes that msgspec encodes straight into the body (input_audio) cost: the bytes are
    not encoded twice, nor copied on the way."""
    data = os.urandom(3 * 1024 * 1024)
    peaks = {}
    for dialect, media in (
        ("vllm", Image.from_bytes(data, "image/png")),
        ("llamacpp", Audio.from_bytes(data, "audio/wav")),
    ):
        # (runaway="off": the body is the prompt's, with no watch fields in the bound below)
        core = _core.ClientCore("http://h/v1", "m", dialect=dialect, runaway="off")
        core.prepare("generate", ["x", media], str, "chat", {})  # plans, caches: made
        tracemalloc.start()
        try:
            body = core.prepare("generate", ["x", media], str, "chat", {}).request.body
            peaks[dialect] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert body is not None and len(body) < len(data) * 4 / 3 + 200
    encoded = len(data) * 4 / 3
    assert peaks["vllm"] - peaks["llamacpp"] < encoded * 1.05
    assert peaks["llamacpp"] < encoded * 2 + len(data) * 0.1


# -- what each dialect sends -----------------------------------------------------------------

IMAGE = Image.from_bytes(PNG)
IMAGE_URL = Image.from_url("https://example.com/a.png")
AUDIO = Audio.from_bytes(WAV)
MP3_AUDIO = Audio.from_bytes(MP3)
VIDEO = Video.from_bytes(MP4)


def sent_messages(dialect: str, prompt: Any) -> bytes:
    body = body_bytes(dialect, prompt)
    start = body.index(b'"messages":') + len(b'"messages":')
    messages = msgspec.json.decode(body)["messages"]
    return body[start : start + len(compact(messages))]


@pytest.mark.parametrize("dialect", ["vllm", "vllm-guided", "sglang"])
def test_vllm_and_sglang_get_a_url_part_of_every_kind(dialect: str) -> None:
    prompt = [QUESTION, IMAGE, IMAGE_URL, AUDIO, VIDEO, Video.from_url("https://h/v.mp4")]
    content = [
        {"type": "text", "text": QUESTION},
        url_part("image", f"data:image/png;base64,{b64(PNG)}"),
        url_part("image", "https://example.com/a.png"),
        url_part("audio", f"data:audio/wav;base64,{b64(WAV)}"),
        url_part("video", f"data:video/mp4;base64,{b64(MP4)}"),
        url_part("video", "https://h/v.mp4"),
    ]
    assert sent_messages(dialect, prompt) == compact([{"role": "user", "content": content}])


@pytest.mark.parametrize("dialect", ["llamacpp", "openai", "generic"])
def test_llamacpp_and_openai_get_image_url_and_input_audio(dialect: str) -> None:
    prompt = [QUESTION, IMAGE, IMAGE_URL, AUDIO, MP3_AUDIO]
    content = [
        {"type": "text", "text": QUESTION},
        url_part("image", f"data:image/png;base64,{b64(PNG)}"),
        url_part("image", "https://example.com/a.png"),
        {"type": "input_audio", "input_audio": {"data": b64(WAV), "format": "wav"}},
        {"type": "input_audio", "input_audio": {"data": b64(MP3), "format": "mp3"}},
    ]
    assert sent_messages(dialect, prompt) == compact([{"role": "user", "content": content}])


@pytest.mark.parametrize("dialect", ["ollama", "lmstudio", "tgi", "sglang-gateway"])
def test_image_only_dialects_get_image_url(dialect: str) -> None:
    content = [
        url_part("image", f"data:image/png;base64,{b64(PNG)}"),
        {"type": "text", "text": "?"},
    ]
    expected = compact([{"role": "user", "content": content}])
    assert sent_messages(dialect, [IMAGE, "?"]) == expected


def test_message_content_is_translated_and_the_rest_sent_as_given() -> None:
    """Media in a message's content; the other messages, and content-part dicts, as they are;
    the caller's messages are not changed."""
    part = {"type": "text", "text": "as given", "extra": 1}
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": ["Compare", IMAGE, part, IMAGE_URL], "name": "u"},
    ]
    before = repr(messages)
    expected = [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Compare"},
                url_part("image", f"data:image/png;base64,{b64(PNG)}"),
                part,
                url_part("image", "https://example.com/a.png"),
            ],
            "name": "u",
        },
    ]
    assert sent_messages("vllm", messages) == compact(expected)
    assert repr(messages) == before
    plain = [{"role": "user", "content": [part]}]  # content parts of dicts alone: untouched
    assert sent_messages("vllm", plain) == compact(plain)


def test_a_prompt_of_text_parts_only() -> None:
    content = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert sent_messages("llamacpp", ["a", "b"]) == compact([{"role": "user", "content": content}])


def test_every_dialect_has_its_row() -> None:
    assert set(TAKES) == set(DIALECTS)


# -- refusals, before any request ------------------------------------------------------------


@pytest.mark.parametrize(
    ("dialect", "media", "match"),
    [
        ("llamacpp", VIDEO, "llamacpp servers take no video input; dialects that do: sglang, "),
        ("openai", VIDEO, "openai servers take no video input"),
        ("ollama", AUDIO, "ollama servers take no audio input"),
        ("tgi", AUDIO, "tgi servers take no audio input"),
        ("ollama", IMAGE_URL, "ollama servers do not fetch image URLs: send the bytes"),
        ("lmstudio", IMAGE_URL, "lmstudio servers do not fetch image URLs"),
        ("llamacpp", Audio.from_url("https://h/a.wav"), "do not fetch audio URLs"),
        ("ollama", Image.from_bytes(b"GIF89a" + bytes(8)), "image/jpeg, image/png, image/webp"),
        ("llamacpp", Audio.from_bytes(b"fLaC" + bytes(8)), "WAV or MP3 bytes only, not 'audio/"),
    ],
)
def test_what_a_dialect_cannot_take_is_refused(dialect: str, media: Media, match: str) -> None:
    with pytest.raises(MediaError, match=match):
        body_bytes(dialect, [QUESTION, media])


def test_media_are_refused_on_the_completions_endpoint() -> None:
    core = _core.ClientCore("http://h/v1", "m", dialect="vllm")
    with pytest.raises(TypeError, match="takes a str prompt"):
        core.prepare("create", [QUESTION, IMAGE], str, "completions", {})


@pytest.mark.parametrize(
    ("prompt", "match"),
    [
        ([QUESTION, {"role": "user", "content": "x"}], "holds str and media .* not dict"),
        ([IMAGE, 3], "not int"),
        ([], "non-empty list"),
        ([{"content": [IMAGE]}], "'role' str"),
    ],
)
def test_bad_prompts_are_type_errors(prompt: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        body_bytes("vllm", prompt)


def test_llamacpp_props_say_which_kinds_the_model_takes() -> None:
    """The recorded /props of a real llama.cpp without a projector: no media kind."""
    props = PROPS
    assert props["modalities"] == {"vision": False, "video": False, "audio": False}
    assert detect("127.0.0.1", {"/props": props}, ["gemma-3-270m"]).inputs == frozenset()
    vision = {**props, "modalities": {"vision": True, "audio": False}}
    assert detect("h", {"/props": vision}, []).inputs == frozenset({"image"})
    assert detect("h", {"/version": {"version": "0.33.0"}}, []).inputs is None


def test_a_model_without_the_kind_is_refused() -> None:
    core = _core.ClientCore("http://h/v1", "gemma", dialect="llamacpp")
    core.adopt_probes(
        [PROPS if p == "/props" else None for p in PROBE_PATHS] + [["gemma"]], mocked=False
    )
    with pytest.raises(MediaError, match="the model gemma takes no image input"):
        core.prepare("generate", [QUESTION, IMAGE], str, "chat", {})
    core.prepare("generate", [QUESTION, "text parts pass"], str, "chat", {})


@pytest.mark.parametrize(
    ("name", "media", "said"),
    [("chat_image_no_mmproj", IMAGE_PNG, "image"), ("chat_audio_no_mmproj", AUDIO_WAV, "audio")],
)
def test_recorded_llamacpp_exchanges(name: str, media: Media, said: str) -> None:
    """What lmclient sends is the request a real llama.cpp parsed (its own parts), and refused
    for a model without a projector; the answer is a `ServerError` with the server's words."""
    # (recorded before the runaway watch, read whole: runaway="off" sends it as it was)
    core = _core.ClientCore("http://h/v1", "gemma-3-270m", dialect="llamacpp", runaway="off")
    prompt = ["What is in it?" if said == "image" else "Transcribe it.", media]
    params = {"max_tokens": 8, "temperature": 0.0}
    sent = core.prepare("generate", prompt, str, "chat", params).request.body
    assert sent == (LLAMACPP_LIVE / f"{name}.request.json").read_bytes()
    error = api_error(500, {}, (LLAMACPP_LIVE / f"{name}.response.json").read_bytes())
    assert isinstance(error, lmclient.ServerError)
    assert f"{said} input is not supported" in str(error)


# -- the recorded request --------------------------------------------------------------------


def test_read_part_is_the_inverse_of_what_is_sent() -> None:
    for dialect in ("vllm", "llamacpp"):
        media = [IMAGE, IMAGE_URL, AUDIO, MP3_AUDIO]
        if dialect == "vllm":
            media.append(VIDEO)
        content = msgspec.json.decode(body_bytes(dialect, [QUESTION, *media]))["messages"][0]
        found = [read_part(p) for p in content["content"]]
        assert found == [None, *media]


@pytest.mark.parametrize(
    "part",
    [
        "text",
        {"type": "text", "text": "x"},
        {"type": "image_url", "image_url": "https://h/a.png"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,***"}},
        {"type": "input_audio", "input_audio": {"data": 3, "format": "wav"}},
        {"type": "input_audio", "input_audio": "AAAA"},
        {"type": 7},
        {"type": "image_url", "image_url": {"url": "data:audio/wav;base64,AAAA"}},
        {"type": "image_url", "image_url": {"url": "ftp://h/a.png"}},
        {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}},
    ],
)
def test_read_part_skips_what_carries_no_media(part: Any) -> None:
    assert read_part(part) is None


def test_read_part_takes_media_over_the_default_bound() -> None:
    """The sender chose the bound (``max_bytes=``): what it sent is recorded whatever its size."""
    big = Image.from_bytes(PNG + bytes(MAX_MEDIA_BYTES), max_bytes=2 * MAX_MEDIA_BYTES)
    url = b64(big.data or b"")
    assert (
        read_part({"type": "image_url", "image_url": {"url": f"data:image/png;base64,{url}"}})
        == big
    )


def test_recorded_requests_without_messages_carry_no_media() -> None:
    bodies: list[Any] = [None, [], {"prompt": "x"}, {"messages": "x"}, {"messages": [3, {}]}]
    for body in bodies:
        assert RecordedRequest("POST", "/v1/chat/completions", "chat", {}, body).media == []


# -- both clients, FakeLLM over real sockets ------------------------------------------------


def test_sync_client_sends_media_and_the_fake_records_them(fake: FakeLLM, url: str) -> None:
    fake.reply("a dot")
    with lmclient.Client(url, model="fake-model") as client:
        assert client.generate([QUESTION, IMAGE, AUDIO]) == "a dot"
    request = fake.last_request
    assert request.media == [IMAGE, AUDIO]
    assert request.prompt == QUESTION
    assert f'"url":"data:image/png;base64,{b64(PNG)}"'.encode() in request.raw_body


def test_async_client_sends_media_and_the_fake_records_them(fake: FakeLLM, url: str) -> None:
    async def main() -> list[str]:
        async with lmclient.AsyncClient(url, model="fake-model") as client:
            one = await client.generate([QUESTION, IMAGE])
            messages = [{"role": "user", "content": ["Compare", IMAGE, VIDEO]}]
            return [one, await client.generate(messages, lmclient.Choice(["same", "not"]))]

    fake.reply("a dot", times=1)
    assert asyncio.run(main())[0] == "a dot"
    first, second = fake.calls
    assert first.media == [IMAGE]
    assert second.media == [IMAGE, VIDEO]
    assert second.texts("user") == ["Compare"]


def test_many_prompts_with_media(fake: FakeLLM, url: str) -> None:
    with lmclient.Client(url, model="fake-model") as client:
        results = client.generate_many([[QUESTION, IMAGE], [QUESTION, IMAGE_URL]], bool)
    assert all(isinstance(r, bool) for r in results)
    assert sorted(len(r.raw_body) for r in fake.calls)[0] > 0
    assert {r.media[0] for r in fake.calls} == {IMAGE, IMAGE_URL}


def llamacpp_fake(modalities: dict[str, bool]) -> FakeLLM:
    fake = FakeLLM(["gemma"], server="llamacpp")
    fake.add_route("GET", "/props", {**PROPS, "modalities": modalities})
    return fake


def test_a_model_without_vision_is_refused_before_the_call_sync() -> None:
    fake = llamacpp_fake({"vision": False, "audio": True})
    with fake.serve() as url, lmclient.Client(url) as client:
        with pytest.raises(MediaError, match="the model gemma takes no image input"):
            client.generate([QUESTION, IMAGE])
        assert client.generate(["Say it.", AUDIO]) == fake.default_text
    assert [r.media for r in fake.calls] == [[AUDIO]]


def test_a_model_without_audio_is_refused_before_the_call_async() -> None:
    fake = llamacpp_fake({"vision": True, "audio": False})

    async def main(url: str) -> None:
        async with lmclient.AsyncClient(url) as client:
            with pytest.raises(MediaError, match="the model gemma takes no audio input"):
                await client.generate(["Say it.", AUDIO])
            await client.generate([QUESTION, IMAGE])

    with fake.serve() as url:
        asyncio.run(main(url))
    assert [r.media for r in fake.calls] == [[IMAGE]]


def test_a_token_count_takes_no_media(fake: FakeLLM, url: str) -> None:
    with lmclient.Client(url, model="fake-model") as client:
        with pytest.raises(TypeError, match="messages of text, without media"):
            client.count_tokens([QUESTION, IMAGE])
        assert client.count_tokens([QUESTION, "and more"]) > 0
    assert [r.endpoint for r in fake.requests if r.endpoint == "chat"] == []


def test_a_reask_sends_the_media_again(fake: FakeLLM, url: str) -> None:
    fake.reply("maybe", times=1)
    with lmclient.Client(url, model="fake-model", max_reasks=1) as client:
        assert isinstance(client.generate([QUESTION, IMAGE], bool), bool)
    first, second = fake.calls
    assert first.media == second.media == [IMAGE]
    assert second.texts("assistant") == ["maybe"]
