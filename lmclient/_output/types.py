"""The compiler of output types: any output type (a class, a `Literal`, a marker) into an
`OutputSpec`.

An `OutputSpec` says what to constrain (a JSON schema, a regex, a choice, a grammar) and how to
decode and validate the text the model returns. It depends only on the type, so it is computed
once per type and cached; dialects then decide how a server is told about it.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import re
import sys
import typing
from collections.abc import Callable
from typing import Any, Generic, Literal, TypeVar

import msgspec

from lmclient.errors import ValidationError

from .depth import DECODE_ERRORS, MAX_DEPTH, guarded_decoder, type_depth
from .markers import Choice, Grammar, JsonSchema, Regex, Tagged
from .patterns import DECIMAL_PATTERN, INT_KEY_PATTERN, SCALAR_GBNF, SCALAR_PATTERNS, anchored

if typing.TYPE_CHECKING:
    from .gbnf import CompactGrammar

__all__ = ["OUTPUT_TYPES", "OutputSpec", "compile_output", "json_decoder"]

# What lmclient takes as an output type, as the table of docs/output-types.md lists them (a test
# holds the two equal): told to a user whose type it cannot use, in place of msgspec's advice
# (a ``schema_hook``, which lmclient does not take).
OUTPUT_TYPES = (
    "str",
    "int",
    "float",
    "bool",
    "Literal",
    "Enum",
    "msgspec.Struct",
    "dataclass",
    "TypedDict",
    "NamedTuple",
    "list[T]",
    "dict[str, T]",
    "union",
    "Optional",
    "Annotated[T, msgspec.Meta(...)]",
    "datetime",
    "UUID",
    "Decimal",
    "typing.Any",
    "pydantic BaseModel",
    "lmclient.Choice",
    "lmclient.Regex",
    "lmclient.Grammar",
    "lmclient.JsonSchema",
    "lmclient.Tagged",
)

T = TypeVar("T")
Kind = Literal["text", "json", "any", "regex", "choice", "grammar"]


@dataclasses.dataclass(frozen=True, eq=False)
class OutputSpec(Generic[T]):
    """What one output type needs: its constraint in native form, its JSON-schema form for servers
    without that native field, and a decoder for each form. Identity-hashed: specs are cached."""

    output_type: Any
    kind: Kind
    name: str
    decode: Callable[[str], T]
    schema: dict[str, Any] | None = None
    decode_json: Callable[[str | bytes], T] | None = None
    pattern: str | None = None
    options: tuple[str, ...] = ()
    grammar: str | None = None  # a Grammar's text; for scalars, their literal's exact GBNF
    syntax: str = "gbnf"
    element_type: Any = None  # for JSON-array outputs: the type of one element (streaming items)
    # A `Tagged` output's structural tag (xgrammar's ``format``), for the servers that read one
    # in place of ``grammar`` (its GBNF)
    structural: dict[str, Any] | None = None
    # What to do about a text cut at max_tokens, where "raise max_tokens" would not help
    # (a `Tagged` output's prose that never reached its first region); ``None``: raise it
    cut_advice: Callable[[str], str | None] | None = None

    @functools.cached_property
    def compact(self) -> CompactGrammar | None:
        """The schema as lmclient's compact GBNF (no whitespace outside strings), for the
        servers that take a grammar; ``None`` for other kinds, or a schema the compiler does not
        cover (then the schema itself is sent)."""
        if self.kind not in ("json", "any") or self.schema is None:
            return None
        from .gbnf import compact_grammar  # compiled once per type, when a server needs it

        return compact_grammar(self.schema)

    @functools.cached_property
    def root_is_object(self) -> bool:
        return self.schema is not None and self.schema.get("type") == "object"

    @functools.cached_property
    def wrapped(self) -> tuple[dict[str, Any], Callable[[str], T]]:
        """The schema as ``{"value": …}`` with its decoder, for servers that need object roots."""
        assert self.schema is not None and self.decode_json is not None
        inner = dict(self.schema)
        defs = inner.pop("$defs", None)
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {"value": inner},
            "required": ["value"],
            "additionalProperties": False,
        }
        if defs:
            schema["$defs"] = defs
        decode_json = self.decode_json
        fail = functools.partial(_validation_error, self.output_type)
        # (the wrapper's level, then the type's)
        wrapper = guarded_decoder(MAX_DEPTH + 1, fail, msgspec.json.Decoder(_Wrapped))

        def decode(text: str) -> T:
            return decode_json(bytes(wrapper(text).value))

        return schema, decode


class _Wrapped(msgspec.Struct):
    value: msgspec.Raw


def compile_output(output_type: Any) -> OutputSpec[Any]:
    """The spec of an output type, compiled once: lmclient's one type → spec cache (`_SPECS`),
    which every other user of specs (`Plans`, tools, the fake, the CLI) reads through here.
    Raises TypeError for a type lmclient cannot use.

    A class, and a `JsonSchema` (its schema is a mutable dict), are equal only to themselves:
    each is its own key, and has no ``__args__`` to look for. A typing form is keyed by equality
    and by its arguments in order: ``Literal["b", "a"] == Literal["a", "b"]``, but the order of
    the options is the user's and goes on the wire."""
    key: Any
    if isinstance(output_type, (type, JsonSchema)):
        key = output_type
    else:
        key = (output_type, getattr(output_type, "__args__", None))
    try:
        spec = _SPECS.get(key)
    except TypeError:  # unhashable (an ``Annotated`` with a dict in it): compiled each time
        return _compile(output_type)
    if spec is None:
        spec = _compile(output_type)
        if len(_SPECS) >= _SPECS_BOUND:  # bounded: types made anew on every call
            _SPECS.clear()
        _SPECS[key] = spec
    return spec


