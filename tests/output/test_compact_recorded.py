"""The recorded comparison of issue 16, replayed: the same `list[Pet]` call to a real llama.cpp
server with lmclient's compact grammar, and with the server's own JSON grammar
(tests/fixtures/llamacpp-live/README.md). The request bodies are what lmclient sends today
with ``runaway="off"``: recorded before the runaway watch, they ask for one JSON answer."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import msgspec
import pytest

import lmclient
from lmclient import _core
from lmclient.testing import FakeLLM
from tests.helpers import LLAMACPP_LIVE


class Pet(msgspec.Struct):  # as in tests/e2e/test_compact.py, which recorded the calls
    name: Annotated[str, msgspec.Meta(max_length=20)]
    species: Literal["cat", "dog"]
    age: Annotated[int, msgspec.Meta(ge=0, le=30)]


LIVE = LLAMACPP_LIVE
PARAMS: dict[str, Any] = {"temperature": 0.0, "seed": 1, "max_tokens": 300}


def _recorded(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    request = json.loads((LIVE / f"{name}.request.json").read_text())
    response = json.loads((LIVE / f"{name}.response.json").read_text())
    return request, response


@pytest.mark.parametrize(
    ("name", "whitespace"),
    [("compact_list_pet", "compact"), ("server_whitespace_list_pet", "server")],
)
def test_the_recorded_requests_are_what_lmclient_sends(name: str, whitespace: Any) -> None:
    request, _ = _recorded(name)
    core = _core.ClientCore(
        "http://h/v1", request["model"], dialect="llamacpp", whitespace=whitespace, runaway="off"
    )
    call = core.prepare("create", "List three pets as JSON.", list[Pet], "chat", dict(PARAMS))
    assert call.request.body is not None and json.loads(call.request.body) == request


def _replay(name: str, whitespace: Any) -> lmclient.Response[list[Pet]]:
    _, response = _recorded(name)
    message = response["choices"][0]
    fake = FakeLLM(server="llamacpp")
    fake.reply(message["message"]["content"], finish_reason=message["finish_reason"])
    with fake.serve() as url, lmclient.Client(url, whitespace=whitespace) as client:
        return client.create("List three pets as JSON.", list[Pet], **PARAMS)


def test_compact_three_pets_in_45_tokens() -> None:
    _, response = _recorded("compact_list_pet")
    assert response["usage"]["completion_tokens"] == 45
    result = _replay("compact_list_pet", "compact")
    assert result.compact and len(result.value) == 3
    assert result.text.startswith('[{"name":"pet1","species":"cat","age":10},')


def test_the_servers_whitespace_ran_to_max_tokens() -> None:
    _, response = _recorded("server_whitespace_list_pet")
    assert response["usage"]["completion_tokens"] == 300
    with pytest.raises(lmclient.TruncatedError) as cut:
        _replay("server_whitespace_list_pet", "server")
    assert cut.value.text.startswith('[\n    {\n      "name"')
