"""Progressive snapshots of a JSON value while it is written (`Stream.partials()`).

`JsonProgress` reads the text in the pieces it arrives in, once, left to right: a stack of the
open containers and the open string or number is all it keeps of the past, so no prefix is ever
read again. What it has read is a tree that only grows — objects and arrays gain members,
strings gain pieces — and every addition is stamped with the version (the number of snapshots
before it) that first shows it. A `Partial` is then a version and a pointer to the tree: making
one costs nothing however large the value, and its `value` is built only when asked, cutting
each node at its version. Reading the text and making the snapshots are linear in the text.

What a snapshot shows: a string's prefix as soon as it has one (escapes decoded whole), an
object or array as soon as it opens, a number, ``true``, ``false`` or ``null`` only once the
character after it arrived (a number cut by a delta is never shown cut). Malformed JSON stops
the snapshots; the whole value's validation at the end of the stream says what was wrong.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import Any, Generic, TypeVar

import msgspec

__all__ = ["JsonProgress", "Partial"]

T = TypeVar("T")
Path = tuple[str | int, ...]

# Every step reads the text through one of these, at the position reached, so that the work is
# the characters they pass over (the linear-work test counts them).
_TOKEN = re.compile(r"[ \t\n\r]*([^ \t\n\r])?")  # the next character that is not whitespace
_RUN = re.compile(r'[^"\\]*')  # a string's characters up to a quote or a backslash
_ESCAPE = re.compile(r'\\(?:u[0-9a-fA-F]{4}|["\\/bfnrt])')
_SCALAR = re.compile(r"[^ \t\n\r,\]}]*")  # a number or literal, up to what may follow it
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_LONGEST_ESCAPE = 6  # \uXXXX
_SCALAR_START = frozenset("-0123456789tfn")
_decode_scalar = msgspec.json.Decoder(int | float | bool | None).decode


class _Str:
    """A string value's decoded pieces, each with the version that first shows it."""

    __slots__ = ("marks", "pieces")

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.marks: list[int] = []


class _Container:
    """An object's or array's members in the order written (``keys`` is None for an array),
    each with the version that first shows it; a key written twice is kept twice, and the later
    value wins when the snapshot is built, as decoding has it."""

    __slots__ = ("cell", "keys", "marks", "values")

    def __init__(self, cell: tuple[Any, ...], is_object: bool) -> None:
        self.cell = cell  # (parent's cell, key), or () for the root: the path, shared
        self.keys: list[str] | None = [] if is_object else None
        self.values: list[Any] = []
        self.marks: list[int] = []


def _built(node: Any, version: int) -> Any:
    """The plain value of ``node`` as the snapshot of ``version`` shows it."""
    if isinstance(node, _Str):
        return "".join(node.pieces[: bisect_right(node.marks, version)])
    if isinstance(node, _Container):
        end = bisect_right(node.marks, version)
        if node.keys is None:
            return [_built(v, version) for v in node.values[:end]]
        return {
            k: _built(v, version) for k, v in zip(node.keys[:end], node.values[:end], strict=True)
        }
    return node


_MISSING: Any = object()


def _member(node: Any, key: str | int, version: int) -> Any:
    """The member ``key`` of a container as the snapshot of ``version`` shows it, or _MISSING."""
    if not isinstance(node, _Container):
        return _MISSING
    end = bisect_right(node.marks, version)
    if node.keys is None:
        if isinstance(key, int) and -end <= key < end:
            return node.values[key % end]
        return _MISSING
    for i in range(end - 1, -1, -1):  # a key written twice: the later value
        if node.keys[i] == key:
            return node.values[i]
    return _MISSING


def _path(cell: tuple[Any, ...]) -> Path:
    keys: list[str | int] = []
    while cell:
        cell, key = cell
        keys.append(key)
    return tuple(reversed(keys))


