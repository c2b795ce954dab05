"""The task set of `e2e.py`: output types, each as lmclient takes it and as its pydantic twin
for the peers, with fixed prompts.

Every type exists twice: the msgspec/lmclient form (what an lmclient user writes) and the
pydantic form with the same constraints (what an openai SDK, instructor or Outlines user
writes). A value counts as valid when it validates against the type: msgspec for lmclient,
pydantic for the peers, with the same bounds on both sides.

`bounded` says whether every string, array and number of the type has a bound, i.e. whether its
longest valid encoding is finite; the issue's targets treat bounded and unbounded types apart.

`GROUPS` names subsets that `--types` takes as one word: `numbers` is the bounded numeric
types (floats in a range, inclusive and exclusive, negative and fractional; an int
`multiple_of`), whose bounds the compact grammar holds and llama.cpp's own schema mode does not
(issue 28), a few minutes to re-run alone.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec
import pydantic
from msgspec import Meta

import lmclient

__all__ = ["GROUPS", "TASKS", "Task"]


@dataclass(frozen=True)
class Task:
    """One output type: how lmclient is given it, its pydantic twin, and its prompts."""

    key: str  # what `--types` names
    label: str  # what the table shows
    lm_type: Any
    peer_type: Any
    bounded: bool
    prompts: tuple[str, ...]


# -- lmclient's side (msgspec) ---------------------------------------------------------------

Species = Literal["cat", "dog", "bird", "fish"]


class Pet(msgspec.Struct):
    name: Annotated[str, Meta(max_length=20)]
    species: Species
    age: Annotated[int, Meta(ge=0, le=30)]


class Address(msgspec.Struct):
    city: Annotated[str, Meta(max_length=24)]
    country: Annotated[str, Meta(max_length=24)]


class Person(msgspec.Struct):
    name: Annotated[str, Meta(max_length=24)]
    age: Annotated[int, Meta(ge=0, le=120)]
    address: Address


class Book(msgspec.Struct):
    title: Annotated[str, Meta(max_length=40)]
    author: Annotated[str, Meta(max_length=30)] | None = None
    year: Annotated[int, Meta(ge=1000, le=2030)] | None = None


class Rating(msgspec.Struct):
    relevance: Annotated[float, Meta(ge=0, le=1)]
    confidence: Annotated[float, Meta(ge=0, le=1)]


class Reading(msgspec.Struct):
    city: Annotated[str, Meta(max_length=24)]
    celsius: Annotated[float, Meta(gt=-60.5, lt=56.7)]


Sentiment = Literal["positive", "negative", "neutral"]
Count = Annotated[int, Meta(ge=0, le=100)]
FLIGHT = r"[A-Z]{2}[0-9]{3,4}"
Fives = Annotated[int, Meta(multiple_of=5, ge=0, le=1000)]


# -- the peers' side (pydantic, the same constraints) ----------------------------------------


class PetModel(pydantic.BaseModel):
    name: Annotated[str, pydantic.Field(max_length=20)]
    species: Species
    age: Annotated[int, pydantic.Field(ge=0, le=30)]


class AddressModel(pydantic.BaseModel):
    city: Annotated[str, pydantic.Field(max_length=24)]
    country: Annotated[str, pydantic.Field(max_length=24)]


class PersonModel(pydantic.BaseModel):
    name: Annotated[str, pydantic.Field(max_length=24)]
    age: Annotated[int, pydantic.Field(ge=0, le=120)]
    address: AddressModel


class BookModel(pydantic.BaseModel):
    title: Annotated[str, pydantic.Field(max_length=40)]
    author: Annotated[str, pydantic.Field(max_length=30)] | None = None
    year: Annotated[int, pydantic.Field(ge=1000, le=2030)] | None = None


class RatingModel(pydantic.BaseModel):
    relevance: Annotated[float, pydantic.Field(ge=0, le=1)]
    confidence: Annotated[float, pydantic.Field(ge=0, le=1)]


class ReadingModel(pydantic.BaseModel):
    city: Annotated[str, pydantic.Field(max_length=24)]
    celsius: Annotated[float, pydantic.Field(gt=-60.5, lt=56.7)]


# -- prompts -----------------------------------------------------------------------------------

_PET_PROMPTS = (
    "Invent a pet. Answer in JSON.",
    "Describe a cat that lives in a lighthouse, as JSON.",
    "My neighbour has an old dog called Rex. Give me its record as JSON.",
    "Create a pet for a child who loves the sea, as JSON.",
    "A parrot named Kiwi is 12 years old. Record it as JSON.",
    "Give me a pet record for a small goldfish, as JSON.",
    "Invent a pet for a retired sailor. Answer in JSON.",
    "Describe the pet of a wizard, as JSON.",
    "A puppy was born last year. Record it as JSON.",
    "Make up a pet that lives on a farm, as JSON.",
)

_PERSON_PROMPTS = (
    "Invent a person and where they live. Answer in JSON.",
    "Describe a baker from Lyon, as JSON.",
    "Give me a record for a 34-year-old teacher living in Osaka, as JSON.",
    "Invent a fisherman from a small town in Norway, as JSON.",
    "Describe a retired pilot and their home city, as JSON.",
    "Create a character for a novel set in Cairo, as JSON.",
    "A student moved to Berlin last year. Record them as JSON.",
    "Invent a musician from Buenos Aires, as JSON.",
    "Describe a doctor who lives in Toronto, as JSON.",
    "Make up a gardener from a village in Kent, England, as JSON.",
)

_PETS_PROMPTS = (
    "List three pets as JSON.",
    "List the pets of a family with two children, as JSON.",
    "Which pets live in a small flat in Paris? Answer with a JSON list.",
    "List a few pets a vet saw this morning, as JSON.",
    "Give me the pets of a farm, as a JSON list.",
    "List some pets for sale in a pet shop, as JSON.",
    "List the pets in a children's story, as JSON.",
    "Which pets does a lonely lighthouse keeper have? Answer with a JSON list.",
    "List two cats and a bird as JSON.",
    "List the pets of my grandmother, as JSON.",
)

_SENTIMENT_PROMPTS = (
    "Sentiment of this review: 'The food was cold and the waiter was rude.'",
    "Sentiment of this review: 'Absolutely loved it, will come back!'",
    "Sentiment of this review: 'It was a hotel room. It had a bed.'",
    "Sentiment of this tweet: 'Best concert of my life!!!'",
    "Sentiment of this sentence: 'The train arrives at 9 o'clock.'",
    "Sentiment of this review: 'Broke after two days. Waste of money.'",
    "Sentiment of this comment: 'Thanks, that fixed my problem.'",
    "Sentiment of this review: 'Average coffee, average price.'",
    "Sentiment of this message: 'I am so disappointed in you.'",
    "Sentiment of this review: 'The staff were kind and the view was stunning.'",
)

_COUNT_PROMPTS = (
    "How many legs does a spider have?",
    "How many days are there in a week?",
    "What is 7 + 5?",
    "How many continents are there?",
    "How many minutes are in an hour?",
    "What is 9 times 9?",
    "How many players are on a football team on the field?",
    "How many sides does a hexagon have?",
    "What is 100 minus 37?",
    "How many months have 31 days?",
)

_FLIGHT_PROMPTS = (
    "Give the flight number of a morning flight from London to Paris.",
    "What is a typical flight number for a Lufthansa flight?",
    "Invent a flight number for a flight from Madrid to Rome.",
    "My ticket says the flight is operated by Air France. What could the flight number be?",
    "Give me a flight number for a night flight to Tokyo.",
    "Write a flight number.",
    "Invent a flight number for an airline called Blue Sky.",
    "Which flight number could a flight from New York to Boston have?",
    "Give the flight number printed on a boarding pass.",
    "Invent the flight number of a charter flight to Crete.",
)

_BOOK_PROMPTS = (
    "Recommend a book. Answer in JSON.",
    "Give me a record for the novel Moby-Dick, as JSON.",
    "Name a book about the sea, as JSON.",
    "Recommend a children's book, as JSON.",
    "Give me a record for a cookbook whose author you do not know, as JSON.",
    "Name a famous Russian novel, as JSON.",
    "Recommend a book about space, as JSON.",
    "Give me a record for Pride and Prejudice, as JSON.",
    "Name a detective novel, as JSON.",
    "Recommend a poetry book, as JSON.",
)

_DATE_PROMPTS = (
    "On which date did the first person walk on the Moon?",
    "What is the date of Christmas Day in 2025?",
    "When did the Berlin Wall fall? Give the date.",
    "What date is New Year's Day 2030?",
    "On which date was the Eiffel Tower opened?",
    "Give the date of the first day of spring in 2026.",
    "When is Halloween in 2027? Give the date.",
    "What was the date of the first day of the year 2000?",
    "Invent a date for a wedding next summer.",
    "On which date did the Titanic sink?",
)

_RATING_PROMPTS = (
    "How relevant is the document 'Care of tomato plants' to the query 'growing tomatoes'? "
    "Give a relevance score and your confidence, both between 0 and 1, as JSON.",
    "Rate how relevant 'A history of the Roman Empire' is to the query 'pasta recipes', "
    "with your confidence, as JSON.",
    "Score the relevance of the page 'Python list comprehensions' to the question 'how do I "
    "filter a list in Python?', and how sure you are, as JSON.",
    "How well does the answer 'Paris' fit the question 'What is the capital of France?' Give "
    "relevance and confidence as JSON.",
    "Relevance of 'Train timetable, Lyon to Marseille' to 'cheap flights to Japan', with "
    "confidence, as JSON.",
    "Rate the relevance of a review of running shoes to the query 'best marathon shoes', and "
    "your confidence, as JSON.",
    "How relevant is 'Symptoms of the common cold' to 'why do I have a runny nose'? Score it, "
    "with your confidence, as JSON.",
    "Score 'The rules of chess' against the query 'how does the knight move', with confidence, "
    "as JSON.",
    "Relevance of 'Banana bread recipe' to 'how to fix a flat bicycle tyre', and your "
    "confidence, as JSON.",
    "How relevant is a weather forecast for Oslo to 'will it snow in Norway tomorrow'? Give a "
    "score and your confidence, as JSON.",
)

_READING_PROMPTS = (
    "What is a typical winter temperature in Oslo, in degrees Celsius? Answer as JSON.",
    "Give the temperature of a hot summer afternoon in Seville, as JSON.",
    "What temperature might it be in Yakutsk in January? Answer as JSON.",
    "Record a mild spring day in London, as JSON.",
    "What is the temperature on a cold night in Chicago in February? Answer as JSON.",
    "Give a typical July temperature in Dubai, as JSON.",
    "Record the temperature of a rainy autumn day in Dublin, as JSON.",
    "How cold does it get in Ulaanbaatar in winter? Answer as JSON.",
    "Give the temperature of a pleasant evening in Lisbon, as JSON.",
    "Record the temperature at the South Pole research station in winter, as JSON.",
)

_FIVES_PROMPTS = (
    "A coffee costs 3 euros and a cake 4. What do they cost together, rounded to a multiple of 5?",
    "How many minutes is a football match, rounded to a multiple of 5?",
    "Round 123 to the nearest multiple of 5.",
    "How many days are in a year, rounded to a multiple of 5?",
    "A train journey takes 2 hours and 12 minutes. How many minutes is that, to the nearest 5?",
    "How many grams of flour for a loaf of bread? Give a multiple of 5.",
    "What is 17 times 3, rounded to a multiple of 5?",
    "How many keys does a piano have, rounded to a multiple of 5?",
    "How tall is a tall person in centimetres, as a multiple of 5?",
    "How many minutes does it take to boil an egg, rounded to a multiple of 5?",
)


TASKS: tuple[Task, ...] = (
    Task("pet", "`Pet`", Pet, PetModel, True, _PET_PROMPTS),
    Task("person", "nested `Person`", Person, PersonModel, True, _PERSON_PROMPTS),
    Task(
        "pets3",
        "`list[Pet]`, ≤ 3 items",
        Annotated[list[Pet], Meta(max_length=3)],
        Annotated[list[PetModel], pydantic.Field(max_length=3)],
        True,
        _PETS_PROMPTS,
    ),
    Task("pets", "`list[Pet]`, unbounded", list[Pet], list[PetModel], False, _PETS_PROMPTS),
    Task("choice", "`Literal` of 3", Sentiment, Sentiment, True, _SENTIMENT_PROMPTS),
    Task(
        "int",
        "`int` in 0..100",
        Count,
        Annotated[int, pydantic.Field(ge=0, le=100)],
        True,
        _COUNT_PROMPTS,
    ),
    Task(
        "regex",
        "`Regex` flight number",
        lmclient.Regex(FLIGHT),
        Annotated[str, pydantic.StringConstraints(pattern=f"^{FLIGHT}$")],
        True,
        _FLIGHT_PROMPTS,
    ),
    Task("optional", "`Book`, optional fields", Book, BookModel, True, _BOOK_PROMPTS),
    Task("date", "`datetime.date`", datetime.date, datetime.date, True, _DATE_PROMPTS),
    Task(
        "scores",
        "`Rating`, 2 floats in [0, 1]",
        Rating,
        RatingModel,
        True,
        _RATING_PROMPTS,
    ),
    Task(
        "celsius",
        "`Reading`, float in (-60.5, 56.7)",
        Reading,
        ReadingModel,
        True,
        _READING_PROMPTS,
    ),
    Task(
        "fives",
        "`int`, multiple of 5 in 0..1000",
        Fives,
        Annotated[int, pydantic.Field(multiple_of=5, ge=0, le=1000)],
        True,
        _FIVES_PROMPTS,
    ),
)

GROUPS: dict[str, tuple[str, ...]] = {"numbers": ("scores", "celsius", "fives")}