_SPECS: dict[Any, OutputSpec[Any]] = {}
_SPECS_BOUND = 1024


def _compile(tp: Any) -> OutputSpec[Any]:
    if tp is str:
        return OutputSpec(tp, "text", "text", decode=_identity)
    if tp is typing.Any:
        return OutputSpec(
            tp, "any", "output", decode=_plain_json(tp), schema={}, decode_json=_plain_json(tp)
        )
    if isinstance(tp, JsonSchema):
        return _json_schema_spec(tp)
    if isinstance(tp, Regex):
        return _regex_spec(tp)
    if isinstance(tp, Grammar):
        return OutputSpec(
            tp, "grammar", "grammar", decode=_identity, grammar=tp.text, syntax=tp.syntax
        )
    if isinstance(tp, Choice):
        return _choice_spec(tp, {o: o for o in tp.options})
    if isinstance(tp, Tagged):
        return _tagged_spec(tp)
    if tp is bool or tp is int or tp is float:
        return _scalar_spec(tp)
    if typing.get_origin(tp) is Literal:
        values = typing.get_args(tp)
        if values and all(isinstance(v, str) for v in values):
            return _choice_spec(tp, {v: v for v in values})
    if _is_class(tp) and issubclass(tp, enum.Enum):
        members = list(tp)
        if members and all(isinstance(m.value, str) for m in members):
            return _choice_spec(tp, {m.value: m for m in members})
    if _is_pydantic_model(tp):
        return _pydantic_spec(tp)
    return _msgspec_spec(tp)


def _identity(text: str) -> str:
    return text


def _is_class(tp: Any) -> bool:
    """A class, and not a parametrised generic such as ``list[int]`` (a `type` instance on
    Python 3.10, whose ``__name__`` is the origin's)."""
    return isinstance(tp, type) and typing.get_origin(tp) is None


def _type_name(tp: Any) -> str:
    name = getattr(tp, "__name__", "") if _is_class(tp) else ""
    cleaned = re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64]
    return cleaned or "output"