class Partial(Generic[T]):
    """One snapshot of a value of type ``T`` while it is written: what the JSON says so far.

    ``value`` is the object so far as plain JSON values (dicts, lists, str, int, float, bool,
    None) under the keys the model wrote: strings may be prefixes, objects and arrays may lack
    members, a number is there only once whole. ``incomplete`` lists the paths of the values
    still being written, outermost first (``()`` is the whole value); ``done`` is True once the
    value closed. The validated ``T`` is the stream's ``value`` at the end.
    """

    __slots__ = ("_cell", "_root", "_value", "_version")

    def __init__(self, root: _Container, version: int, cell: tuple[Any, ...] | None) -> None:
        self._root = root
        self._version = version
        self._cell = cell  # the deepest value still open, or None once the whole value closed
        self._value: dict[str, Any] | None = None

    @property
    def value(self) -> dict[str, Any]:
        """The value so far, built on first use (then kept): each snapshot's is its own."""
        if self._value is None:
            value: dict[str, Any] = _built(self._root, self._version)
            self._value = value
        return self._value

    @property
    def done(self) -> bool:
        """The whole value has been written (its validation comes at the end of the stream)."""
        return self._cell is None

    @property
    def incomplete(self) -> tuple[Path, ...]:
        """The paths of the values still being written, from ``()`` (the whole value) to the
        deepest (a string, an object or an array); empty once ``done``."""
        if self._cell is None:
            return ()
        path = _path(self._cell)
        return tuple(path[:i] for i in range(len(path) + 1))

    def get(self, *path: str | int, default: Any = None) -> Any:
        """The value at ``path`` (object keys and array indices) so far, or ``default`` if it is
        not there yet: ``snapshot.get("tags", 0)``. It builds only that value, not the whole."""
        node: Any = self._root
        for key in path:
            node = _member(node, key, self._version)
            if node is _MISSING:
                return default
        return _built(node, self._version)

    def complete(self, *path: str | int) -> bool:
        """Whether the value at ``path`` is there and whole (no longer written)."""
        if self.get(*path, default=_MISSING) is _MISSING:
            return False
        return path not in self.incomplete

    def __repr__(self) -> str:
        return f"Partial({self.value!r}, done={self.done}, incomplete={list(self.incomplete)})"


