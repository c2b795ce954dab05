"""lmclient's main job, end to end: typed, validated values from a real local model.

    make demo                          # builds llama.cpp + Gemma 3 270M on first run, then runs
    python examples/demo.py --url URL  # against a server you already run (dialect detected)
    python examples/demo.py --fake     # against lmclient.testing.FakeLLM (no model, instant)

One call per output kind, each printed with its value and the time it took. The model is tiny
(270M parameters, a base model): the *content* is often silly, but constrained decoding plus
client-side validation guarantee the *type*.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Literal

import msgspec

import lmclient

ROOT = Path(__file__).resolve().parents[1]


# Bounds (lengths, ranges, item counts) make a type bounded: its longest answer is known.
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=24)]


class Person(msgspec.Struct):
    name: Name
    age: Annotated[int, msgspec.Meta(ge=0, le=120)]


class Pet(msgspec.Struct):
    name: Name
    species: Literal["cat", "dog", "bird", "fish"]


Pets = Annotated[list[Pet], msgspec.Meta(min_length=1, max_length=3)]


YES_NO_MAYBE = lmclient.Grammar('root ::= ("yes" | "no" | "maybe") "!"')


def show(label: str, started: float, value: object, tokens: int | None = None) -> None:
    spent = "" if tokens is None else f"{tokens:3d} tokens"
    print(
        f"  {label:<34} {time.perf_counter() - started:6.2f} s {spent:>10}   {value!r}", flush=True
    )


def run(client: lmclient.Client) -> None:
    # No max_tokens on bounded types: lmclient sends their longest compact encoding as the
    # budget, and holds the JSON to its own grammar, without whitespace to pad it with.
    t = time.perf_counter()
    person = client.create("Invent a person. Answer in JSON.", Person, temperature=0)
    show("msgspec.Struct -> Person", t, person.value, _tokens(person))

    t = time.perf_counter()
    mood = client.create("Is the sky blue? Answer yes or no.", Literal["yes", "no"], temperature=0)
    show('Literal["yes", "no"]', t, mood.value, _tokens(mood))

    t = time.perf_counter()
    n = client.create(
        "2 + 2 =", Annotated[int, msgspec.Meta(ge=0, le=99)], endpoint="completions", temperature=0
    )
    show("int in 0..99 (completions)", t, n.value, _tokens(n))

    t = time.perf_counter()
    print(f"  {'list[Pet], streamed with items()':<34}", flush=True)
    with client.stream("List three pets as JSON.", Pets, temperature=0) as s:
        for pet in s.items():
            show("    item", t, pet)
    show("    whole list", t, s.value, s.usage.completion_tokens if s.usage else None)

    t = time.perf_counter()
    answer = client.generate("Will it rain tomorrow?", YES_NO_MAYBE, max_tokens=8, temperature=0)
    show("GBNF Grammar", t, answer)

    # A base model continues text: give it the start of the sentence, some variety, a penalty
    # on repeated tokens, and the end of the line as the end of the answer.
    t = time.perf_counter()
    start = "A sentence about the sea: The sea"
    print(f"  {'free text, streamed':<34} {start[-7:]}", end="", flush=True)
    with client.stream(
        start,
        endpoint="completions",
        max_tokens=48,
        temperature=0.7,
        top_p=0.9,
        frequency_penalty=0.8,
        stop=["\n"],
        seed=0,
    ) as s:
        for delta in s:
            print(delta, end="", flush=True)
    print()
    show("    finish / usage", t, (s.finish_reason, s.usage))


def _tokens(response: lmclient.Response[object]) -> int | None:
    return response.usage.completion_tokens if response.usage else None


@contextlib.contextmanager
def llamacpp_server() -> Iterator[str]:
    sys.path.insert(0, str(ROOT / "scripts"))
    import llamacpp  # the project's installer/launcher: stdlib only

    started = time.perf_counter()
    llamacpp.ensure_installed()  # first run: builds llama-server (~15 min on 2 cores), cached
    with llamacpp.LlamaServer() as server:
        print(f"llama-server ready on {server.base_url} in {time.perf_counter() - started:.1f} s\n")
        yield server.base_url


@contextlib.contextmanager
def fake_server() -> Iterator[str]:
    from lmclient.testing import FakeLLM

    fake = FakeLLM(models=["fake-model"])
    fake.reply("maybe!", when=lambda request: "rain" in request.prompt)
    with fake.serve() as url:
        yield url


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--url", help="an OpenAI-compatible base URL (…/v1) to run against")
    where.add_argument("--fake", action="store_true", help="run against lmclient.testing.FakeLLM")
    args = parser.parse_args()
    if args.url:
        server: contextlib.AbstractContextManager[str] = contextlib.nullcontext(args.url)
    elif args.fake:
        server = fake_server()
    else:
        server = llamacpp_server()
    with server as url, lmclient.Client(url) as client:
        started = time.perf_counter()
        run(client)
        elapsed = time.perf_counter() - started
        print(f"\n{client.server_info!r}\nall values validated in {elapsed:.1f} s")


if __name__ == "__main__":
    main()
