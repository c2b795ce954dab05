"""How the fake answers a request with tools, like the server it impersonates.

A generated answer (no scripted reply) to a request with ``tools`` calls one tool, its
arguments an instance of the tool's ``parameters`` schema: the named tool of a ``tool_choice``
object, else the first tool; under ``"auto"`` only while the conversation's last message is not
a tool result (so an agent loop ends), never under ``"none"``. The servers that ignore
``tool_choice`` (Ollama reads no such field; llama.cpp reads a string only, so a named tool is
``"auto"`` there) are impersonated as ignoring it. A request whose grammar stands beside its
tools (lmclient's typed turn) is answered from the grammar, whose text holds the calls.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ._schema_instance import schema_instance

__all__ = ["scripted_calls", "tool_calls_for"]


def _chosen(body: dict[str, Any], server: str | None) -> dict[str, Any] | None:
    """The tool the answer calls, as the request lists it; ``None`` for a text answer."""
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    if not tools:
        return None
    choice = body.get("tool_choice", "auto")
    if server == "ollama" or (server == "llamacpp" and not isinstance(choice, str)):
        choice = "auto"
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        return next((t for t in tools if (t.get("function") or {}).get("name") == name), None)
    if choice == "none":
        return None
    messages = body.get("messages") or [{}]
    last = messages[-1] if isinstance(messages[-1], dict) else {}
    if choice == "auto" and last.get("role") == "tool":
        return None
    return tools[0]


def _call(name: str, arguments: str, body: dict[str, Any], choice: int, n: int) -> dict[str, Any]:
    """One wire tool call; ids are unique within a conversation: they count its messages."""
    number = len(body.get("messages") or ())
    call_id = f"call_{number}_{choice}" + (f"_{n}" if n else "")
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def scripted_calls(
    calls: tuple[tuple[str, str], ...], body: dict[str, Any], choice: int
) -> list[dict[str, Any]] | None:
    """The wire ``tool_calls`` of a scripted reply's ``(name, arguments)`` pairs."""
    return [_call(name, args, body, choice, n) for n, (name, args) in enumerate(calls)] or None


def tool_calls_for(
    body: dict[str, Any], server: str | None, seed: int, choice: int
) -> list[dict[str, Any]] | None:
    """The wire ``tool_calls`` of a generated answer (choice number ``choice``), or ``None``
    when it is text."""
    tool = _chosen(body, server)
    if tool is None:
        return None
    function = tool.get("function") or {}
    schema = function.get("parameters") or {"type": "object"}
    arguments = msgspec.json.encode(schema_instance(schema, seed=seed)).decode()
    return [_call(str(function.get("name", "")), arguments, body, choice, 0)]
