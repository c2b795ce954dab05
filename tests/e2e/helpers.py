"""What the e2e tests against llama.cpp share: small calls (greedy, seeded, few tokens) and an
output type of each kind, with the type of value it decodes to."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

import msgspec

import lmclient
from lmclient import CallParams

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=16)]
SMALL: CallParams = {"temperature": 0.0, "seed": 1, "max_tokens": 256}


class Person(msgspec.Struct):
    name: Name
    age: Annotated[int, msgspec.Meta(ge=0, le=120)]


class Pet(msgspec.Struct):
    name: Name
    species: Literal["cat", "dog", "bird"]


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


Pets = Annotated[list[Pet], msgspec.Meta(min_length=1, max_length=3)]
DIGITS = lmclient.Grammar("root ::= [0-9] [0-9] [0-9]")

KINDS: list[tuple[str, Any, type]] = [
    ("struct", Person, Person),
    ("literal", Literal["yes", "no"], str),
    ("enum", Color, Color),
    ("choice", lmclient.Choice(["alpha", "beta", "gamma"]), str),
    ("int", int, int),
    ("bool", bool, bool),
    ("float", float, float),
    ("list-struct", Pets, list),
    ("regex", lmclient.Regex(r"[A-Z]{3}-[0-9]{2}"), str),
    ("grammar", DIGITS, str),
    (
        "jsonschema",
        lmclient.JsonSchema(
            {
                "type": "object",
                "properties": {"ok": {"type": "boolean"}},
                "required": ["ok"],
                "additionalProperties": False,
            }
        ),
        dict,
    ),
]
