"""The task set of `agent.py`: questions that each need one tool and end in a typed answer.

Each task has one tool, a deterministic local function (no network: a table, else a number
made from the argument's CRC-32), a typed answer of two or three bounded fields as lmclient
takes it (a msgspec Struct) and as its pydantic twin for the openai SDK, and two prompts. Every
string is bounded (`msgspec.Meta(max_length=...)`, pydantic's `max_length`), the tools'
arguments too, so no answer and no call can run long under a constraint; a name is never empty
(`min_length=1`: unbounded below, Gemma 3 270M called `weather(city="")` eight times a turn).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

import msgspec
import pydantic

__all__ = ["QUICK_TASKS", "TASKS", "Task"]

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=40)]  # a name is never empty
Code = Annotated[str, msgspec.Meta(min_length=3, max_length=3)]
Amount = Annotated[float, msgspec.Meta(ge=0, le=1e9)]


def _number(text: str, low: int, high: int) -> int:
    """A number in [low, high] that depends on ``text`` only (not on Python's salted hash)."""
    return low + zlib.crc32(text.strip().lower().encode()) % (high - low + 1)


# -- the tools -------------------------------------------------------------------------------


def weather(city: Name) -> str:
    """Get the current weather for a city."""
    celsius = {"oslo": 4, "lisbon": 19}.get(city.strip().lower(), _number(city, -10, 35))
    return f"{city}: cloudy, {celsius} degrees Celsius."


RATES = {"USD": 1.0, "EUR": 0.92, "GBP": 0.79, "JPY": 151.0, "NOK": 10.8}


def convert(amount: Amount, source: Code, target: Code) -> str:
    """Convert an amount of money from one currency to another (ISO codes like USD, EUR)."""
    rates = [RATES.get(code.upper()) for code in (source, target)]
    if rates[0] is None or rates[1] is None:
        return f"Unknown currency: {source if rates[0] is None else target}."
    return f"{amount:g} {source.upper()} = {amount / rates[0] * rates[1]:.2f} {target.upper()}"


def clock(zone: Name) -> str:
    """Get the current local time in a city or time zone."""
    offsets = {"tokyo": 9, "asia/tokyo": 9, "new york": -5, "america/new_york": -5}
    hour = (12 + offsets.get(zone.strip().lower(), _number(zone, -11, 12))) % 24
    return f"It is {hour:02d}:30 in {zone}."


def lookup(term: Name) -> str:
    """Look up the meaning of a word or technical term."""
    meanings = {
        "idempotent": "giving the same result however many times it is applied",
        "latency": "the delay between a request and its response",
    }
    found = meanings.get(term.strip().lower().strip("'\""))
    return f"{term}: {found}." if found else f"{term}: no entry."


def population(city: Name) -> str:
    """Get the number of people living in a city."""
    people = {"bergen": 291_000, "kyoto": 1_460_000}.get(city.strip().lower())
    return f"{city} has {people or _number(city, 10_000, 9_000_000)} inhabitants."


def distance(origin: Name, destination: Name) -> str:
    """Get the road distance in kilometres between two cities."""
    table = {("paris", "berlin"): 1054, ("madrid", "lisbon"): 625}
    key = (origin.strip().lower(), destination.strip().lower())
    km = table.get(key) or table.get(key[::-1]) or _number("-".join(sorted(key)), 50, 4000)
    return f"{origin} to {destination}: {km} km by road."


# -- the answers (msgspec for lmclient) ------------------------------------------------------


class Forecast(msgspec.Struct):
    city: Name
    celsius: Annotated[int, msgspec.Meta(ge=-90, le=60)]


class Money(msgspec.Struct):
    amount: Amount
    currency: Code


class LocalTime(msgspec.Struct):
    zone: Name
    hour: Annotated[int, msgspec.Meta(ge=0, le=23)]
    minute: Annotated[int, msgspec.Meta(ge=0, le=59)]


class Definition(msgspec.Struct):
    term: Name
    meaning: Annotated[str, msgspec.Meta(max_length=80)]


class Population(msgspec.Struct):
    city: Name
    people: Annotated[int, msgspec.Meta(ge=0, le=50_000_000)]


class Distance(msgspec.Struct):
    origin: Name
    destination: Name
    km: Annotated[int, msgspec.Meta(ge=0, le=40_000)]


# -- their pydantic twins (the openai SDK's) -------------------------------------------------

Field = pydantic.Field


class ForecastModel(pydantic.BaseModel):
    city: str = Field(min_length=1, max_length=40)
    celsius: int = Field(ge=-90, le=60)


class MoneyModel(pydantic.BaseModel):
    amount: float = Field(ge=0, le=1e9)
    currency: str = Field(min_length=3, max_length=3)


class LocalTimeModel(pydantic.BaseModel):
    zone: str = Field(min_length=1, max_length=40)
    hour: int = Field(ge=0, le=23)
    minute: int = Field(ge=0, le=59)


class DefinitionModel(pydantic.BaseModel):
    term: str = Field(min_length=1, max_length=40)
    meaning: str = Field(max_length=80)


class PopulationModel(pydantic.BaseModel):
    city: str = Field(min_length=1, max_length=40)
    people: int = Field(ge=0, le=50_000_000)


class DistanceModel(pydantic.BaseModel):
    origin: str = Field(min_length=1, max_length=40)
    destination: str = Field(min_length=1, max_length=40)
    km: int = Field(ge=0, le=40_000)


@dataclass(frozen=True)
class Task:
    """One agent task: its tool, its answer type for each client, its prompts."""

    key: str  # what `--tasks` names
    function: Callable[..., str]  # the tool
    answer: type[msgspec.Struct]
    model: type[pydantic.BaseModel]
    prompts: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.key} → `{self.answer.__name__}`"


TASKS: tuple[Task, ...] = (
    Task(
        "weather",
        weather,
        Forecast,
        ForecastModel,
        ("What is the weather in Oslo right now?", "Is it warm in Lisbon today?"),
    ),
    Task(
        "convert",
        convert,
        Money,
        MoneyModel,
        ("How much is 120 US dollars in euros?", "Convert 5000 Japanese yen to British pounds."),
    ),
    Task(
        "clock",
        clock,
        LocalTime,
        LocalTimeModel,
        ("What time is it in Tokyo?", "What is the local time in New York now?"),
    ),
    Task(
        "lookup",
        lookup,
        Definition,
        DefinitionModel,
        ("Look up what 'idempotent' means.", "What does the word 'latency' mean?"),
    ),
    Task(
        "population",
        population,
        Population,
        PopulationModel,
        ("How many people live in Bergen?", "What is the population of Kyoto?"),
    ),
    Task(
        "distance",
        distance,
        Distance,
        DistanceModel,
        (
            "How far is it from Paris to Berlin by road?",
            "What is the distance from Madrid to Lisbon?",
        ),
    ),
)

#: A smoke run's tasks (`--quick`).
QUICK_TASKS: tuple[str, ...] = ("weather", "convert")
