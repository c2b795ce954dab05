"""Partial objects: the top-level fields of a streamed JSON object, each as soon as its value
closes, decoded and validated against that field's type (`Stream.fields()`, and the checks
behind `Stream.partials()`).

`ObjectFields` splits the text, arriving in pieces, into ``(key, value)`` texts; `PartialObject`
decodes each value with a decoder built once per output type and keeps the snapshot. Both cost
time linear in the text: each character is passed over once by one regex search, and each
field's text is joined and decoded once. Values are delimited, not parsed; a malformed value
fails its decoder, and the whole value is validated at the end of the stream as always.
`ObjectProgress` puts them beside `progressive.JsonProgress`, which shows the value as it grows.
"""

from __future__ import annotations

import dataclasses
import operator
import re
import sys
import typing
import weakref
from collections.abc import Callable, Iterator
from typing import Any, Literal

import msgspec

from lmclient._output.depth import MAX_DEPTH, Fail, guarded_decoder, type_depth
from lmclient._output.markers import JsonSchema
from lmclient._output.types import OutputSpec
from lmclient._wire.progressive import JsonProgress, Partial
from lmclient._wire.sse import closing_text
from lmclient.errors import ValidationError

__all__ = ["ObjectFields", "ObjectProgress", "PartialObject"]

# What ends each phase's scan. JSON whitespace is four characters; ``\s`` takes a few more,
# which only a malformed value (rejected by its decoder) could contain outside a string.
_ROOT = re.compile(r"\{")
_KEY = re.compile(r'["}]')  # skips the "," and whitespace between a value and the next key
_COLON = re.compile(r":")
_VALUE = re.compile(r"\S")
_STRING = re.compile(r'["\\]')
_NESTED = re.compile(r'[\[\]{}"]')
_SCALAR_END = re.compile(r"[,}\s]")

Phase = Literal["root", "key", "in_key", "colon", "value", "string", "nested", "scalar", "done"]
_TOKENS = frozenset({"in_key", "string", "nested", "scalar"})  # phases inside a key or value


class ObjectFields:
    """Split the text of one JSON object into its top-level fields' ``(key, value)`` texts, each
    as soon as its value closes: a string at its closing quote, an array or object at its
    closing bracket, a number or literal at the character after it (so a number cut by the end
    of the stream is never taken for a whole one). The key is the JSON string, quotes and
    escapes included; nested values are tracked only to find where they end."""

    __slots__ = ("_depth", "_escape", "_in_string", "_key", "_phase", "_pieces")

    def __init__(self) -> None:
        self._phase: Phase = "root"
        self._pieces: list[str] = []  # the open token's text from earlier deltas
        self._key = ""
        self._depth = 0  # brackets open inside a nested value
        self._in_string = False  # inside a string of a nested value
        self._escape = False  # the next character is escaped (inside a string)

    @property
    def done(self) -> bool:
        """The object has closed."""
        return self._phase == "done"

    def feed(self, delta: str) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        n = len(delta)
        pos = 0
        start = 0  # where the open token starts in ``delta`` (0: it began in an earlier delta)
        phase = self._phase
        while pos < n and phase != "done":
            if self._escape:
                self._escape = False
                pos += 1
                continue
            if phase in ("in_key", "string") or (phase == "nested" and self._in_string):
                m = _STRING.search(delta, pos)
                if m is None:
                    break
                pos = m.end()
                if m.group() == "\\":
                    self._escape = True
                elif phase == "nested":
                    self._in_string = False
                elif phase == "in_key":
                    self._key = closing_text(self._pieces, delta, start, pos)
                    phase = "colon"
                else:
                    out.append((self._key, closing_text(self._pieces, delta, start, pos)))
                    phase = "key"
            elif phase == "nested":
                m = _NESTED.search(delta, pos)
                if m is None:
                    break
                pos = m.end()
                c = m.group()
                if c == '"':
                    self._in_string = True
                elif c in "[{":
                    self._depth += 1
                else:
                    self._depth -= 1
                    if self._depth == 0:
                        out.append((self._key, closing_text(self._pieces, delta, start, pos)))
                        phase = "key"
            elif phase == "scalar":
                m = _SCALAR_END.search(delta, pos)
                if m is None:
                    break
                out.append((self._key, closing_text(self._pieces, delta, start, m.start())))
                pos = m.end()
                phase = "done" if m.group() == "}" else "key"
            elif phase == "value":
                m = _VALUE.search(delta, pos)
                if m is None:
                    break
                start, pos = m.start(), m.end()
                c = m.group()
                if c == '"':
                    phase = "string"
                elif c in "[{":
                    phase = "nested"
                    self._depth = 1
                else:
                    phase = "scalar"
            elif phase == "key":
                m = _KEY.search(delta, pos)
                if m is None:
                    break
                start, pos = m.start(), m.end()
                phase = "in_key" if m.group() == '"' else "done"
            else:  # "root" or "colon": one character to find
                m = (_ROOT if phase == "root" else _COLON).search(delta, pos)
                if m is None:
                    break
                pos = m.end()
                phase = "key" if phase == "root" else "value"
        if phase in _TOKENS:
            self._pieces.append(delta[start:])
        self._phase = phase
        return out


