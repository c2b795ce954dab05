"""The task set of `runaway.py`: realistic output types with unbounded parts, each as lmclient
takes it and as its pydantic twin for the openai SDK, with fixed prompts.

These are the types a new user writes first: a plain `str` field, an `int`, a `list[str]`, a
nested list of structs, the README's `Person`, plain text. None has a bound, so none has a token
budget of its own: what ends such an answer is the model closing it, or `max_tokens`, or (with
lmclient's runaway watch) the watch. The prompts include the ones that made Gemma 3 270M on the
llama.cpp server of `make demo` run away (issue 39; `/work/notes/runaways-measured.md` has what
each did without a guard): a ticket whose tags repeat, a number that never ends, "Say hi".

`schema` is False for the text task: the openai SDK has no `response_format` for plain text, so
its side of that task is a plain chat completion, and any text is valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import pydantic

__all__ = ["QUICK_TYPES", "TASKS", "Task"]


@dataclass(frozen=True)
class Task:
    """One output type: how lmclient is given it, its pydantic twin, and its prompts."""

    key: str  # what `--types` names
    label: str  # what the table shows
    lm_type: Any
    peer_type: Any
    prompts: tuple[str, ...]
    schema: bool = True  # False: plain text, no `response_format` on the SDK's side


# -- lmclient's side (msgspec): no field has a bound ---------------------------------------------


class Summary(msgspec.Struct):
    summary: str


class Person(msgspec.Struct):  # the README's
    name: str
    age: int


class Ticket(msgspec.Struct):
    title: str
    description: str
    priority: str
    tags: list[str]


class Review(msgspec.Struct):
    product: str
    rating: int
    pros: list[str]
    cons: list[str]
    verdict: str


class Step(msgspec.Struct):
    text: str
    minutes: int


class Recipe(msgspec.Struct):
    name: str
    ingredients: list[str]
    steps: list[Step]


# -- the SDK's side (pydantic, the same fields) ------------------------------------------------


class SummaryModel(pydantic.BaseModel):
    summary: str


class PersonModel(pydantic.BaseModel):
    name: str
    age: int


class TicketModel(pydantic.BaseModel):
    title: str
    description: str
    priority: str
    tags: list[str]


class ReviewModel(pydantic.BaseModel):
    product: str
    rating: int
    pros: list[str]
    cons: list[str]
    verdict: str


class StepModel(pydantic.BaseModel):
    text: str
    minutes: int


class RecipeModel(pydantic.BaseModel):
    name: str
    ingredients: list[str]
    steps: list[StepModel]


# -- prompts -------------------------------------------------------------------------------------

_TEXT_PROMPTS = (
    "Say hi",
    "Say hi.",
    "Write a haiku about the sea.",
    "What is the capital of France?",
)

_SUMMARY_PROMPTS = (
    "Summarise the plot of Hamlet. Answer in JSON.",
    "Summarise this: 'The printer on floor 3 jams every morning since the update.' As JSON.",
    "Give a one-line summary of what a compiler does, as JSON.",
    "Summarise the history of Rome, as JSON.",
)

_INT_PROMPTS = (
    "How many stars are in the Milky Way?",
    "How many grains of sand are on Earth?",
    "How old is the universe in years?",
    "How many people live in Tokyo?",
)

_LIST_PROMPTS = (
    "List the planets of the solar system.",
    "List some tags for a blog post about printers.",
    "List every prime number.",
    "List the colours of the rainbow.",
)

_PERSON_PROMPTS = (
    "Invent a person.",
    "Invent a person. Answer in JSON.",
    "Describe an old sailor, as JSON.",
    "Invent a very old person.",
)

_TICKET_PROMPTS = (
    "The printer on floor 3 is broken. File a support ticket.",
    "File a ticket: the VPN disconnects every ten minutes.",
    "Create a ticket for this: 'Printer on Floor 3 jams again, third time this week.'",
    "Open a bug ticket: the login page shows a blank screen on Safari.",
)

_REVIEW_PROMPTS = (
    "Review the Kindle Paperwhite.",
    "Write a review of a cheap pair of headphones, as JSON.",
    "Review a coffee machine that broke after a week.",
    "Review the film Titanic.",
)

_RECIPE_PROMPTS = (
    "Give me a recipe for pancakes.",
    "A recipe for tomato soup, as JSON.",
    "How do I bake bread? Answer as a recipe.",
    "Give me a recipe for a cake with many steps.",
)

TASKS: tuple[Task, ...] = (
    Task("text", '`str` text, `generate("Say hi")`', str, str, _TEXT_PROMPTS, schema=False),
    Task("summary", "struct with a `str` field", Summary, SummaryModel, _SUMMARY_PROMPTS),
    Task("int", "`int`", int, int, _INT_PROMPTS),
    Task("tags", "`list[str]`", list[str], list[str], _LIST_PROMPTS),
    Task("person", "README's `Person` (`str`, `int`)", Person, PersonModel, _PERSON_PROMPTS),
    Task("ticket", "`Ticket`: strs and `tags: list[str]`", Ticket, TicketModel, _TICKET_PROMPTS),
    Task("review", "`Review`: int, 2 lists, strs", Review, ReviewModel, _REVIEW_PROMPTS),
    Task("recipe", "`Recipe`: nested `list[Step]`", Recipe, RecipeModel, _RECIPE_PROMPTS),
)

QUICK_TYPES = ("text", "ticket")
