"""Images, audio and video in prompts: the media types, and how each server is sent them.

A prompt may be a list of text and media parts (``["What is in it?", Image.from_path(p)]``, one
user message), and a message's ``content`` likewise. Each server family reads media in its own
content parts, read from its source (the chat request parsers):

- vLLM (``chat_utils.py``: ``image_url``, ``audio_url``, ``video_url``, ``input_audio``) and
  SGLang (``protocol.py``: ``image_url``, ``audio_url``, ``video_url``) fetch ``http(s)`` URLs
  and decode ``data:`` URLs: every kind goes as ``{"type": "<kind>_url", "<kind>_url":
  {"url": ...}}``.
- llama.cpp (``oaicompat_chat_params_parse``, built with an ``--mmproj``): ``image_url`` (an
  ``http(s)`` URL it downloads, or a ``data:image/...;base64`` URL) and ``input_audio``
  (``{"data": <base64>, "format": "wav" | "mp3"}``); no video part. Its ``/props`` says which
  kinds the loaded model takes (``modalities``): `ServerInfo.inputs`.
- OpenAI, and servers of unknown kind: ``image_url`` and ``input_audio``, as OpenAI's API has.
- Ollama's ``/v1`` (``openai/openai.go``): ``image_url`` as a ``data:`` URL of a PNG, JPEG or
  WebP only (it refuses URLs, and has no audio or video part); LM Studio: images as ``data:``
  URLs; TGI and the SGLang gateway: images.

What a server cannot take is refused before any request (`MediaError`). The bytes are base64
encoded once, into the request body: msgspec writes ``bytes`` as base64 itself, so an
``input_audio``'s data is encoded straight into the body, and a ``data:`` URL is written by
msgspec into one buffer after its prefix (`data_url`), which the body then takes as it is.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import msgspec

from .errors import MediaError

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "MAX_MEDIA_BYTES",
    "Audio",
    "Image",
    "Media",
    "Video",
    "check_media",
    "content_media",
    "data_url",
    "prompt_messages",
    "read_part",
    "wire_messages",
]

Kind = Literal["image", "audio", "video"]

# The largest item lmclient sends unless told otherwise (``max_bytes=``): OpenAI's documented
# limit for one image, above what llama.cpp downloads for one (10 MB); a larger item would be
# uploaded whole, base64 and all, only to be refused by the server.
MAX_MEDIA_BYTES = 20 * 1024 * 1024


class Media(msgspec.Struct, frozen=True):
    """One image, audio clip or video: its bytes (``data``) or a URL the server fetches
    (``url``), and its MIME type (``""`` for a URL given without one). Made by the
    constructors of `Image`, `Audio` and `Video`; equal when their contents are.

    Made directly (``Image("image/png", data)``), it is checked as those constructors check it
    (a `MediaError` otherwise): a lower-case MIME type of its kind, well formed (type/subtype
    and parameters of HTTP's token characters: it goes into the request body), non-empty bytes
    or an ``http(s)`` URL, not both. The size bound (``max_bytes=``) is the constructors': it
    keeps a file or buffer too large for any server from being read and sent; bytes given
    directly are already the caller's, and are sent as they are."""

    mime: str
    data: bytes | None = None
    url: str | None = None
    kind: ClassVar[Kind]

    def __post_init__(self) -> None:
        name, mime, data, url = type(self).__name__, self.mime, self.data, self.url
        if (data is None) == (url is None):
            raise MediaError(f"{name}() takes its bytes (data=) or a URL (url=), one of them")
        if data is not None:
            if not isinstance(data, bytes):
                raise MediaError(f"{name}() takes data as bytes, not {type(data).__name__}")
            if not data:
                raise MediaError(f"{name} is empty")
        elif not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise MediaError(f"{name}() takes an http(s) URL, not {url!r}")
        if not isinstance(mime, str) or not (
            mime.startswith(self.kind + "/") or (url is not None and not mime)
        ):
            raise MediaError(
                f"{name} cannot be of MIME type {mime!r} (a lower-case {self.kind}/... type)"
            )
        if mime and not _WELL_FORMED.fullmatch(mime):
            raise MediaError(
                f"{name} cannot be of MIME type {mime!r}: a MIME type is type/subtype, each a "
                "token (letters, digits and !#$%&'*+-.^_`|~), then optionally parameters "
                '"; name=value", the value a token or a "quoted" string without \\, comma, '
                "semicolon or control characters"
            )

    def __repr__(self) -> str:  # never the bytes
        shown = f"{len(self.data)} bytes" if self.data is not None else repr(self.url)
        return f"{type(self).__name__}({self.mime or 'unknown type'}, {shown})"

    @classmethod
    def from_bytes(
        cls,
        data: bytes | bytearray | memoryview,
        mime: str | None = None,
        *,
        max_bytes: int = MAX_MEDIA_BYTES,
    ) -> Self:
        """The media of ``data``; its MIME type as given, else read from its first bytes (PNG,
        JPEG, GIF, WebP, WAV, MP3, FLAC, Ogg, MP4, WebM). At most ``max_bytes`` long."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"{cls.__name__}.from_bytes() takes bytes, not {type(data).__name__}")
        _check_size(cls, len(data), max_bytes)
        held = bytes(data)  # the same object when it is bytes
        return cls(_known_mime(cls, mime or _sniff(held)), held)

    @classmethod
    def from_path(
        cls,
        path: str | os.PathLike[str],
        mime: str | None = None,
        *,
        max_bytes: int = MAX_MEDIA_BYTES,
    ) -> Self:
        """The media in the regular file at ``path``, read now (its size checked before it is
        read); its MIME type as given, else from its first bytes, else from its file name."""
        data = _read_regular(cls, path, max_bytes)
        if not mime:
            mime = _sniff(data)
        if not mime:
            import mimetypes

            mime = mimetypes.guess_type(os.fspath(path))[0]
        _check_size(cls, len(data), max_bytes)
        return cls(_known_mime(cls, mime), data)

    @classmethod
    def from_url(cls, url: str, mime: str | None = None) -> Self:
        """Media the server fetches itself from an ``http(s)`` URL (not every server does:
        those that do not are refused before any request)."""
        return cls(mime.lower() if mime else "", url=url)


class Image(Media, frozen=True):
    """An image in a prompt: ``Image.from_path``, ``Image.from_bytes``, ``Image.from_url``."""

    kind: ClassVar[Kind] = "image"


class Audio(Media, frozen=True):
    """An audio clip in a prompt: ``Audio.from_path``, ``Audio.from_bytes``,
    ``Audio.from_url``."""

    kind: ClassVar[Kind] = "audio"


class Video(Media, frozen=True):
    """A video in a prompt: ``Video.from_path``, ``Video.from_bytes``, ``Video.from_url``."""

    kind: ClassVar[Kind] = "video"


_KINDS: dict[str, type[Media]] = {"image": Image, "audio": Audio, "video": Video}


def _check_size(cls: type[Media], size: int, max_bytes: int) -> None:
    if size > max_bytes:
        raise MediaError(
            f"{cls.__name__} of {size} bytes is over max_bytes={max_bytes}: pass a larger "
            "max_bytes= if the server takes it, or send a smaller one"
        )


def _read_regular(cls: type[Media], path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The bytes of the regular file at ``path``, at most ``max_bytes`` + 1 of them (bounded,
    should the file grow meanwhile). Anything else is refused: opening a FIFO waits for a writer
    without end, and a FIFO, device or socket has no size to check. The path is checked first,
    for an error that says what it is (a socket cannot even be opened); then the file is opened
    without waiting (``O_NONBLOCK``) and checked again, from the open file, should another have
    taken the path's place in between."""
    _check_regular(cls, path, os.stat(path).st_mode)
    with open(os.open(path, _READ_FLAGS), "rb") as fh:
        held = os.fstat(fh.fileno())
        _check_regular(cls, path, held.st_mode)
        _check_size(cls, held.st_size, max_bytes)
        return fh.read(max_bytes + 1)


# (no O_NONBLOCK on Windows, which has no FIFOs; O_BINARY there only)
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
_IRREGULAR = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _check_regular(cls: type[Media], path: str | os.PathLike[str], mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    what = next((name for test, name in _IRREGULAR if test(mode)), "not a regular file")
    raise MediaError(
        f"{cls.__name__}.from_path() reads regular files only: {os.fspath(path)!r} is {what}: "
        f"read its bytes yourself, within a bound, and pass them to {cls.__name__}.from_bytes()"
    )


# A MIME type as HTTP spells one (RFC 9110 8.3.1, RFC 6838): type/subtype of token characters,
# then parameters. Strict, so that what a server reads is what was meant: a parameter's value
# is a token or a quoted string without a backslash (no quoted-pair), a comma (a data: URL's
# media type ends at its first comma, RFC 2397, and servers split it there), a semicolon (they
# split parameters there) or a control character; optional spaces around each ";" only.
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_QUOTED = r'"[\x20\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]*"'
_WELL_FORMED = re.compile(rf"{_TOKEN}/{_TOKEN}(?: *; *{_TOKEN}=(?:{_TOKEN}|{_QUOTED}))*")


def _known_mime(cls: type[Media], mime: str | None) -> str:
    if not mime:
        raise MediaError(f"{cls.__name__}: the MIME type is not known: pass mime=...")
    return mime.lower()


# First bytes of the common formats: (offset, magic, MIME type)
_MAGIC = (
    (0, b"\x89PNG\r\n\x1a\n", "image/png"),
    (0, b"\xff\xd8\xff", "image/jpeg"),
    (0, b"GIF8", "image/gif"),
    (8, b"WEBP", "image/webp"),
    (8, b"WAVE", "audio/wav"),
    (0, b"ID3", "audio/mpeg"),
    (0, b"\xff\xfb", "audio/mpeg"),
    (0, b"\xff\xf3", "audio/mpeg"),
    (0, b"fLaC", "audio/flac"),
    (0, b"OggS", "audio/ogg"),
    (4, b"ftyp", "video/mp4"),
    (0, b"\x1a\x45\xdf\xa3", "video/webm"),
)


def _sniff(data: bytes) -> str | None:
    for offset, magic, mime in _MAGIC:
        if data.startswith(magic, offset):
            return mime
    return None


# -- prompts and messages ------------------------------------------------------------------


# The types `prompt_messages` tells apart, as constants: a tuple literal of names is built anew
# at each test.
_SEQUENCES = (list, Sequence)
_MAPPINGS = (dict, Mapping)
_PARTS = (str, Media)


def prompt_messages(prompt: Any) -> tuple[list[Any], bool]:
    """A chat prompt that is not a str, as messages, and whether any has parts to translate
    (`wire_messages`). A list is taken as it is: the body that holds it is encoded before the
    call returns, and never changed (a re-ask decodes the sent body); another sequence is
    copied into a list, which msgspec encodes. A list of parts (each a
    str or media) is one user message; a list of messages is each a mapping with a ``role``
    str, whose ``content`` may be a list of parts (str, media, or content-part dicts, sent as
    they are)."""
    if not isinstance(prompt, _SEQUENCES) or isinstance(prompt, str) or not prompt:
        raise TypeError(
            f"{'a prompt is required: ' if prompt is None else ''}prompt must be a str, a "
            "non-empty list of message dicts (OpenAI's messages=), or a list of parts (str and "
            "media)"
        )
    first = prompt[0]
    # (a message dict is told apart at once: isinstance against Media, a Struct, is slow)
    if type(first) is not dict and isinstance(first, _PARTS):
        parts = list(prompt)
        for part in parts:
            if not isinstance(part, _PARTS):
                raise TypeError(
                    "a prompt of parts holds str and media (Image, Audio, Video) only, not "
                    f"{type(part).__name__}; put messages in a list of their own"
                )
        return [{"role": "user", "content": parts}], True
    messages = prompt if type(prompt) is list else list(prompt)
    media = False
    for m in messages:  # a list of dicts, as nearly always, needs no look-up of the ABCs
        if not isinstance(m, _MAPPINGS) or not isinstance(m.get("role"), str):
            raise TypeError("each message must be a mapping with a 'role' str")
        content = m.get("content")
        if isinstance(content, list) and any(isinstance(p, _PARTS) for p in content):
            media = True
    return messages, media


def content_media(messages: list[Any]) -> list[Media]:
    """The media of messages, in order."""
    return [
        part
        for m in messages
        if isinstance(m.get("content"), list)
        for part in m["content"]
        if isinstance(part, Media)
    ]


@dataclass(frozen=True)
class Takes:
    """How one dialect's servers take media: the part each kind goes in (``"url"``: a
    ``<kind>_url`` part; ``"input_audio"``: OpenAI's base64 ``input_audio`` part), the kinds
    they fetch from an ``http(s)`` URL, and the only MIME types they decode (``None``: any)."""

    parts: Mapping[str, str]
    fetched: frozenset[str] = frozenset()
    mimes: frozenset[str] | None = None


_EVERY = Takes(
    {"image": "url", "audio": "url", "video": "url"}, frozenset({"image", "audio", "video"})
)
_OPENAI = Takes({"image": "url", "audio": "input_audio"}, frozenset({"image"}))
TAKES: dict[str, Takes] = {
    "vllm": _EVERY,
    "vllm-guided": _EVERY,
    "sglang": _EVERY,
    "llamacpp": _OPENAI,
    "openai": _OPENAI,
    "generic": _OPENAI,
    "tgi": Takes({"image": "url"}, frozenset({"image"})),
    "sglang-gateway": Takes({"image": "url"}, frozenset({"image"})),
    "ollama": Takes({"image": "url"}, mimes=frozenset({"image/png", "image/jpeg", "image/webp"})),
    "lmstudio": Takes({"image": "url"}),
}
# input_audio's formats, by MIME type (OpenAI's two, which llama.cpp holds to as well)
_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}
_FORMAT_MIMES = {"wav": "audio/wav", "mp3": "audio/mpeg"}


def _essence(mime: str) -> str:
    """A MIME type without its parameters: what ``input_audio``'s format says (it has no place
    for them)."""
    return mime.partition(";")[0].rstrip(" ")


def check_media(
    where: str,
    dialect: str,
    media: Sequence[Media],
    inputs: frozenset[str] | None,
    models: str,
) -> None:
    """Refuse, before any request, media that the dialect's servers cannot take, or that the
    model served cannot (``inputs``: the kinds its server says it takes; ``None``: not said)."""
    takes = TAKES[dialect]
    for m in media:
        kind = m.kind
        part = takes.parts.get(kind)
        if part is None:
            able = sorted(name for name, t in TAKES.items() if kind in t.parts)
            raise MediaError(
                f"{where}(): {dialect} servers take no {kind} input; dialects that do: "
                + ", ".join(able)
            )
        if m.url is not None and kind not in takes.fetched:
            raise MediaError(
                f"{where}(): {dialect} servers do not fetch {kind} URLs: send the bytes "
                f"({type(m).__name__}.from_path or .from_bytes)"
            )
        if takes.mimes is not None and m.mime not in takes.mimes:
            raise MediaError(
                f"{where}(): {dialect} servers decode {kind}s of the types "
                f"{', '.join(sorted(takes.mimes))} only, not {m.mime!r}"
            )
        if part == "input_audio" and (m.url is not None or _essence(m.mime) not in _AUDIO_FORMATS):
            raise MediaError(
                f"{where}(): {dialect} servers take audio as WAV or MP3 bytes only, not "
                + (repr(m.url) if m.url is not None else repr(m.mime))
            )
        if inputs is not None and kind not in inputs:
            raise MediaError(
                f"{where}(): the model {models} takes no {kind} input (its server says so)"
            )


def wire_messages(messages: list[Any], dialect: str) -> list[Any]:
    """Messages whose parts are the dialect's content parts (`check_media` has passed them):
    new dicts where a message carries parts, the others as they are."""
    parts = TAKES[dialect].parts
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            m = {**m, "content": [_part(p, parts) for p in content]}
        out.append(m)
    return out


def _part(part: Any, parts: Mapping[str, str]) -> Any:
    if isinstance(part, str):
        return {"type": "text", "text": part}
    if not isinstance(part, Media):
        return part  # a content part dict, sent as given
    if parts[part.kind] == "input_audio":
        assert part.data is not None
        return {
            "type": "input_audio",
            "input_audio": {"data": part.data, "format": _AUDIO_FORMATS[_essence(part.mime)]},
        }
    name = part.kind + "_url"
    url: Any = part.url if part.data is None else data_url(part.mime, part.data)
    return {"type": name, name: {"url": url}}


_encoder = msgspec.json.Encoder()


def data_url(mime: str, data: bytes) -> msgspec.Raw:
    """``data`` as the JSON string of its ``data:`` URL, base64 encoded once: msgspec writes
    the bytes' JSON string (``"<base64>"``) right after the prefix in one buffer of the final
    size, and its opening quote becomes the prefix's comma. The body then copies the buffer
    in as it is (`msgspec.Raw`). The prefix is encoded too (its closing quote dropped), never
    pasted: whatever the MIME type, the URL stays one JSON string."""
    head = _encoder.encode(f"data:{mime};base64")[:-1]
    buffer = bytearray(len(head) + 2 + 4 * -(-len(data) // 3))  # its exact size: no regrowth
    buffer[: len(head)] = head
    _encoder.encode_into(data, buffer, len(head))
    buffer[len(head)] = 0x2C  # ","
    return msgspec.Raw(buffer)


# -- what a request carried (lmclient.testing) ---------------------------------------------


def read_part(part: Any) -> Media | None:
    """The media of one content part as a server receives it, if it carries any (of any
    size: the sender chose its bound)."""
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    if kind == "input_audio":
        audio = part.get("input_audio")
        if not isinstance(audio, dict):
            return None
        data = _b64decode(audio.get("data"))
        fmt = str(audio.get("format"))
        return _received(Audio, _FORMAT_MIMES.get(fmt, f"audio/{fmt}"), data)
    if not isinstance(kind, str) or kind.removesuffix("_url") not in _KINDS:
        return None
    holder = part.get(kind)
    url = holder.get("url") if isinstance(holder, dict) else None
    if not isinstance(url, str):
        return None
    cls = _KINDS[kind.removesuffix("_url")]
    if not url.startswith("data:"):
        return _received(cls, "", url=url)
    mime, _, encoded = url[5:].partition(";base64,")
    return _received(cls, mime, _b64decode(encoded))


def _received(
    cls: type[Media], mime: str, data: bytes | None = None, url: str | None = None
) -> Media | None:
    """The media a part carries; ``None`` for what no constructor makes (no bytes, a type of
    another kind, a URL of another scheme)."""
    if data is None and url is None:
        return None
    try:
        return cls(mime, data, url)
    except MediaError:
        return None


def _b64decode(text: Any) -> bytes | None:
    """Base64 as a server decodes it; ``None`` for what is not."""
    import base64
    import binascii

    try:
        return base64.b64decode(text, validate=True) if isinstance(text, str) else None
    except binascii.Error:
        return None
