"""A batch's outcomes as columns: what `lmclient.ray` hands to Arrow, decided without Arrow.

A record type (a Struct, dataclass, NamedTuple, TypedDict, pydantic model) gives one column per
field, so a dataset's users filter and aggregate on ``age`` rather than unpacking a blob; any
other type gives one ``value`` column. Every outcome is one row, failed or not: a failed row has
nulls in the value columns and says why in ``error_type`` and ``error_message``, so nothing is
dropped and a job can be audited after the fact. Usage is per row (the sum over its re-asked
answers, a failed row's too), the counts a cost report needs.

Values become Python builtins (msgspec's ``to_builtins``: nested records as dicts, enums as
their values, sets as lists), keeping the types Arrow stores natively (dates and times,
``Decimal``, bytes) as they are. Pure: no Arrow, no Ray, so it is tested on every Python.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import sys
from collections.abc import Callable, Sequence
from typing import Any, cast

import msgspec

from ._response import Response

__all__ = ["ERROR_COLUMNS", "USAGE_COLUMNS", "Columns", "record_fields"]

USAGE_COLUMNS = ("prompt_tokens", "completion_tokens")
ERROR_COLUMNS = ("error_type", "error_message")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_ARROW_NATIVE = (
    datetime.datetime,
    datetime.date,
    datetime.time,
    datetime.timedelta,
    decimal.Decimal,
    bytes,
    bytearray,
)


def _builtins(value: Any) -> Any:
    return msgspec.to_builtins(value, builtin_types=_ARROW_NATIVE)


def record_fields(output_type: Any) -> tuple[str, ...] | None:
    """The field names of a record type, in declaration order; None for any other type."""
    if not isinstance(output_type, type):  # list[int], Literal[...], a marker: not a record
        return None
    if issubclass(output_type, msgspec.Struct):
        return tuple(f.name for f in msgspec.structs.fields(output_type))
    if dataclasses.is_dataclass(output_type):
        return tuple(f.name for f in dataclasses.fields(output_type))
    if issubclass(output_type, tuple) and hasattr(output_type, "_fields"):  # a NamedTuple
        return tuple(output_type._fields)
    if issubclass(output_type, dict) and hasattr(output_type, "__required_keys__"):  # TypedDict
        return tuple(output_type.__annotations__)
    pydantic = sys.modules.get("pydantic")  # never imported here: only if the user has it
    if pydantic is not None and issubclass(output_type, pydantic.BaseModel):
        return tuple(cast(Any, output_type).model_fields)
    return None


def _field_getter(output_type: Any) -> Callable[[Any], Any]:
    """A record value → its fields as a dict of builtins (a TypedDict may lack optional keys)."""
    if isinstance(output_type, type) and issubclass(output_type, dict):
        return _builtins
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and issubclass(output_type, pydantic.BaseModel):
        return lambda value: _builtins(value.model_dump())
    names = record_fields(output_type) or ()
    return lambda value: {name: _builtins(getattr(value, name)) for name in names}


def _too_big(value: Any) -> int | None:
    """An integer in ``value`` (builtins, at any depth) that Arrow's int64 cannot hold: a
    valid value of a plain ``int`` (lmclient's grammar allows unsigned 64-bit ones too), which
    would otherwise fail the whole batch's conversion."""
    if isinstance(value, int):
        return value if not _INT64_MIN <= value <= _INT64_MAX else None
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, list):
        return None
    for item in value:
        found = _too_big(item)
        if found is not None:
            return found
    return None


class Columns:
    """The output columns of one output type, and a batch's outcomes split into them."""

    __slots__ = ("_fields", "_record", "names", "value_names")

    def __init__(self, output_type: Any) -> None:
        fields = record_fields(output_type)
        self._fields = None if fields is None else _field_getter(output_type)
        self.value_names: tuple[str, ...] = ("value",) if fields is None else fields
        clash = set(self.value_names) & {*USAGE_COLUMNS, *ERROR_COLUMNS}
        if clash:
            raise ValueError(
                f"the output type's field(s) {sorted(clash)} would share a name with lmclient's "
                f"usage and error columns {[*USAGE_COLUMNS, *ERROR_COLUMNS]}: rename them"
            )
        self.names = (*self.value_names, *USAGE_COLUMNS, *ERROR_COLUMNS)

    def split(self, outcomes: Sequence[Response[Any] | BaseException]) -> dict[str, list[Any]]:
        """One row per outcome, in order: a `Response`'s value and usage, or an error's type,
        message and usage (a `ValidationError` carries its answers'), its values null."""
        out: dict[str, list[Any]] = {name: [] for name in self.names}
        values = [out[name] for name in self.value_names]
        prompt_tokens, completion_tokens = out["prompt_tokens"], out["completion_tokens"]
        error_type, error_message = out["error_type"], out["error_message"]
        for outcome in outcomes:
            too_big = None
            if isinstance(outcome, Response):
                usage = outcome.total_usage
                row = outcome.values[0]
                fields = {"value": _builtins(row)} if self._fields is None else self._fields(row)
                too_big = _too_big(fields)
                if too_big is None:
                    for name, column in zip(self.value_names, values, strict=True):
                        column.append(fields.get(name))
                    error_type.append(None)
                    error_message.append(None)
            else:
                usage = getattr(outcome, "total_usage", None)
            if too_big is not None or not isinstance(outcome, Response):
                for column in values:
                    column.append(None)
                if too_big is not None:
                    error_type.append("OverflowError")
                    error_message.append(
                        f"the value holds {too_big}, outside the signed 64-bit integers Arrow "
                        "stores: bound the type (msgspec.Meta(ge=..., le=...))"
                    )
                else:
                    error_type.append(type(outcome).__name__)
                    error_message.append(str(outcome))
            prompt_tokens.append(None if usage is None else usage.prompt_tokens)
            completion_tokens.append(None if usage is None else usage.completion_tokens)
        return out