# -- the fields of an output type ----------------------------------------------------------

Decode = Callable[[str], Any]  # a field value's JSON text → its validated value


@dataclasses.dataclass(frozen=True)
class Fields:
    """How to decode an object type's top-level fields: ``named`` maps a JSON key to the
    snapshot's key and the value's decoder; ``other``, for keys not named (a dict's keys, a
    schema's additional properties), takes the key's text and the value's text and returns the
    pair, or ``None`` to leave the key out."""

    named: dict[str, tuple[str, Decode]]
    other: Callable[[str, str], tuple[Any, Any] | None] | None = None


_FIELDS: weakref.WeakKeyDictionary[OutputSpec[Any], Fields] = weakref.WeakKeyDictionary()
_JSON_STRING = msgspec.json.Decoder(str)


def fields_of(spec: OutputSpec[Any]) -> Fields:
    """The (cached) field decoders of an object output type; TypeError for any other type."""
    fields = _FIELDS.get(spec)
    if fields is None:
        if not spec.root_is_object:
            raise TypeError(
                "partials() needs an output type that is one JSON object (a Struct, dataclass, "
                "TypedDict, dict[str, T], pydantic model or object JsonSchema), not "
                f"{spec.output_type!r}: use items() for a list, or iterate the stream for text"
            )
        fields = _FIELDS[spec] = _fields(spec.output_type)
    return fields


def _fields(tp: Any) -> Fields:
    if isinstance(tp, JsonSchema):
        return _schema_fields(tp) if tp.type is None else _type_fields(tp.type, tp)
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and isinstance(tp, type) and issubclass(tp, pydantic.BaseModel):
        return _pydantic_fields(tp)
    return _type_fields(tp, tp)


def _located(detail: str, key: str) -> str:
    """A field decoder's message with its path from the object's root."""
    path = f"`$.{key}" if key.isidentifier() else f"`$[{key!r}]"
    return detail.replace("`$", path, 1) if " - at `$" in detail else f"{detail} - at {path}`"


def _refused(key: str | None, owner: Any) -> Fail[str]:
    """The refusal of field ``key``'s value (located from the root), or of a ``dict``'s pair
    (``None``: its text names the key), as `guarded_decoder` raises it."""

    def fail(detail: str, text: str) -> ValidationError:
        located = detail if key is None else _located(detail, key)
        return ValidationError(located, text=text, output_type=owner)

    return fail


def _msgspec_field(key: str, tp: Any, owner: Any) -> Decode:
    decoder = msgspec.json.Decoder(tp)
    return guarded_decoder(type_depth(tp), _refused(key, owner), decoder)