def _validation_error(tp: Any, detail: object, text: str | bytes) -> ValidationError:
    """The refusal of an output of ``tp``: its ``detail`` (a message, or the error that says
    it), and the text refused. Bound to ``tp``, the `guarded_decoder` failure of an output."""
    shown = text if isinstance(text, str) else text.decode("utf-8", "replace")
    return ValidationError(str(detail), text=shown, output_type=tp)


def json_decoder(tp: Any, reported: Any = None) -> Callable[[str | bytes], Any]:
    """A decoder of JSON into ``tp``, held to the type's depth; its errors name ``reported`` (the
    user's output type) when given. The call's value and a stream's items decode through it."""
    shown = tp if reported is None else reported
    fail = functools.partial(_validation_error, shown)
    return guarded_decoder(type_depth(tp), fail, msgspec.json.Decoder(tp))


def _plain_json(tp: Any) -> Callable[[str | bytes], Any]:
    return json_decoder(Any, reported=tp)


def _scalar_spec(tp: type) -> OutputSpec[Any]:
    schema = {bool: {"type": "boolean"}, int: {"type": "integer"}, float: {"type": "number"}}[tp]
    decode = json_decoder(tp)
    return OutputSpec(
        tp,
        "regex",
        tp.__name__,
        decode=decode,
        schema=schema,
        decode_json=decode,
        pattern=SCALAR_PATTERNS[tp],
        grammar=SCALAR_GBNF[tp],
    )


_JSON_STRING = msgspec.json.Decoder(str)


def _from_json_string(decode: Callable[[str], T], tp: Any) -> Callable[[str | bytes], T]:
    """``decode`` for text that arrives as a JSON string (a regex or a choice emulated through a
    JSON schema): unquote it first. Not held to a depth: a string decoder reads no nesting, it
    fails at the first bracket."""

    def decode_json(text: str | bytes) -> T:
        try:
            value = _JSON_STRING.decode(text)
        except DECODE_ERRORS as exc:
            raise _validation_error(tp, exc, text) from None
        return decode(value)

    return decode_json


def _regex_spec(marker: Regex) -> OutputSpec[str]:
    compiled = re.compile(marker.pattern)

    def decode(text: str) -> str:
        if compiled.fullmatch(text) is None:
            raise ValidationError(
                f"does not fully match /{marker.pattern}/", text=text, output_type=marker
            )
        return text

    return OutputSpec(
        marker,
        "regex",
        "regex",
        decode=decode,
        schema={"type": "string", "pattern": anchored(marker.pattern)},
        decode_json=_from_json_string(decode, marker),
        pattern=marker.pattern,
    )


def _choice_spec(tp: Any, mapping: dict[str, Any]) -> OutputSpec[Any]:
    options = tuple(mapping)

    def decode(text: str) -> Any:
        try:
            return mapping[text]
        except KeyError:
            raise ValidationError(
                f"expected one of {list(options)!r}", text=text, output_type=tp
            ) from None

    return OutputSpec(
        tp,
        "choice",
        _type_name(tp) if _is_class(tp) else "choice",
        decode=decode,
        schema={"type": "string", "enum": list(options)},
        decode_json=_from_json_string(decode, tp),
        options=options,
    )


