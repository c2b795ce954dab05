"""How deep JSON from a server may nest before it reaches msgspec's decoder.

msgspec decodes nested arrays and objects by recursion in C: 100,000 levels of ``[`` overflow
a thread's stack (a SIGSEGV, not an exception: the process dies) where the stack is small (a
256 KiB thread stack overflows at about 550 levels of objects), and below that, a decoder
skipping an unknown field raises a bare `RecursionError` at about 1,000. So every body, event
and output from a server is decoded through one guard, `guarded_decoder`: measured first, and
one nested deeper than its bound refused with lmclient's typed error, chosen by the caller
(`ProtocolError` for a body or an event, `ValidationError` for an output), carrying what was
received; msgspec's own errors become the same error.

The bounds: an output type's own depth where it has a finite one (``Person`` with a
``list[str]`` field: 2; a value nested deeper cannot be one, whatever its unknown fields hold),
else `MAX_DEPTH`, which also bounds bodies and events.

The measure is linear and costs little on the common answer: a text of a few KB (`_SHORT`)
has its ``[`` and ``{`` counted first (two C scans, cheaper there than a translate, whose table
is built per call); a longer one, or one with more than `COUNTED` brackets, is read once by a
``bytes.translate`` that keeps the structure (brackets, quotes, backslashes and the characters
that may follow a backslash in a valid escape, ``"\\/bfnrtu``) and maps ``{}`` to ``[]``; text
with at most `COUNTED` (256) brackets stops there (it nests at most that deep). Otherwise, on
that small stream: escaped backslashes then escaped quotes are removed (only when the text has
a backslash), the letters and backslashes left deleted, adjacent quotes removed (two quotes
less before a bracket leave it inside or outside a string as it was), what still lies between
quotes dropped (brackets inside strings do not nest), and the depth found by removing
innermost ``[]`` pairs, one level a pass (`_deeper`). All in C: the text itself is read once,
by the translate; the rest reads the small stream, at a cost per quote, escape or bracket. (An
output type's depth is thus enforced on text with more than `COUNTED` brackets; below that,
msgspec's own checks apply.)

Why the escapes are read right after deleting the other characters. In valid JSON a backslash
appears only in a string, as an escape: ``\\`` followed by one of ``"\\/bfnrt``, or by ``u`` and
four hex digits. All those characters are kept, so in the small stream every escape's backslash
is still followed by the character it escapes (the hex digits kept, ``b`` and ``f``, come after
the ``u``, and are neither a backslash nor a quote). A run of backslashes there starts with an
escape (the character before it is not a backslash, so its first one escapes nothing before it)
and is escaped backslashes, two by two, then maybe one escape of a character that is not a
backslash: runs the deletion joins are still read two by two from their start, as the first
run of a join is all pairs (a run ending in an escape is followed by its kept, escaped
character). So ``replace(b"\\\\", b"")`` removes exactly the escaped backslashes, after which
every backslash left escapes the character after it, and ``replace(b'\\"', b"")`` removes
exactly the escaped quotes: the quotes left open and close the strings, as msgspec reads them.

Text that is not JSON is never measured shallower than msgspec nests it: msgspec reads left to
right and stops with a `msgspec.DecodeError` at the first invalid escape (``\\a``, ``\\u`` without
four hex digits, a lone surrogate: its string reading checks them all, also when skipping an
unknown field), a backslash outside a string, a bracket closing the wrong kind or the end of
the text; before that point the text reads as JSON, the reading above is exact there (the
replacements run left to right, and a run of backslashes reaching that point was read in pairs
from its start), and the depth measured on the whole is at least the depth anywhere in that
prefix (`_deeper`). After it, the estimate may be wrong, and a text refused as deeper than it is
would have failed to decode anyway.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar, overload

import msgspec

from lmclient.errors import ProtocolError

__all__ = [
    "DECODE_ERRORS",
    "MAX_DEPTH",
    "Fail",
    "Guarded",
    "body_decoder",
    "guarded_decoder",
    "nested_deeper",
    "type_depth",
]

MAX_DEPTH = 128  # levels of arrays and objects: about a quarter of a 256 KiB stack in msgspec
# Text with at most this many brackets is not measured: it nests at most this deep, which msgspec
# decodes within a 256 KiB stack (it overflows at about 550 levels of objects); an answer of a
# couple of hundred objects, common, is then counted and not measured.
COUNTED = 256
_SHORT = 4096  # bytes: below this, counted before any translate (the usual body)

# What one translate keeps: the structure, and with a backslash in the text, what an escape is.
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')
_NOT_ESCAPED = bytes(b for b in range(256) if b not in b'"[]{}\\/bfnrtu')
_OBJECTS_AS_ARRAYS = bytes.maketrans(b"{}", b"[]")
# Bytes as ints: ``92 in data`` is a memchr, ``b"\\" in data`` first fails to read an int.
_BACKSLASH, _QUOTE, _OPEN = b'\\"['

# What decoding a server's bytes can raise: msgspec's errors, and RecursionError for JSON nested
# deeper than msgspec follows (the bound on nesting); each becomes an lmclient error.
DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)

T = TypeVar("T")
D = TypeVar("D", bound="str | bytes")
# A refusal's typed error, chosen by the caller of `guarded_decoder`: made from its detail (the
# depth refused, or msgspec's message) and the text refused, which it carries.
Fail = Callable[[str, D], Exception]
Guarded = Callable[[D], T]  # a guarded decoder: text in, a value or the caller's error out


def guarded_decoder(bound: int, fail: Fail[D], decoder: msgspec.json.Decoder[T]) -> Guarded[D, T]:
    """``decoder`` behind the one guard every body, event and output passes: text nested
    deeper than ``bound`` is refused unread (`nested_deeper`), and a refusal, or msgspec's
    error, is raised as ``fail(detail, text)``: a `ProtocolError` for a server's body or event
    (`body_decoder`), a `ValidationError` for an output. Made once per type and call-site, so
    that a decode is one Python call, as ``decoder.decode`` behind an inline check would be."""

    def decode(data: D) -> T:
        if nested_deeper(data, bound):
            raise fail(_too_deep(bound), data)
        try:
            return decoder.decode(data)
        except DECODE_ERRORS as exc:
            raise fail(str(exc), data) from None

    return decode


@overload
def body_decoder(tp: type[T], what: str) -> Guarded[bytes, T]: ...
@overload
def body_decoder(tp: Any, what: str) -> Guarded[bytes, Any]: ...
def body_decoder(tp: Any, what: str) -> Guarded[bytes, Any]:
    """A decoder of a server's bodies of ``what`` (``"response"``, ``"embeddings"``...) into
    ``tp``: held to `MAX_DEPTH`, refused with a `ProtocolError` carrying the body."""

    def fail(detail: str, body: bytes) -> ProtocolError:
        return ProtocolError(f"unexpected {what} body ({detail})", body=body)

    return guarded_decoder(MAX_DEPTH, fail, msgspec.json.Decoder(tp))


def nested_deeper(data: str | bytes, bound: int) -> bool:
    """Whether the JSON text ``data`` is refused for its nesting: it holds more than
    `COUNTED` brackets, and nests arrays and objects more than ``bound`` levels deep (text
    that is not JSON may be taken as deeper: it would fail to decode anyway). Text with fewer
    brackets is not measured: it cannot nest deep enough to threaten a stack, and a value
    nested deeper than its type there fails msgspec's own checks (or is an unknown field's,
    which msgspec skips). So the usual answer, an array of objects, is counted, not measured."""
    if len(data) <= COUNTED:  # fewer characters than COUNTED: fewer brackets too, no scan
        return False
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    if len(data) <= _SHORT and data.count(b"[") + data.count(b"{") <= COUNTED:
        return False  # short: two counts cost less than a translate's table, built per call
    escapes = _BACKSLASH in data
    kept = data.translate(_OBJECTS_AS_ARRAYS, _NOT_ESCAPED if escapes else _NOT_STRUCTURE)
    if kept.count(b"[") <= COUNTED:
        return False
    if escapes:  # escaped backslashes, then escaped quotes, then the rest of the escapes
        kept = kept.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, b"\\/bfnrtu")
    kept = kept.replace(b'""', b"")  # mostly strings without brackets; parity kept
    if _QUOTE in kept:  # every other piece between the quotes left is outside strings
        kept = b"".join(kept.split(b'"')[::2])
    return _deeper(kept, bound)


def _deeper(brackets: bytes, bound: int) -> bool:
    """Whether ``brackets`` (``[`` and ``]`` only) nest deeper than ``bound``: their running
    depth, ``[`` one up and ``]`` one down, passes it somewhere. A pass of
    ``replace(b"[]", b"")`` removes every innermost pair at once (the matches cannot overlap),
    which leaves the running depth of every other bracket as it was and lowers the deepest by
    at most one (before a removed pair come, past other removed pairs, a kept bracket or the
    start, one level up): a text deeper than ``bound`` still has a ``[`` after ``bound``
    passes. Balanced, as in JSON, the deepest is lowered by exactly one a pass, so a text
    ``bound`` deep or less is empty by then. No more ``[`` than passes left also ends it: the
    depth cannot pass that count."""
    for done in range(bound):
        if brackets.count(b"[") <= bound - done:
            return False
        brackets = brackets.replace(b"[]", b"")
    return _OPEN in brackets


def _too_deep(bound: int) -> str:
    """The message of a refusal."""
    return f"JSON nested deeper than {bound} levels of arrays and objects, refused unread"


def type_depth(tp: Any) -> int:
    """The deepest nesting of arrays and objects a value of ``tp`` can have as JSON, at most
    `MAX_DEPTH` (a recursive type, ``Any`` or a custom type have no finite depth)."""
    try:
        info = msgspec.inspect.type_info(tp)
    except (TypeError, ValueError, NameError):
        return MAX_DEPTH
    depth = _depth(info, set())
    return MAX_DEPTH if math.isinf(depth) else min(int(depth), MAX_DEPTH)


def _depth(info: msgspec.inspect.Type, open_types: set[Any]) -> float:
    inspect = msgspec.inspect
    if isinstance(info, inspect.Metadata):
        return _depth(info.type, open_types)
    if isinstance(info, inspect.UnionType):
        return max(_depth(t, open_types) for t in info.types)
    if isinstance(info, (inspect.ListType, inspect.SetType, inspect.FrozenSetType)):
        return 1 + _depth(info.item_type, open_types)
    if isinstance(info, inspect.VarTupleType):
        return 1 + _depth(info.item_type, open_types)
    if isinstance(info, inspect.TupleType):
        return 1 + max((_depth(t, open_types) for t in info.item_types), default=0)
    if isinstance(info, inspect.DictType):
        return 1 + max(_depth(info.key_type, open_types), _depth(info.value_type, open_types))
    if isinstance(
        info,
        (inspect.StructType, inspect.DataclassType, inspect.TypedDictType, inspect.NamedTupleType),
    ):
        if info.cls in open_types:
            return math.inf  # recursive: no finite depth
        open_types.add(info.cls)
        depth = 1 + max((_depth(f.type, open_types) for f in info.fields), default=0)
        open_types.discard(info.cls)
        return depth
    if isinstance(info, (inspect.AnyType, inspect.CustomType, inspect.RawType)):
        return math.inf
    return 0  # a scalar: str, numbers, bool, None, Literal, Enum, datetime, bytes...