def _type_fields(tp: Any, owner: Any) -> Fields:
    """A msgspec type's fields: a Struct, dataclass, attrs class or TypedDict by its fields'
    types (unknown keys, such as a tagged Struct's tag, are left out, as decoding drops them);
    ``dict[K, V]`` by each pair, decoded as a one-pair dict."""
    if typing.get_origin(tp) is typing.Annotated:  # constraints on the whole: checked at the end
        tp = typing.get_args(tp)[0]
    info = msgspec.inspect.type_info(tp)
    mi = msgspec.inspect
    if isinstance(info, mi.DictType):
        pairs = guarded_decoder(MAX_DEPTH, _refused(None, owner), msgspec.json.Decoder(tp))

        def pair(key: str, text: str) -> tuple[Any, Any]:
            ((k, v),) = pairs(f"{{{key}:{text}}}").items()
            return k, v

        return Fields({}, pair)
    if isinstance(info, mi.StructType):
        types = {f.name: f.type for f in msgspec.structs.fields(tp)}
    elif isinstance(info, (mi.DataclassType, mi.TypedDictType)):
        types = _hints(tp)
    else:
        raise TypeError(f"partials() cannot read the fields of {tp!r}")
    return Fields(
        {
            f.encode_name: (f.name, _msgspec_field(f.encode_name, types[f.name], owner))
            for f in info.fields
        }
    )


def _hints(tp: Any) -> dict[str, Any]:
    """A dataclass's or TypedDict's field types, with a generic alias's type arguments put in
    and TypedDict's ``Required``/``NotRequired`` taken off."""
    origin = typing.get_origin(tp) or tp
    hints = typing.get_type_hints(origin, include_extras=True)
    params = getattr(origin, "__parameters__", ())
    bound = dict(zip(params, typing.get_args(tp), strict=False))  # none for a plain class
    qualifiers = {getattr(typing, q, None) for q in ("Required", "NotRequired", "ReadOnly")}
    extensions = sys.modules.get("typing_extensions")
    if extensions is not None:
        qualifiers |= {getattr(extensions, q, None) for q in ("Required", "NotRequired")}
    qualifiers.discard(None)
    out = {}
    for name, hint in hints.items():
        while typing.get_origin(hint) in qualifiers:
            hint = typing.get_args(hint)[0]
        if bound:
            if isinstance(hint, typing.TypeVar):
                hint = bound.get(hint, hint)
            elif getattr(hint, "__parameters__", ()):
                hint = hint[tuple(bound.get(p, p) for p in hint.__parameters__)]
        out[name] = hint
    return out


def _pydantic_fields(model: Any) -> Fields:
    """A pydantic model's fields, each validated by its annotation and `Field` constraints with
    a `TypeAdapter`; the model's own validators run on the whole value, at the end."""
    pydantic = sys.modules["pydantic"]
    named: dict[str, tuple[str, Decode]] = {}
    for name, info in model.model_fields.items():
        alias = info.validation_alias if isinstance(info.validation_alias, str) else info.alias
        key = alias or name
        annotation = info.annotation
        if info.metadata:  # constraints such as Field(ge=0)
            annotation = operator.getitem(typing.Annotated, (annotation, *info.metadata))
        adapter = pydantic.TypeAdapter(annotation)
        named[key] = (name, _pydantic_field(key, adapter, model))
    return Fields(named)


def _pydantic_field(key: str, adapter: Any, model: Any) -> Decode:
    pydantic = sys.modules["pydantic"]

    def decode(text: str) -> Any:
        try:
            return adapter.validate_json(text)
        except pydantic.ValidationError as exc:
            raise ValidationError(_located(str(exc), key), text=text, output_type=model) from None

    return decode


def _schema_fields(marker: JsonSchema) -> Fields:
    """An object `JsonSchema`'s fields, as the validator sees them: a key of ``properties`` by
    its subschema, another key by the ``patternProperties`` it matches, else by
    ``additionalProperties`` (a key it forbids is left out). Keywords about the object as a
    whole (``required``, ``allOf``, ...) are checked at the end."""
    from lmclient._output.jsonschema import (  # only for JsonSchema outputs
        SchemaCompiler,
        compile_schema,
    )

    schema = marker.schema
    compile_schema(schema)  # raises SchemaDefinitionError as the final decoder would
    compiler = SchemaCompiler(schema)
    named: dict[str, tuple[str, Decode]] = {
        key: (key, _schema_field(key, compiler.compile(sub, ("properties", key)), marker))
        for key, sub in schema.get("properties", {}).items()
    }
    patterns = [
        (compiler.regex(p, ()), _schema_field_check(compiler.compile(s, ("patternProperties", p))))
        for p, s in schema.get("patternProperties", {}).items()
    ]
    extra = schema.get("additionalProperties", True)
    rest = (
        []
        if extra is False
        else [_schema_field_check(compiler.compile(extra, ("additionalProperties",)))]
    )
    plain = msgspec.json.Decoder()

    def other(key_text: str, text: str) -> tuple[Any, Any] | None:
        key = _JSON_STRING.decode(key_text)
        checks = [check for search, check in patterns if search(key) is not None] or rest
        if not checks:
            return None
        fail = _refused(key, marker)
        value = guarded_decoder(MAX_DEPTH, fail, plain)(text)
        for check in checks:
            detail = check(value)
            if detail is not None:
                raise fail(detail, text)
        return key, value

    return Fields(named, other)


