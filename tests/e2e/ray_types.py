"""Output types of the Ray Data tests, in a module of their own: Ray pickles a class by
reference when its module can be imported by the workers (tests/e2e/test_ray_data.py puts the
repository on their PYTHONPATH), as an application's types would be."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec


class Person(msgspec.Struct):
    name: Annotated[str, msgspec.Meta(max_length=12)]
    age: Annotated[int, msgspec.Meta(ge=0, le=120)]


class Review(msgspec.Struct):
    sentiment: Literal["positive", "negative", "neutral"]
    stars: Annotated[int, msgspec.Meta(ge=1, le=5)]


class ByValue(msgspec.Struct):
    """Pickled by value in one test (cloudpickle.register_pickle_by_value), as a class defined
    in a script's ``__main__`` is: it arrives without its fields."""

    word: str
