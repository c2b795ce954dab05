"""Many calls at once: `generate_many` with a progress bar, failures kept in place.

    python examples/many.py --fake           # 2,000 prompts against lmclient.testing.FakeLLM
    python examples/many.py --url URL -n 50  # against a server you run (e.g. `make demo`'s)

The bar is drawn on stderr only when stderr is a terminal, so piping the output stays clean.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Iterator
from typing import Annotated, Literal

import msgspec

import lmclient


class Review(msgspec.Struct):
    sentiment: Literal["positive", "negative", "mixed"]
    stars: Annotated[int, msgspec.Meta(ge=1, le=5)]


@contextlib.contextmanager
def fake_server() -> Iterator[str]:
    from lmclient.testing import FakeLLM

    fake = FakeLLM()
    fake.fail(400, body="the fake refuses every 50th prompt", times=None, when="#49")
    with fake.serve() as url:
        yield url


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="an OpenAI-compatible base URL (…/v1)")
    where.add_argument("--fake", action="store_true", help="run against lmclient.testing.FakeLLM")
    parser.add_argument("-n", type=int, default=2000, help="how many prompts (default 2000)")
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    prompts = [f"Review #{i % 50}: rate this product in JSON." for i in range(args.n)]
    server = fake_server() if args.fake else contextlib.nullcontext(args.url)
    with server as url, lmclient.Client(url) as client:
        started = time.perf_counter()
        with lmclient.Progress(len(prompts), label="reviews") as progress:
            results = client.generate_many(
                prompts,
                Review,
                concurrency=args.concurrency,
                return_exceptions=True,
                on_result=progress,
                max_tokens=128,
                temperature=0,
            )
        elapsed = time.perf_counter() - started
    reviews = [r for r in results if isinstance(r, Review)]
    failures = [r for r in results if isinstance(r, lmclient.LMClientError)]
    print(f"{len(reviews)} reviews, {len(failures)} failed, in {elapsed:.1f} s")
    if reviews:
        print("first:", reviews[0])
    if failures:
        print("a failure:", failures[0])


if __name__ == "__main__":
    main()
