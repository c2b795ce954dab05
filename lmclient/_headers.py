"""`Headers`: a response's headers as the application reads them.

Both transports already hold a response's headers as a dict of lower-case names (lmclient's own
parser builds one per response; httpx's are turned into one), with a repeated header's values
joined by ", " as RFC 9110 §5.3 allows. `Headers` only wraps that dict, when asked for, so that a
call that never reads its headers pays nothing for them: no copy, no lower-casing, no object.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

__all__ = ["Headers"]

_EMPTY: dict[str, str] = {}


class Headers(Mapping[str, str]):
    """A response's headers: read-only, names case-insensitive (``headers["X-Request-Id"]`` and
    ``headers["x-request-id"]`` are the same), iterated as lower-case names. A header the server
    repeated is one value, its values joined by ", ".

    ``Headers({"X-RateLimit-Remaining": "9"})`` makes one from any mapping (names
    lower-cased); lmclient's own wrap the response's dict without copying it."""

    __slots__ = ("_fields",)

    _fields: Mapping[str, str]

    def __init__(self, headers: Mapping[str, str] | None = None) -> None:
        fields: dict[str, str] = {}
        for name, value in (headers or _EMPTY).items():
            key = name.lower()
            fields[key] = f"{fields[key]}, {value}" if key in fields else value
        self._fields = fields

    @classmethod
    def of(cls, fields: Mapping[str, str] | None) -> Headers:
        """Wrap ``fields``, whose names are already lower-case (a transport's), without a copy:
        nothing keeps a reference that could change them."""
        headers = cls.__new__(cls)
        headers._fields = _EMPTY if fields is None else fields
        return headers

    def __getitem__(self, name: str) -> str:
        return self._fields[name.lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._fields

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def __eq__(self, other: object) -> bool:
        """Equal to any mapping with the same names (in any case) and values."""
        if not isinstance(other, Mapping):
            return NotImplemented
        theirs = other._fields if isinstance(other, Headers) else Headers(other)._fields
        return dict(self._fields) == dict(theirs)

    def __repr__(self) -> str:
        return f"Headers({dict(self._fields)!r})"
