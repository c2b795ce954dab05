"""What the two mounts of a fake (`_server`: real sockets, `_respx`: respx routes) need of it.

A protocol, so that the mounts do not import `_fake`, which imports them when it is served or
mocked: `FakeLLM` is the one implementation."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Protocol

from ._inflight import InFlight
from ._wire import FakeResponse

__all__ = ["Mountable"]


class Mountable(Protocol):
    base_path: str
    _base_url: str | None
    _in_flight: InFlight

    def handle(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes
    ) -> FakeResponse: ...

    def _mounted_at(self, url: str) -> AbstractContextManager[str]: ...