def _tagged_spec(tp: Tagged[Any]) -> OutputSpec[Any]:
    """A `Tagged` output: a grammar (GBNF, and the same as a structural tag) of prose and
    regions, each region's content its element's compact rules."""
    from .gbnf import finished
    from .gbnf_ir import Lit, alt
    from .tagged import TaggedDecoder, structural_format, tagged_grammar

    element = compile_output(tp.type)
    decode: Callable[[str], Any]
    if element.kind == "text":
        content, decode = None, element.decode
    elif element.kind == "choice":
        content, decode = {"root": alt(*(Lit(o) for o in element.options))}, element.decode
    elif element.kind in ("json", "any") or tp.type in (int, float, bool):
        content, decode = _compact_rules_of(tp, element), element.decode_json  # type: ignore[assignment]
    else:
        raise TypeError(
            f"a Tagged region holds a JSON type, a choice (Literal, Enum, Choice), int, float, "
            f"bool or str, not {tp.type!r}"
        )
    decoder = TaggedDecoder(tp.tag, decode, tp.at_least, tp.at_most, tp)
    grammar = finished(tagged_grammar(tp.tag, content, tp.at_least, tp.at_most))
    content_grammar = None if content is None else finished(dict(content))
    if grammar is None or (content is not None and content_grammar is None):
        raise TypeError(f"{tp!r}: a repeat count in its grammar is over what llama.cpp takes")
    return OutputSpec(
        tp,
        "grammar",
        "Tagged",
        decode=decoder,
        cut_advice=decoder.cut_advice,
        grammar=grammar.text,
        structural=structural_format(
            tp.tag,
            None if content_grammar is None else content_grammar.text,
            tp.at_least,
            tp.at_most,
        ),
    )


def _compact_rules_of(tp: Tagged[Any], element: OutputSpec[Any]) -> dict[str, Any]:
    from .gbnf import compact_rules

    assert element.schema is not None
    rules = compact_rules(element.schema)
    if rules is None:
        raise TypeError(
            f"a Tagged region's content is written in lmclient's compact grammar, which does not "
            f"cover the JSON schema of {tp.type!r} (the debug log says why)"
        )
    return rules


def _msgspec_spec(tp: Any) -> OutputSpec[Any]:
    try:
        schema = msgspec.json.schema(tp)
        decode = json_decoder(tp)
    except TypeError as exc:  # a type msgspec has no schema for
        raise TypeError(_unsupported(tp, exc)) from None
    except (ValueError, NameError) as exc:  # a type defined wrongly; NameError: a forward ref
        raise TypeError(f"lmclient cannot use {tp!r} as an output type: {exc}") from None
    _refine_strings(msgspec.inspect.type_info(tp), schema, schema.get("$defs", {}), set())
    return OutputSpec(
        tp,
        "json",
        _type_name(tp),
        decode=decode,
        schema=inline_root_ref(schema),
        decode_json=decode,
        element_type=_array_element_type(tp),
    )


def _unsupported(tp: Any, exc: TypeError) -> str:
    """The message for a type msgspec has no schema for: the type msgspec names (the last line
    of its message, ``type <class 'Foo'> is not supported``: a field's type, for a container),
    and what lmclient takes instead, not msgspec's advice on its own hooks."""
    if isinstance(tp, str):  # ``generate("Q", "int")``: a type checker takes it (docs)
        reason = "a string is not a type: pass the type itself, not its name"
    else:
        reason = str(exc).strip().splitlines()[-1]
    return (
        f"lmclient cannot use {tp!r} as an output type ({reason}). It takes "
        f"{', '.join(OUTPUT_TYPES)}, and these nested; make a class of your own a "
        "msgspec.Struct or a dataclass (docs/output-types.md)"
    )


