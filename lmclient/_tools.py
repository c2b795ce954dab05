"""Typed tools: a tool declared from a Python type, its calls decoded into that type.

A `Tool` is a name, a description and the type of its arguments (a ``msgspec.Struct``,
dataclass, ``TypedDict`` or pydantic model, or a function whose annotated signature becomes
one). ``tools=`` and ``tool_choice=`` are per-call parameters; the answer's calls are
`ToolCall` values in `Response.tool_calls`, their arguments validated like any output (a call
that does not validate is a `ValidationError` carrying the raw arguments).

What each server does with ``tool_choice``, from its source, is one table (`CHOICES`): a value
the server would accept and ignore is refused before sending, never sent.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import secrets
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, cast

import msgspec

from ._output.turn import CLOSE, OPEN
from ._output.types import OutputSpec, compile_output
from .errors import UnsupportedConstraintError, ValidationError

__all__ = [
    "CHOICES",
    "ENFORCEMENT",
    "STRICT_TOOLS",
    "Args",
    "Tool",
    "ToolCall",
    "ToolChoice",
    "calls_in_text",
    "check_choice",
    "check_tools",
    "decode_calls",
    "one_or_two",
    "tool_fields",
    "tool_table",
]

# Covariant: a `Tool[Weather]` is a `Tool[object]`, so that ``tools=[weather, time]`` binds the
# arguments' common type (pyright: ``Weather | Time``; mypy: their join), and a
# `Response[str, Weather]` is a `Response[str]`.
A = TypeVar("A", covariant=True)
if TYPE_CHECKING:
    from typing_extensions import TypeVar as DefaultTypeVar

    # The arguments' type of a response's tool calls: a second parameter of `Response`, which
    # users write with one (``Response[Person]``) as before, its calls then `object` (PEP 696
    # default; typing_extensions is not needed at run time, where `one_or_two` pads it).
    Args = DefaultTypeVar("Args", covariant=True, default=object)
else:
    Args = TypeVar("Args", covariant=True)
ToolChoice = Literal["auto", "required", "none"]
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class Tool(Generic[A]):
    """A tool the model may call: ``Tool(WeatherArgs, name="weather", description=...)``, or
    ``Tool.from_function(get_weather)`` for a function, whose annotated parameters are the
    arguments and whose docstring is the description. ``name`` defaults to the type's (or
    function's) name, ``description`` to its docstring."""

    __slots__ = ("_spec", "arguments", "description", "function", "name")

    def __init__(
        self,
        arguments: type[A],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        spec = compile_output(arguments)
        if spec.kind != "json" or not spec.root_is_object:
            raise TypeError(
                "a tool's arguments are a JSON object: a msgspec.Struct, dataclass, TypedDict "
                f"or pydantic model, not {arguments!r}"
            )
        name = name or str(getattr(arguments, "__name__", ""))
        if not _NAME.fullmatch(name):
            raise ValueError(f"a tool name is 1 to 64 letters, digits, _ or -, not {name!r}")
        self.name = name
        self.description = description if description is not None else _doc(arguments)
        self.arguments = arguments
        self.function: Callable[..., Any] | None = None
        self._spec: OutputSpec[A] = spec

    @classmethod
    def from_function(
        cls,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> Tool[Any]:
        """The tool whose arguments are ``function``'s parameters (each annotated; a default
        makes it optional); `ToolCall.run` calls ``function`` with them."""
        hints = typing.get_type_hints(function, include_extras=True)  # Annotated bounds kept
        fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
        for param in inspect.signature(function).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
                raise TypeError(f"a tool function takes named parameters only: {param}")
            tp = hints.get(param.name, Any)
            if param.default is param.empty:
                fields.append((param.name, tp))
            else:
                fields.append((param.name, tp, param.default))
        arguments = msgspec.defstruct(function.__name__, fields, kw_only=True)
        tool: Tool[Any] = cls(
            arguments,  # type: ignore[arg-type]  # a Struct made here: its type is Any
            name=name or function.__name__,
            description=description if description is not None else _doc(function),
        )
        tool.function = function
        return tool

    @property
    def schema(self) -> dict[str, Any]:
        """The JSON schema of the arguments, as servers are sent it."""
        assert self._spec.schema is not None
        return {k: v for k, v in self._spec.schema.items() if k not in ("title", "description")}

    def param(self, *, strict: bool = False) -> dict[str, Any]:
        """The tool as a request's ``tools`` item; ``strict`` asks the server to hold the
        arguments to the schema (vLLM does only then)."""
        function: dict[str, Any] = {"name": self.name}
        if self.description:
            function["description"] = self.description
        function["parameters"] = self.schema
        if strict:
            function["strict"] = True
        return {"type": "function", "function": function}

    def decode(self, arguments: str | Mapping[str, Any]) -> A:
        """The arguments of one call, validated; `ValidationError` (carrying the raw arguments
        as its ``text``) when they do not match."""
        raw = arguments if isinstance(arguments, str) else _encode(arguments)
        assert self._spec.decode_json is not None
        try:
            return self._spec.decode_json(raw)
        except ValidationError as exc:
            exc.args = (f"the arguments of a call to tool {self.name!r} are invalid: {exc}",)
            raise

    def match(self, call: ToolCall[object]) -> ToolCall[A] | None:
        """``call`` typed by this tool's arguments if it is a call to this tool, else ``None``:
        where a response's calls are not bound to one tool (several tools, ``defaults=``, a
        `Response[str]` passed on), this narrows them without an ``isinstance`` (which a
        TypedDict cannot take). By identity: another tool of the same name vouches for nothing."""
        return cast("ToolCall[A]", call) if call.tool is self else None

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


class ToolCall(msgspec.Struct, Generic[A], frozen=True):
    """One call the model made: ``arguments`` validated into the tool's type, ``raw_arguments``
    as the server sent them, ``id`` the server's id for it (what the result refers to)."""

    id: str | None
    name: str
    arguments: A
    raw_arguments: str
    tool: Any = None  # the `Tool` called

    def run(self) -> Any:
        """Call the tool's function (a tool made by `Tool.from_function`) with the arguments."""
        function = None if self.tool is None else self.tool.function
        if function is None:
            raise TypeError(f"tool {self.name!r} was not made from a function")
        arguments: Any = self.arguments  # a Struct: `from_function` made it
        return function(**msgspec.structs.asdict(arguments))

    def result(self, content: Any) -> dict[str, Any]:
        """The ``tool`` message that answers this call, to append to the messages of the next
        call (after `Response.message`): a ``str`` is sent as is, anything else as JSON."""
        text = content if isinstance(content, str) else _encode(content)
        return {"role": "tool", "tool_call_id": self.id, "content": text}

    def wire(self) -> dict[str, Any]:
        """This call as an assistant message's ``tool_calls`` item."""
        function = {"name": self.name, "arguments": self.raw_arguments}
        return {"id": self.id, "type": "function", "function": function}


def one_or_two(params: object) -> tuple[object, ...]:
    """A generic's subscript at run time with its second parameter (`Args`) given as ``Any``
    where it is left out, as type checkers read it: the run-time `Args` has no default
    (`typing` takes one only from 3.13), and ``Response[Person]`` must stay valid where
    annotations are evaluated."""
    return params if isinstance(params, tuple) else (params, Any)


def _encode(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def _doc(obj: Any) -> str | None:
    """The first paragraph of ``obj``'s own docstring: what a model needs, without the details.
    A class's own only: not one it inherits (``msgspec.Struct``'s would describe every tool as
    "A base class for defining efficient serializable objects."), nor the signature a
    dataclass is given in place of one."""
    if isinstance(obj, type):
        own = obj.__dict__.get("__doc__")
        if dataclasses.is_dataclass(obj) and own == _dataclass_doc(obj):
            own = None
        doc = inspect.cleandoc(own) if isinstance(own, str) else None
    else:
        doc = inspect.getdoc(obj)
    return doc.split("\n\n", 1)[0].replace("\n", " ") if doc else None


def _dataclass_doc(cls: type) -> str:
    """The docstring `dataclasses` gives a dataclass written without one."""
    try:
        signature = str(inspect.signature(cls)).replace(" -> None", "")
    except (TypeError, ValueError):
        return ""
    return cls.__name__ + signature


# -- per server ------------------------------------------------------------------------------

# What each dialect's server does with each tool_choice: "sent" (honoured: `required` and a
# named tool by constrained decoding on vLLM and SGLang; `auto` needs the server's tool parser,
# else a 400, not a silent failure), "named" (emulated: only that tool, `required`), or why it
# is refused (the server would accept and ignore it). From each server's source:
# * vLLM `chat_completion/protocol.py`: every value; all but `none` need
#   --enable-auto-tool-choice and --tool-call-parser (400 otherwise, recorded on 0.32); a named
#   tool with structured outputs is a 400; arguments follow the schema only for `strict` tools.
# * SGLang `entrypoints/openai/protocol.py`: every value; `auto` needs --tool-call-parser.
# * llama.cpp `server-common.cpp::oaicompat_chat_params_parse` (b11434): tools need --jinja
#   (an error otherwise); tool_choice is read as a string only, so a named tool (an object)
#   falls back to "auto" without a word: lmclient sends that tool alone with "required".
# * Ollama `openai/openai.go`: reads `tools` but no `tool_choice` at all.
_OLLAMA_CHOICE = "Ollama's OpenAI API reads tools but not tool_choice (the model decides)"
CHOICES: dict[str, dict[str, str]] = {
    "vllm": {"auto": "sent", "required": "sent", "none": "sent", "tool": "sent"},
    "vllm-guided": {"auto": "sent", "required": "sent", "none": "sent", "tool": "sent"},
    "sglang": {"auto": "sent", "required": "sent", "none": "sent", "tool": "sent"},
    "llamacpp": {"auto": "sent", "required": "sent", "none": "sent", "tool": "named"},
    "tgi": {"auto": "sent", "required": "sent", "none": "sent", "tool": "sent"},
    "generic": {"auto": "sent", "required": "sent", "none": "sent", "tool": "sent"},
    "ollama": {
        "auto": "sent",
        "required": _OLLAMA_CHOICE,
        "none": _OLLAMA_CHOICE,
        "tool": _OLLAMA_CHOICE,
    },
    "lmstudio": {"auto": "sent", "required": "sent", "none": "sent", "tool": "sent"},
    "sglang-gateway": {"auto": "sent", "required": "sent", "none": "sent", "tool": "sent"},
    "openai": {"auto": "sent", "required": "sent", "none": "sent", "tool": "sent"},
}


# The dialects whose servers hold a call's arguments to the tool's schema only when the tool
# says `"strict": true` (vLLM 0.32: otherwise only the call's wrapper is constrained, recorded).
STRICT_TOOLS = frozenset({"vllm"})

# How each server holds the model to tools, and what it must be started with, from its source
# (shown in the capability matrix).
ENFORCEMENT: dict[str, str] = {
    "vllm": (
        "`required` and a named tool by constrained decoding (structured outputs), the "
        "arguments held to the schema only for a `strict` tool (lmclient sends them so); "
        "`auto`, `required` and a named tool need `--enable-auto-tool-choice` and "
        "`--tool-call-parser` (else 400; 0.32, recorded)"
    ),
    "vllm-guided": "as `vllm` (named tools since 0.6, `required` since 0.8.3)",
    "sglang": (
        "`required` and a named tool by constrained decoding; tool calls are parsed with "
        "`--tool-call-parser`"
    ),
    "llamacpp": (
        "needs `--jinja` and a chat template that renders tools (else refused: /props); the "
        "template's call format is parsed and each call's arguments held to the schema by a "
        "grammar, but content may come first even under `required` (b11434, recorded)"
    ),
    "tgi": "tool calls by grammar; `response_format` with tools is a 422",
    "generic": "not known: the server's own",
    "ollama": "parsed from the model's output, not constrained; no `tool_choice` field",
    "lmstudio": "not known: the server's own",
    "sglang-gateway": "not known: the workers' own (the gateway forwards tools and tool_choice)",
    "openai": "the API's own",
}


def _given(params: Mapping[str, Any], defaults: Mapping[str, Any], name: str) -> Any:
    value = params.get(name)
    return defaults.get(name) if value is None else value


def check_tools(
    where: str,
    dialect: str,
    endpoint: str,
    params: Mapping[str, Any],
    defaults: Mapping[str, Any],
    server_tools: bool | None = None,
) -> None:
    """Refuse, before sending, tools a call cannot use: on the completions endpoint, a
    tool_choice the server would ignore, or any tools where the probed server said it cannot
    use them (``server_tools`` False: llama.cpp with a chat template that renders no tools,
    which then ignores them without a word). Beside an output type, `lmclient._turn.Turn`
    refuses what the server cannot hold of the turn."""
    tools = _given(params, defaults, "tools")
    choice = _given(params, defaults, "tool_choice")
    if not tools:
        if choice is not None:
            raise ValueError(f"{where}(): tool_choice needs tools=")
        return
    if endpoint != "chat":
        raise UnsupportedConstraintError(f"{where}(): tools need the chat endpoint")
    if server_tools is False:
        raise UnsupportedConstraintError(
            f"{where}(): the server's chat template cannot render tools nor parse calls "
            "(llama.cpp's /props chat_template_caps), and the server ignores tools then: start "
            "it with a --chat-template-file that supports tools"
        )
    names = [tool.name for tool in tools]
    if len(set(names)) != len(names):
        raise ValueError(f"{where}(): two tools share a name: {names}")
    if isinstance(choice, Tool) and choice.name not in names:
        raise ValueError(f"{where}(): tool_choice {choice.name!r} is not one of tools=")
    key = "tool" if isinstance(choice, Tool) else (choice or "auto")
    how = CHOICES.get(dialect, CHOICES["generic"])[key]
    if how not in ("sent", "named"):
        raise UnsupportedConstraintError(
            f"{where}(): tool_choice={key!r} on dialect {dialect!r} would be ignored: {how}"
        )


def tool_fields(dialect: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The request fields for ``tools`` and ``tool_choice`` (checked by `check_tools`)."""
    tools: Sequence[Tool[Any]] | None = params.get("tools")
    if not tools:
        return {}
    choice = params.get("tool_choice")
    strict = dialect in STRICT_TOOLS
    if isinstance(choice, Tool):
        if CHOICES.get(dialect, CHOICES["generic"])["tool"] == "named":
            return {"tools": [choice.param(strict=strict)], "tool_choice": "required"}
        return {
            "tools": [tool.param(strict=strict) for tool in tools],
            "tool_choice": {"type": "function", "function": {"name": choice.name}},
        }
    fields: dict[str, Any] = {"tools": [tool.param(strict=strict) for tool in tools]}
    if choice is not None:
        fields["tool_choice"] = choice
    return fields


def tool_table(params: Mapping[str, Any]) -> dict[str, Tool[Any]] | None:
    """The call's tools by name, to decode its answer's calls; ``None`` without tools."""
    tools = params.get("tools")
    return {tool.name: tool for tool in tools} if tools else None


def check_choice(choice: Any, calls: Sequence[ToolCall[Any]], text: str) -> None:
    """Fail closed when the answer does not keep to ``tool_choice``: no call under
    ``"required"`` or a named tool, a call to another tool than the one named, or a call under
    ``"none"``. A server that ignores tools answers that way (llama.cpp with a chat template
    that renders no tools, a forced dialect, a proxy that drops the fields)."""
    if choice is None or choice == "auto":
        return
    if choice == "none":
        if calls:
            raise ValidationError(
                f"tool_choice='none', but the answer calls {calls[0].name!r}: the server did "
                "not keep to tool_choice",
                text=calls[0].raw_arguments,
                output_type=None,
            )
        return
    if not calls:
        wanted = "a tool call" if choice == "required" else f"a call to {choice.name!r}"
        raise ValidationError(
            f"tool_choice asks for {wanted}, but the answer has none: the server may ignore "
            "tools (llama.cpp needs --jinja and a chat template that renders tools)",
            text=text,
            output_type=None,
        )
    if isinstance(choice, Tool):
        for call in calls:
            if call.name != choice.name:
                raise ValidationError(
                    f"tool_choice names {choice.name!r}, but the answer calls {call.name!r}",
                    text=call.raw_arguments,
                    output_type=None,
                )


def decode_calls(tools: Mapping[str, Tool[Any]], calls: Sequence[Any]) -> list[ToolCall[Any]]:
    """The wire's tool calls (`protocol.WireToolCall`), each validated into its tool's type."""
    out: list[ToolCall[Any]] = []
    for call in calls:
        function = call.function
        name = function.name or ""
        given = function.arguments
        raw = given if isinstance(given, str) else _encode(given) if given is not None else ""
        tool = tools.get(name)
        if tool is None:
            raise ValidationError(
                f"the model called an unknown tool {name!r}; tools: {', '.join(tools)}",
                text=raw,
                output_type=None,
            )
        out.append(ToolCall(call.id, name, tool.decode(raw), raw, tool))
    return out


class _TextCall(msgspec.Struct):
    """One call as a typed turn's grammar writes it: ``{"name": ..., "arguments": {...}}``."""

    name: str
    arguments: msgspec.Raw


_TEXT_CALL = msgspec.json.Decoder(_TextCall)


def calls_in_text(tools: Mapping[str, Tool[Any]], text: str) -> list[ToolCall[Any]] | None:
    """The calls of a typed turn's answer written as text (`lmclient._output.turn`), each
    validated into its tool's type, with an id of lmclient's (the server gave none, and the
    results refer to it); ``None`` when the text is not calls (the answer's branch)."""
    if not text.startswith(OPEN):
        return None
    calls: list[ToolCall[Any]] = []
    rest = text
    while rest:
        end = rest.find(CLOSE)
        if not rest.startswith(OPEN) or end < 0:
            raise ValidationError(
                f"the answer's tool call {len(calls) + 1} is not {OPEN!r}, a JSON object and "
                f"{CLOSE!r}: the server did not hold the turn's grammar",
                text=text,
                output_type=None,
            )
        try:
            call = _TEXT_CALL.decode(rest[len(OPEN) : end])
        except msgspec.DecodeError as exc:
            raise ValidationError(
                f"the answer's tool call {len(calls) + 1} is not a name and arguments ({exc})",
                text=text,
                output_type=None,
            ) from None
        raw = bytes(call.arguments).decode()
        tool = tools.get(call.name)
        if tool is None:
            raise ValidationError(
                f"the model called an unknown tool {call.name!r}; tools: {', '.join(tools)}",
                text=raw,
                output_type=None,
            )
        calls.append(
            ToolCall(f"call_{secrets.token_hex(12)}", call.name, tool.decode(raw), raw, tool)
        )
        rest = rest[end + len(CLOSE) :].lstrip()
    return calls