class JsonProgress:
    """Read one JSON value in pieces; `feed` returns a `Partial` when what it shows changed.

    ``max_depth`` bounds the nesting held (deeper text stops the snapshots, as malformed text
    does; the final decoding reports it)."""

    __slots__ = (
        "_cell",
        "_changed",
        "_escape",
        "_high",
        "_key",
        "_mode",
        "_root",
        "_scalar",
        "_stack",
        "_string",
        "_version",
        "max_depth",
    )

    def __init__(self, max_depth: int) -> None:
        self.max_depth = max_depth
        self._stack: list[_Container] = []
        self._root: Any = None
        # What comes next: "root" (the object's "{"), "first_name" (after "{": a key or "}"),
        # "name" (after ","), "key" (in a key), "colon", "value", "first" (after "[": a value or
        # "]"), "string", "scalar", "after" (after a member: "," or the closer), "end", "broken".
        self._mode = "root"
        self._key: list[str] = []  # an object key's decoded pieces, while it is read
        self._string: _Str | None = None  # the open string value
        self._cell: tuple[Any, ...] | None = None  # the open string's path cell
        self._scalar: list[str] = []  # an open number's or literal's text
        self._escape = ""  # an escape cut by the end of a delta
        self._high = ""  # a high surrogate, waiting for its low half
        self._version = 1  # the version of what the next snapshot will show
        self._changed = False

    @property
    def broken(self) -> bool:
        """The text is not JSON (or nests deeper than allowed): no more snapshots."""
        return self._mode == "broken"

    def feed(self, delta: str) -> Partial[Any] | None:
        pos, n = 0, len(delta)
        while pos < n and self._mode not in ("end", "broken"):
            pos = self._step(delta, pos)
        if not self._changed:
            return None
        self._changed = False
        version, self._version = self._version, self._version + 1
        if self._mode == "string":
            open_cell = self._cell
        elif self._stack:
            open_cell = self._stack[-1].cell
        else:
            open_cell = None
        return Partial(self._root, version, open_cell)

    # -- one step: reads from ``pos``, returns where it stopped --------------------------------

    def _step(self, delta: str, pos: int) -> int:
        mode = self._mode
        if mode in ("string", "key"):
            return self._in_string(delta, pos)
        if mode == "scalar":
            end = _SCALAR.match(delta, pos).end()  # type: ignore[union-attr]  # it matches ""
            if end > pos:
                self._scalar.append(delta[pos:end])
                return end
            self._end_scalar()  # a character that may follow it: read it in the next step
            return pos
        m = _TOKEN.match(delta, pos)
        assert m is not None  # it matches whitespace up to the end too
        c = m.group(1)
        end = m.end()
        if c is None:  # whitespace to the end of the delta
            return end
        top = self._stack[-1] if self._stack else None
        if mode == "root":  # an object, and nothing else, may begin the text
            if c == "{":
                return self._open(c, end)
            self._mode = "broken"
            return end
        if mode == "value" or (mode == "first" and c != "]"):
            if c in _SCALAR_START:
                self._mode = "scalar"
                return end - 1  # the scalar's first character: read by `_SCALAR`
            return self._open(c, end)
        if mode in ("name", "first_name") and c == '"':
            self._mode = "key"
        elif mode == "colon" and c == ":":
            self._mode = "value"
        elif mode == "after" and c == "," and top is not None:
            self._mode = "value" if top.keys is None else "name"
        elif top is not None and (
            (c == "]" and mode in ("after", "first") and top.keys is None)
            or (c == "}" and mode in ("after", "first_name") and top.keys is not None)
        ):
            self._close()
        else:
            self._mode = "broken"
        return end

    def _open(self, c: str, end: int) -> int:
        """A value that shows at once: a string, an object or an array."""
        if c == '"':
            self._string = _Str()
            self._cell = self._add(self._string)
            self._mode = "string"
        elif c in "{[" and len(self._stack) < self.max_depth:
            node = _Container((), c == "{")
            node.cell = self._add(node)
            self._stack.append(node)
            self._mode = "first_name" if c == "{" else "first"
        else:  # not a value, or nested deeper than the type allows
            self._mode = "broken"
        return end

    def _add(self, node: Any) -> tuple[Any, ...]:
        """Put a new value in its container (or make it the root); returns its path cell."""
        self._changed = True
        if not self._stack:
            self._root = node
            return ()
        top = self._stack[-1]
        if top.keys is None:
            key: str | int = len(top.values)
        else:
            key = "".join(self._key)
            self._key.clear()
            top.keys.append(key)
        top.values.append(node)
        top.marks.append(self._version)
        return (top.cell, key)

    def _close(self) -> None:
        """The innermost container closed."""
        self._stack.pop()
        self._changed = True
        self._mode = "after" if self._stack else "end"

    def _end_scalar(self) -> None:
        text = "".join(self._scalar)
        self._scalar.clear()
        try:
            value = _decode_scalar(text)
        except (msgspec.DecodeError, msgspec.ValidationError):
            self._mode = "broken"
            return
        self._add(value)
        self._mode = "after"  # a scalar is always inside the root object

    def _in_string(self, delta: str, pos: int) -> int:
        """Inside a key or a string value: a run of characters, an escape, or the end."""
        if self._escape:
            return self._escaped(delta, pos)
        end = _RUN.match(delta, pos).end()  # type: ignore[union-attr]  # it matches ""
        if self._high and (end > pos or delta[pos] == '"'):
            self._mode = "broken"  # a high surrogate without its low half
            return pos
        if end > pos:
            self._piece(delta[pos:end])
            return end
        if delta[pos] == '"':
            if self._mode == "key":
                self._mode = "colon"
            else:
                self._string = self._cell = None
                self._mode = "after"  # a string is always inside the root object
                self._changed = True
            return pos + 1
        self._escape = "\\"
        return self._escaped(delta, pos + 1)

    def _escaped(self, delta: str, pos: int) -> int:
        """Complete the escape begun in ``self._escape``, with at most five more characters."""
        have = self._escape
        more = delta[pos : pos + _LONGEST_ESCAPE - len(have)]
        text = have + more
        m = _ESCAPE.match(text)
        if m is not None:
            self._escape = ""
            self._decoded(m.group())
            return pos + m.end() - len(have)
        if pos + len(more) == len(delta) and len(text) < _LONGEST_ESCAPE and text[1:2] in ("", "u"):
            self._escape = text  # cut by the end of the delta: wait for the rest
        else:
            self._mode = "broken"
        return len(delta)

    def _decoded(self, escape: str) -> None:
        if escape[1] != "u":
            if self._high:
                self._mode = "broken"
                return
            self._piece(_ESCAPES[escape[1]])
            return
        code = int(escape[2:], 16)
        if self._high:
            high, self._high = int(self._high, 16), ""
            if not 0xDC00 <= code <= 0xDFFF:
                self._mode = "broken"
                return
            self._piece(chr(0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00)))
        elif 0xD800 <= code <= 0xDBFF:
            self._high = escape[2:]
        elif 0xDC00 <= code <= 0xDFFF:
            self._mode = "broken"
        else:
            self._piece(chr(code))

    def _piece(self, text: str) -> None:
        if self._mode == "key":
            self._key.append(text)
            return
        string = self._string
        assert string is not None
        string.pieces.append(text)
        string.marks.append(self._version)
        self._changed = True