def _schema_field_check(check: Callable[[Any], None]) -> Callable[[Any], str | None]:
    """A compiled subschema as a function returning the failure's message, or None."""
    from lmclient._output.jsonschema_checks import Invalid, format_path

    def run(value: Any) -> str | None:
        try:
            check(value)
        except Invalid as exc:
            return f"{exc.message} - at `{format_path(reversed(exc.segments))}`"
        except RecursionError:
            return "Value is nested too deeply"
        return None

    return run


def _schema_field(key: str, check: Callable[[Any], None], marker: JsonSchema) -> Decode:
    fail = _refused(key, marker)
    plain = guarded_decoder(MAX_DEPTH, fail, msgspec.json.Decoder())
    run = _schema_field_check(check)

    def decode(text: str) -> Any:
        value = plain(text)
        detail = run(value)
        if detail is not None:
            raise fail(detail, text)
        return value

    return decode


# -- snapshots ---------------------------------------------------------------------------


class PartialObject:
    """The snapshots of one `fields()` call: `update` reads the stream's new content deltas and
    gives a new dict for each top-level field that closed (a key the type does not have changes
    nothing, so it gives none)."""

    __slots__ = ("_fields", "_read", "_snapshot", "_splitter")

    def __init__(self, spec: OutputSpec[Any]) -> None:
        self._fields = fields_of(spec)
        self._splitter = ObjectFields()
        self._snapshot: dict[Any, Any] = {}
        self._read = 0  # how many of the stream's deltas have been fed

    def update(self, parts: list[str]) -> Iterator[dict[Any, Any]]:
        """Feed the deltas of ``parts`` (the stream's deltas so far) not yet fed. A generator, so
        that the snapshots before an invalid field are given before its error."""
        while self._read < len(parts):
            delta = parts[self._read]
            self._read += 1
            for _ in self.closed(delta):
                yield dict(self._snapshot)

    def closed(self, delta: str) -> Iterator[None]:
        """Feed one delta: a step for each field it closes, once the field is decoded,
        validated and in the snapshot (`ValidationError` for an invalid one)."""
        named, other = self._fields.named, self._fields.other
        snapshot = self._snapshot
        for key_text, text in self._splitter.feed(delta):
            key = key_text[1:-1] if "\\" not in key_text else _JSON_STRING.decode(key_text)
            field = named.get(key)
            if field is not None:
                snapshot[field[0]] = field[1](text)
            elif other is not None:
                pair = other(key_text, text)
                if pair is None:
                    continue
                snapshot[pair[0]] = pair[1]
            else:
                continue
            yield


class ObjectProgress:
    """The snapshots of one `partials()` call: `update` reads the stream's new content deltas and
    gives a `Partial` for each that changes what the value shows. Each top-level field is also
    decoded and validated against its type as it closes (`PartialObject`), so a field is never
    shown whole when it is invalid: its `ValidationError` comes first."""

    __slots__ = ("_fields", "_json", "_read")

    def __init__(self, spec: OutputSpec[Any]) -> None:
        self._fields = PartialObject(spec)
        self._json = JsonProgress(type_depth(spec.output_type))
        self._read = 0

    def update(self, parts: list[str]) -> Iterator[Partial[Any]]:
        """Feed the deltas of ``parts`` not yet fed (as `PartialObject.update`)."""
        while self._read < len(parts):
            delta = parts[self._read]
            self._read += 1
            for _ in self._fields.closed(delta):
                pass
            snapshot = self._json.feed(delta)
            if snapshot is not None:
                yield snapshot
