"""The output types the compact grammar is tested on (`tests/output/test_gbnf.py`), each with
values to encode: also read by the e2e tests that give the same grammars to xgrammar and
llama.cpp (`tests/e2e/test_gbnf_xgrammar.py`, `tests/e2e/test_compact_strictness.py`)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import functools
import uuid
from collections.abc import Callable
from typing import Annotated, Any, Literal, NamedTuple, TypedDict

import msgspec
from hypothesis import strategies as st

from lmclient._output.gbnf import CompactGrammar, compact_grammar
from lmclient._output.types import compile_output
from tests.gbnf_match import Grammar

# ------------------------------------------------------------------------------- output types


class Pet(msgspec.Struct):
    name: Annotated[str, msgspec.Meta(max_length=20)]
    species: Literal["cat", "dog"]
    age: Annotated[int, msgspec.Meta(ge=0, le=30)]


class Sparse(msgspec.Struct, omit_defaults=True, rename={"quoted": "say hi é"}):
    a: int | None = None
    b: str = ""
    quoted: list[int] = []
    d: bool = False


class Tree(msgspec.Struct):
    value: int
    kids: list[Tree]


class Cat(msgspec.Struct, tag="cat", tag_field="kind"):
    lives: Annotated[int, msgspec.Meta(ge=1, le=9)]


class Dog(msgspec.Struct, tag="dog", tag_field="kind"):
    name: str
    born: dt.date | None = None


class Movie(TypedDict, total=False):
    title: str
    year: int


class Point(NamedTuple):
    x: float
    y: float
    label: str | None


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 10


@dataclasses.dataclass
class Stamp:
    at: Annotated[dt.datetime, msgspec.Meta(tz=True)]
    day: dt.date
    clock: Annotated[dt.time, msgspec.Meta(tz=True)]
    local: Annotated[dt.time, msgspec.Meta(tz=False)]
    id: uuid.UUID
    blob: bytes
    price: decimal.Decimal


_INT = st.integers(-(2**63), 2**64 - 1)  # what the grammar offers for a plain int
_FLOAT = st.floats(-9e307, 9e307, allow_nan=False)  # exponents past 307 can overflow
_OFFSETS = st.integers(-(24 * 60 - 1), 24 * 60 - 1).map(
    lambda m: dt.timezone(dt.timedelta(minutes=m))
)
JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | _INT | _FLOAT | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
_TREES: st.SearchStrategy[Tree] = st.deferred(
    lambda: st.builds(Tree, _INT, st.lists(_TREES, max_size=2))
)


class Case(NamedTuple):
    tp: Any
    values: st.SearchStrategy[Any]
    exact: bool = True  # False: a constraint the grammar cannot state (see lmclient._output.gbnf)


CASES: dict[str, Case] = {
    "pet": Case(
        Pet,
        st.builds(Pet, st.text(max_size=20), st.sampled_from(["cat", "dog"]), st.integers(0, 30)),
    ),
    "pets": Case(
        list[Pet],
        st.lists(
            st.builds(
                Pet, st.text(max_size=20), st.sampled_from(["cat", "dog"]), st.integers(0, 30)
            ),
            max_size=3,
        ),
    ),
    "sparse": Case(
        Sparse,
        st.builds(
            Sparse, st.none() | _INT, st.text(max_size=5), st.lists(_INT, max_size=2), st.booleans()
        ),
    ),
    "tree": Case(Tree, _TREES),
    "union": Case(
        Cat | Dog,
        st.builds(Cat, st.integers(1, 9))
        | st.builds(Dog, st.text(max_size=5), st.none() | st.dates()),
    ),
    "typeddict": Case(  # a dict encodes in its own key order: built here in the declared one
        Movie,
        st.fixed_dictionaries({}, optional={"title": st.text(max_size=5), "year": _INT}).map(
            lambda d: {k: d[k] for k in ("title", "year") if k in d}
        ),
    ),
    "namedtuple": Case(Point, st.builds(Point, _FLOAT, _FLOAT, st.none() | st.text(max_size=5))),
    "intenum": Case(Level, st.sampled_from(Level)),
    "choice": Case(Literal["yes", "no", 'q"uote'], st.sampled_from(["yes", "no", 'q"uote'])),
    "literals": Case(Literal[1, "a", None, True], st.sampled_from([1, "a", None, True])),
    "stamp": Case(
        Stamp,
        st.builds(
            Stamp,
            st.datetimes(timezones=_OFFSETS),
            st.dates(),
            st.times(timezones=_OFFSETS),
            st.times(),
            st.uuids(),
            st.binary(max_size=8),
            st.from_regex(r"-?(0|[1-9][0-9]{0,5})(\.[0-9]{1,4})?", fullmatch=True).map(
                decimal.Decimal
            ),
        ),
    ),
    "dict": Case(dict[str, int], st.dictionaries(st.text(max_size=5), _INT, max_size=3)),
    "dict-bounded": Case(
        Annotated[dict[str, bool], msgspec.Meta(min_length=1, max_length=2)],
        st.dictionaries(st.text(max_size=5), st.booleans(), min_size=1, max_size=2),
    ),
    "dict-keys": Case(  # a key's Meta goes to propertyNames
        Annotated[
            dict[Annotated[str, msgspec.Meta(min_length=1, max_length=3)], int],
            msgspec.Meta(max_length=2),
        ],
        st.dictionaries(st.text(min_size=1, max_size=3), _INT, max_size=2),
    ),
    "dict-int-keys": Case(  # lmclient gives the keys a propertyNames pattern
        dict[int, bool], st.dictionaries(_INT, st.booleans(), max_size=3)
    ),
    "dict-literal-keys": Case(
        dict[Literal["a", "b\n"], bool],
        st.dictionaries(st.sampled_from(["a", "b\n"]), st.booleans()),
    ),
    "tuple": Case(tuple[int, str, bool], st.tuples(_INT, st.text(max_size=5), st.booleans())),
    "vartuple": Case(tuple[float, ...], st.lists(_FLOAT, max_size=4).map(tuple)),
    "list-bounded": Case(
        Annotated[list[int], msgspec.Meta(min_length=1, max_length=3)],
        st.lists(_INT, min_size=1, max_size=3),
    ),
    "set": Case(set[str], st.sets(st.text(max_size=3), max_size=3), exact=False),  # uniqueItems
    "optional": Case(int | None, st.none() | _INT),
    "mixed": Case(int | str | None, st.none() | _INT | st.text(max_size=5)),
    "number": Case(int | float, _INT | _FLOAT),
    "bounded-int": Case(Annotated[int, msgspec.Meta(ge=-5, lt=123)], st.integers(-5, 122)),
    "float-bounds": Case(
        Annotated[float, msgspec.Meta(gt=0)], st.floats(0, 9e307, exclude_min=True)
    ),
    "unit-float": Case(Annotated[float, msgspec.Meta(ge=0, le=1)], st.floats(0, 1)),
    "open-float": Case(
        Annotated[float, msgspec.Meta(gt=-10.5, lt=40)],
        st.floats(-10.5, 40, exclude_min=True, exclude_max=True),
    ),
    "quarter-float": Case(Annotated[float, msgspec.Meta(ge=0.25, le=0.75)], st.floats(0.25, 0.75)),
    "negative-float": Case(Annotated[float, msgspec.Meta(le=-1)], st.floats(-9e307, -1)),
    "float-list": Case(
        Annotated[list[Annotated[float, msgspec.Meta(ge=0, le=1)]], msgspec.Meta(max_length=3)],
        st.lists(st.floats(0, 1), max_size=3),
    ),
    "multiple-of": Case(
        Annotated[int, msgspec.Meta(multiple_of=5)],
        st.integers(-(2**63) // 5 + 1, (2**64 - 1) // 5).map(lambda n: n * 5),
    ),
    "multiple-of-range": Case(
        Annotated[int, msgspec.Meta(ge=-100, le=10**6, multiple_of=7)],
        st.integers(-14, 142857).map(lambda n: n * 7),
    ),
    "string-bounded": Case(
        Annotated[str, msgspec.Meta(min_length=2, max_length=4)], st.text(min_size=2, max_size=4)
    ),
    "pattern": Case(
        Annotated[str, msgspec.Meta(pattern=r"^[a-z]{2}-\d+$")],
        st.from_regex(r"[a-z]{2}-[0-9]+", fullmatch=True),
    ),
    "pattern-length": Case(
        Annotated[str, msgspec.Meta(pattern="^a+$", max_length=3)],
        st.from_regex("a{1,3}", fullmatch=True),
    ),
    "search": Case(
        Annotated[str, msgspec.Meta(pattern='x"y')],
        st.text(max_size=3).flatmap(lambda s: st.just(s + 'x"y' + s)),
    ),
    "any": Case(Any, JSON_VALUES),
    "any-list": Case(list[Any], st.lists(JSON_VALUES, max_size=3)),
}


@functools.cache
def compiled(name: str) -> tuple[CompactGrammar, Grammar]:
    schema = compile_output(CASES[name].tp).schema
    assert schema is not None
    result = compact_grammar(schema)
    assert result is not None, name
    return result, Grammar(result.text)


def decoder(name: str) -> Callable[[bytes], Any]:
    return msgspec.json.Decoder(CASES[name].tp).decode
