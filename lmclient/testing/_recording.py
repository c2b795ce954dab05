"""What the fake remembers about each request, shaped for assertions in tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ._constraints import Constraint, read_constraint

if TYPE_CHECKING:
    from lmclient import Media

__all__ = ["Endpoint", "RecordedRequest", "message_text"]

Endpoint = Literal["chat", "completions", "models", "embeddings", "tokenize", "scoring", "other"]


@dataclass(frozen=True)
class RecordedRequest:
    """One request as received: ``headers`` have lower-case keys, ``body`` is decoded JSON
    (``None`` when the body is empty or not JSON) and ``raw_body`` the bytes sent."""

    method: str
    path: str
    endpoint: Endpoint
    headers: dict[str, str]
    body: Any
    raw_body: bytes = field(default=b"", repr=False)

    @property
    def constraint(self) -> Constraint:
        """The constraint the body carries, in neutral form (raises ``ConstraintError``)."""
        return read_constraint(self.body)

    @property
    def model(self) -> str | None:
        model = self.body.get("model") if isinstance(self.body, dict) else None
        return model if isinstance(model, str) else None

    @property
    def stream(self) -> bool:
        return isinstance(self.body, dict) and self.body.get("stream") is True

    @property
    def prompt(self) -> str:
        """The last user message's text (chat) or the prompt (completions); ``""`` otherwise."""
        if not isinstance(self.body, dict):
            return ""
        prompt = self.body.get("prompt")
        if isinstance(prompt, str):
            return prompt
        if isinstance(prompt, list):
            return "\n".join(p for p in prompt if isinstance(p, str))
        messages = self.body.get("messages")
        if isinstance(messages, list):
            for message in reversed(messages):
                if isinstance(message, dict) and message.get("role") == "user":
                    return message_text(message)
        return ""

    @property
    def tools(self) -> list[str]:
        """The names of the tools offered (``tools``), in order; the results sent back are
        ``texts("tool")``."""
        tools = self.body.get("tools") if isinstance(self.body, dict) else None
        if not isinstance(tools, list):
            return []
        functions = [t.get("function") for t in tools if isinstance(t, dict)]
        return [
            f["name"] for f in functions if isinstance(f, dict) and isinstance(f.get("name"), str)
        ]

    @property
    def media(self) -> list[Media]:
        """The images, audio and video of the chat messages, oldest first, as lmclient's types
        (`lmclient.Image`, ...): each ``data:`` URL or base64 ``input_audio`` decoded into its
        bytes and MIME type, a URL the server fetches as ``from_url`` makes it (its MIME type
        is not sent: ``""``). Equal to what was sent: ``assert request.media ==
        [Image.from_path(p)]``. Imports lmclient when first used."""
        from lmclient._media import read_part

        messages = self.body.get("messages") if isinstance(self.body, dict) else None
        found: list[Media] = []
        for m in messages if isinstance(messages, list) else ():
            content = m.get("content") if isinstance(m, dict) else None
            for part in content if isinstance(content, list) else ():
                media = read_part(part)
                if media is not None:
                    found.append(media)
        return found

    def texts(self, role: str) -> list[str]:
        """The text of every chat message with ``role`` (e.g. ``"system"``, ``"tool"``), oldest
        first."""
        messages = self.body.get("messages") if isinstance(self.body, dict) else None
        if not isinstance(messages, list):
            return []
        return [message_text(m) for m in messages if isinstance(m, dict) and m.get("role") == role]

    def asks_for(self, output_type: Any) -> bool:
        """Whether the request carries exactly the constraint lmclient sends for ``output_type``.

        True when the constraint equals what some lmclient dialect sends for that type on this
        endpoint: the native field or its emulation (a choice as regex, grammar or schema
        ``enum``; a regex as an anchored schema ``pattern``), a ``{"value": ...}``-wrapped
        schema, OpenAI's strict rewrite. ``str`` means "no constraint". So it holds for
        requests that lmclient made, whatever dialect it picked, and for any client that sends
        the same schema, pattern or options. Imports lmclient (and so httpx) when first used.
        """
        from ._output_types import asks_for

        return asks_for(self.endpoint, self.body, output_type)


def message_text(message: dict[str, Any]) -> str:
    """A message's text: its ``content`` string, or the text parts of a content list."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""
