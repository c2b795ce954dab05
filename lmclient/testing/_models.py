"""Which model names the fake serves, and what it does with a request for another: what the
server it plays does (`lmclient._servers.Server.unknown_model`), so that a test sees the
answer production gives.

vLLM refuses a name it does not serve with a 404. llama.cpp serves its one model whatever the
name: a generation's answer carries the model's own name, its embeddings and rerank answers the
name asked for (``json_value(request, "model", model_name)`` in tools/server/server-common.cpp).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, Literal

from lmclient._servers import SERVERS

from ._wire import FakeResponse, error_response

__all__ = ["Models"]

# What the fake does with a name it does not serve: vLLM's 404; serve it and answer with that
# name (the default fake, which serves any name as a server of each would); or serve it and
# answer with its own name (llama.cpp, which also does so for a name it knows).
Unknown = Literal["refused", "as_asked", "as_own"]


@dataclasses.dataclass(frozen=True)
class Models:
    """The names a fake serves (the first is its own, on ``GET /v1/models`` and where a
    request names none) and what it does with another."""

    names: tuple[str, ...]
    unknown: Unknown

    @classmethod
    def of(cls, models: Iterable[str] | None, server: str | None) -> Models:
        """Without ``models``, any name is served (an app's production name needs no set-up)
        and ``fake-model`` is the fake's own; with them, another name gets what ``server``
        does with it."""
        names = ("fake-model",) if models is None else tuple(models)
        if not names:
            raise ValueError("FakeLLM needs at least one model name")
        known = None if server == "generic" else SERVERS[server or "vllm"]
        if known is not None and known.unknown_model == "served":
            return cls(names, "as_own")
        return cls(names, "as_asked" if models is None else "refused")

    def asked(self, body: dict[str, Any]) -> str:
        """The name a request asks for: its ``model``, else the fake's own."""
        model = body.get("model")
        return model if isinstance(model, str) and model else self.names[0]

    def answering(self, body: dict[str, Any]) -> str:
        """The name a generation's answer carries."""
        return self.names[0] if self.unknown == "as_own" else self.asked(body)

    def refusal(self, body: dict[str, Any]) -> FakeResponse | None:
        """vLLM's 404 for a name the fake does not serve, where its server refuses one."""
        model = self.asked(body)
        if model in self.names or self.unknown != "refused":
            return None
        message = f"The model `{model}` does not exist."
        return error_response(404, message, "NotFoundError", param="model", code=404)
