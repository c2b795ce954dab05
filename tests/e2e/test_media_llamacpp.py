"""Media against the real llama.cpp server, whose model (Gemma 3 270M, started without
``--mmproj``) reads no image and no audio: its ``/props`` says so, lmclient refuses them before
any request, and the server itself, sent them anyway, answers with an error. No vision model
runs here: none small enough ships in a package this project's machines can install."""

from __future__ import annotations

import base64

import pytest

import lmclient
from lmclient import Audio, Image, MediaError

# A real 1x1 PNG, and a WAV of 8 silent samples
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
WAV = (
    b"RIFF\x34\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x40\x1f\x00\x00\x80\x3e\x00\x00"
    b"\x02\x00\x10\x00data\x10\x00\x00\x00" + bytes(16)
)


def test_props_say_the_model_takes_no_media(base_url: str) -> None:
    with lmclient.Client(base_url) as client:
        info = client.probe()
        assert (info.kind, info.inputs) == ("llamacpp", frozenset())
        with pytest.raises(MediaError, match="takes no image input"):
            client.generate(["What is in it?", Image.from_bytes(PNG)], max_tokens=4)
        with pytest.raises(MediaError, match="takes no audio input"):
            client.generate(["Transcribe it.", Audio.from_bytes(WAV)], max_tokens=4)
        with pytest.raises(MediaError, match="llamacpp servers take no video input"):
            client.generate(["And this?", lmclient.Video.from_url("https://h/v.mp4")])
        assert client.generate(["Say hi.", "Briefly."], max_tokens=4, temperature=0.0)


@pytest.mark.parametrize(
    ("media", "said"),
    [(Image.from_bytes(PNG), "image input is not supported"), (Audio.from_bytes(WAV), "audio")],
)
async def test_the_server_refuses_them_itself(
    base_url: str, media: lmclient.Media, said: str
) -> None:
    """The ground for the refusal: a client forced to the dialect asks no /props and sends the
    parts, which this server parses (they are its parts) and refuses for its model."""
    async with lmclient.AsyncClient(base_url, dialect="llamacpp", max_retries=0) as client:
        with pytest.raises(lmclient.APIStatusError, match=said) as caught:
            await client.generate(["What is it?", media], max_tokens=4)
    assert "unsupported content" not in str(caught.value)