def _refine_strings(info: Any, node: dict[str, Any], defs: dict[str, Any], seen: set[str]) -> None:
    """Give string-encoded values a ``format``/``pattern``: msgspec describes a plain `datetime`,
    `time` or `Decimal` as any string, and the keys of a ``dict[int, …]`` not at all, which
    leaves a constrained model free to write garbage."""
    mi = msgspec.inspect
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        if name in seen or name not in defs:
            return
        seen.add(name)
        node = defs[name]
    if isinstance(info, mi.Metadata):
        _refine_strings(info.type, node, defs, seen)
    elif isinstance(info, mi.DateTimeType) and info.tz is None:
        node.setdefault("format", "date-time")
    elif isinstance(info, mi.TimeType) and info.tz is None:
        node.setdefault("format", "time")
    elif isinstance(info, mi.DecimalType) and node.get("type") == "string":
        node.pop("format", None)  # "decimal" is msgspec's own name; engines may reject it
        node.setdefault("pattern", DECIMAL_PATTERN)
    elif isinstance(info, (mi.StructType, mi.DataclassType, mi.TypedDictType)):
        props = node.get("properties", {})
        for field in info.fields:
            if field.encode_name in props:
                _refine_strings(field.type, props[field.encode_name], defs, seen)
    elif isinstance(info, (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)):
        if isinstance(node.get("items"), dict):
            _refine_strings(info.item_type, node["items"], defs, seen)
    elif isinstance(info, mi.DictType):
        if isinstance(info.key_type, mi.IntType) and node.get("type") == "object":
            # msgspec's schema says nothing of the keys, which must read as integers
            node.setdefault("propertyNames", {"pattern": INT_KEY_PATTERN})
        if isinstance(node.get("additionalProperties"), dict):
            _refine_strings(info.value_type, node["additionalProperties"], defs, seen)
    elif isinstance(info, mi.UnionType) and "anyOf" in node:
        non_null = [t for t in info.types if not isinstance(t, mi.NoneType)]
        branches = [b for b in node["anyOf"] if b.get("type") != "null"]
        if len(non_null) == 1 and len(branches) == 1:  # Optional[T]: the one pairing is certain
            _refine_strings(non_null[0], branches[0], defs, seen)


def _array_element_type(tp: Any) -> Any:
    """The element type of ``list[T]``, ``tuple[T, ...]``, ``set[T]`` (streamed item by item)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:  # e.g. Annotated[list[T], msgspec.Meta(max_length=3)]
        return _array_element_type(args[0])
    if origin in (list, set, frozenset) and len(args) == 1:
        return args[0]
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return args[0]
    return None


def inline_root_ref(schema: dict[str, Any]) -> dict[str, Any]:
    """Replace a root ``{"$ref": "#/$defs/X"}`` by X itself: strict hosts and TGI want the root to
    be an object with ``properties``; other definitions stay under ``$defs``."""
    ref = schema.get("$ref")
    defs = schema.get("$defs")
    if not isinstance(ref, str) or not isinstance(defs, dict) or not ref.startswith("#/$defs/"):
        return schema
    root = dict(defs[ref[len("#/$defs/") :]])
    if '"$ref"' in msgspec.json.encode(defs).decode():
        root["$defs"] = defs
    return root


def _json_schema_spec(marker: JsonSchema) -> OutputSpec[Any]:
    from .jsonschema import SchemaDefinitionError, SchemaError, compile_schema

    if marker.type is not None:
        decode = json_decoder(marker.type, reported=marker)
    else:
        try:
            check = compile_schema(marker.schema)
        except SchemaDefinitionError as exc:
            raise ValueError(f"invalid JSON schema: {exc}") from None
        plain = _plain_json(marker)

        def decode(text: str | bytes) -> Any:
            value = plain(text)
            try:
                check(value)
            except SchemaError as exc:
                raise _validation_error(marker, exc, text) from None
            return value

    return OutputSpec(
        marker,
        "json",
        re.sub(r"[^a-zA-Z0-9_-]", "_", str(marker.schema.get("title", "output")))[:64],
        decode=decode,
        schema=marker.schema,
        decode_json=decode,
    )


def _is_pydantic_model(tp: Any) -> bool:
    pydantic = sys.modules.get("pydantic")  # never imported by lmclient: only if the user has it
    return pydantic is not None and _is_class(tp) and issubclass(tp, pydantic.BaseModel)


def _pydantic_spec(tp: Any) -> OutputSpec[Any]:
    pydantic = sys.modules["pydantic"]

    def decode(text: str | bytes) -> Any:
        try:
            return tp.model_validate_json(text)
        except pydantic.ValidationError as exc:
            raise _validation_error(tp, exc, text) from None

    return OutputSpec(
        tp,
        "json",
        _type_name(tp),
        decode=decode,
        schema=inline_root_ref(tp.model_json_schema(ref_template="#/$defs/{model}")),
        decode_json=decode,
    )
