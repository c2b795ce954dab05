"""Acceptance: for hypothesis-generated msgspec types, the reply FakeLLM generates decodes and
validates as that type through ``Client.generate``, over real sockets, whatever the server."""

from __future__ import annotations

import enum
import itertools
from typing import Annotated, Any, Literal

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lmclient
from lmclient.testing import FakeLLM


class Mood(enum.Enum):
    HAPPY = "happy"
    SAD = "sad"


class Size(enum.IntEnum):
    SMALL = 1
    LARGE = 2


# What lmclient's compact grammar does not state (lmclient/_output/gbnf.py): validation checks it.
UNSTATED: list[Any] = [
    Annotated[int, msgspec.Meta(gt=0, multiple_of=5)],
    Annotated[float, msgspec.Meta(ge=0.0, lt=1.0)],
]
LEAVES: list[Any] = [
    int,
    float,
    str,
    bool,
    Mood,
    Size,
    Literal["a", "b", "c"],
    Literal[1, 2, 3],
    Literal[True],
    Annotated[int, msgspec.Meta(ge=-3, le=3)],
    *(
        UNSTATED := [  # what lmclient's compact grammar cannot state: checked by validation only
            Annotated[int, msgspec.Meta(gt=0, multiple_of=5)],
            Annotated[float, msgspec.Meta(ge=0.0, lt=1.0)],
        ]
    ),
    Annotated[str, msgspec.Meta(min_length=2, max_length=5)],
    Annotated[str, msgspec.Meta(pattern=r"^[A-Z]{2}-\d{3}$")],
    Annotated[str, msgspec.Meta(pattern=r"^(red|green|blue)$", max_length=5)],
    Annotated[str, msgspec.Meta(pattern=r"[0-9]{2}")],  # a search: anchored for llama.cpp
    Annotated[str, msgspec.Meta(pattern=r"^ab", max_length=6)],
]
BOUNDED = msgspec.Meta(min_length=1, max_length=3)
_names = itertools.count()


def _struct(fields: list[tuple[Any, bool]]) -> Any:
    """A new Struct type; ``(type, optional)`` pairs, optional fields default to None."""
    spec = [
        (f"f{i}", tp | None, None) if optional else (f"f{i}", tp)
        for i, (tp, optional) in enumerate(fields)
    ]
    spec.sort(key=len)  # required fields (2-tuples) before those with a default
    return msgspec.defstruct(f"Generated{next(_names)}", spec)


def _compose(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        inner.map(lambda t: t | None),
        inner.map(lambda t: list[t]),  # type: ignore[valid-type]
        inner.map(lambda t: Annotated[list[t], BOUNDED]),  # type: ignore[valid-type]
        st.lists(st.tuples(inner, st.booleans()), min_size=1, max_size=4).map(_struct),
    )


def _structs(leaves: list[Any]) -> st.SearchStrategy[Any]:
    field_types = st.recursive(st.sampled_from(leaves), _compose, max_leaves=10)
    return st.lists(st.tuples(field_types, st.booleans()), min_size=1, max_size=6).map(_struct)


# The fake answers a schema with an instance of it, and a grammar with a sentence of it: for the
# compact grammar, of the types whose every constraint it states (the others are told to the
# server only as far as the grammar goes, like on a real one, and validated by lmclient).
STRUCTS = {
    "server": _structs(LEAVES),
    "compact": _structs([t for t in LEAVES if t not in UNSTATED]),
}


# 200 types against the default server, fewer against each other kind (their dialects differ)
SERVERS = [("vllm", 200), ("sglang", 40), ("llamacpp", 40), ("tgi", 40), ("generic", 40)]


@pytest.mark.slow  # 360 generated struct types: seconds
@pytest.mark.parametrize("whitespace", ["compact", "server"])
@pytest.mark.parametrize(("server", "examples"), SERVERS)
def test_generated_replies_validate_as_generated_struct_types(
    server: str, examples: int, whitespace: Any
) -> None:
    fake = FakeLLM(server=server)
    seen: list[Any] = []
    with fake.serve() as url, lmclient.Client(url, whitespace=whitespace) as client:

        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow],
        )
        @given(tp=STRUCTS[whitespace], seed=st.integers(0, 2**16))
        def check(tp: Any, seed: int) -> None:
            fake.seed = seed
            value = client.generate("Invent one.", tp)  # decodes and validates, or raises
            assert isinstance(value, tp)
            assert fake.last_request.asks_for(tp)
            seen.append(tp)

        check()
        assert client.dialect == ("generic" if server == "generic" else server)
    assert len(seen) >= examples


@pytest.mark.parametrize("server", ["vllm", "vllm-guided", "sglang", "llamacpp", "tgi", "ollama"])
@pytest.mark.parametrize("tp", [int, float, bool, Literal["x", "y"], Mood, list[Size], Any])
def test_generated_replies_for_non_struct_types(server: str, tp: Any) -> None:
    fake = FakeLLM(server=server)
    with fake.serve() as url, lmclient.Client(url) as client:
        for seed in range(3):
            fake.seed = seed
            client.generate("Q", tp)  # decodes and validates, or raises
