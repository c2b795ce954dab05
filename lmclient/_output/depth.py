"""How deep JSON from a server may nest before it reaches msgspec's decoder.

msgspec decodes nested arrays and objects by recursion in C: 100,000 levels of ``[`` overflow
a thread's stack (a SIGSEGV, not an exception: the process dies) where the stack is small (a
256 KiB thread stack overflows at about 550 levels of objects), and below that, a decoder
skipping an unknown field raises a bare `RecursionError` at about 1,000. So every body, event
and output from a server is measured first, and one nested deeper than its bound is refused
with lmclient's typed error (`ProtocolError` for a body or an event, `ValidationError` for an
output), carrying what was received.

The bounds: an output type's own depth where it has a finite one (``Person`` with a
``list[str]`` field: 2; a value nested deeper cannot be one, whatever its unknown fields hold),
else `MAX_DEPTH`, which also bounds bodies and events.

The measure is linear and costs almost nothing on the common answer: counting the ``[`` and
``{`` bytes (two C scans) bounds the depth from above, and only when that count passes
`COUNTED` (256) is the real depth measured and compared with the bound: escaped quotes and
backslashes removed, everything but brackets and quotes deleted (``bytes.translate``), what
lies between quotes dropped (brackets inside strings do not nest), and the running depth's
maximum taken (``itertools.accumulate``), all in C. (An output type's depth is thus enforced
on text with more than `COUNTED` brackets; below that, msgspec's own checks apply.)
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import msgspec

__all__ = ["MAX_DEPTH", "nested_deeper", "too_deep", "type_depth"]

MAX_DEPTH = 128  # levels of arrays and objects: about a quarter of a 256 KiB stack in msgspec
# Text with at most this many brackets is not measured: it nests at most this deep, which msgspec
# decodes within a 256 KiB stack (it overflows at about 550 levels of objects); an answer of a
# couple of hundred objects, common, is then counted and not measured.
COUNTED = 256

_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')
_STEP = tuple(1 if b in b"[{" else -1 if b in b"]}" else 0 for b in range(256))


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
        if data.count("[") + data.count("{") <= COUNTED:
            return False
        data = data.encode("utf-8", "surrogatepass")
    elif data.count(b"[") + data.count(b"{") <= COUNTED:
        return False
    if b"\\" in data:  # escapes: only an escaped quote or backslash could mislead the split
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    # Brackets and quotes only; then every other piece between quotes is outside strings.
    brackets = b"".join(data.translate(None, _NOT_STRUCTURE).split(b'"')[::2])
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0) > bound


def too_deep(bound: int) -> str:
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
