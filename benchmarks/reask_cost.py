"""What re-asks cost on a real server: the tokens of ``reask_history="full"`` (every invalid
answer sent back) next to ``"last"`` (only the last one), and where a ``token_budget`` stops a
call (issue 30, item 2).

    .venv/bin/python benchmarks/reask_cost.py                    # starts the llama.cpp server
    .venv/bin/python benchmarks/reask_cost.py --url http://127.0.0.1:8080/v1  # a running one

Each call asks the model to extract an order from a short text into `Order`, whose check
(`Order.__post_init__`) no answer passes: every call makes all its ``--reasks`` re-asks, so
both histories send the same number of requests and only what each request carries differs.
The tokens are the server's ``usage`` (prompt and completion, what a budget counts), summed
over each call's answers (`ValidationError.total_usage`); greedy decoding, a fixed seed.
Prints a markdown table on stdout.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import msgspec

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import lmclient  # noqa: E402
from scripts import llamacpp  # noqa: E402

TEXTS = [
    "Hi, this is Dana from the Harbour Street bakery. Could you send us 12 bags of rye flour "
    "before Friday? Same invoice address as last month, and please ring the back door bell.",
    "Order for the school canteen: 40 litres of oat milk, delivered to the kitchen entrance. "
    "The head cook, Mr Osei, will sign for it; payment by bank transfer as usual.",
    "We need 3 replacement filters for the coffee machine on the second floor. Our office "
    "manager says the model number is on the side panel: KF-220. Thanks, Priya.",
    "Please add 25 boxes of A4 paper to our standing order for the library, the recycled "
    "kind, and cancel the toner we asked for on Monday. Regards, the front desk.",
]


Text = Annotated[str, msgspec.Meta(max_length=32)]


class Order(msgspec.Struct):
    """Bounded, so that lmclient gives it the ``max_tokens`` of its longest answer: no answer
    is cut (a cut one is never re-asked)."""

    item: Text
    quantity: Annotated[int, msgspec.Meta(ge=0, le=1000)]
    customer: Text

    def __post_init__(self) -> None:
        # A check no answer passes: every call makes all its re-asks, whatever the model says.
        raise ValueError("the order must be confirmed by a reference from the order book")


@contextmanager
def server(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    with llamacpp.LlamaServer(parallel=1) as started:
        print(f"llama-server pid {started.pid} on {started.base_url}", file=sys.stderr)
        yield started.base_url


def spend(
    client: lmclient.Client, reasks: int, params: lmclient.CallParams
) -> tuple[int, int, int, int]:
    """Requests, prompt and completion tokens of every text's call, and the calls a budget
    stopped."""
    requests = prompt = completion = stopped = 0
    for seed, text in enumerate(TEXTS, 1):
        try:
            mine: lmclient.CallParams = {
                "max_reasks": reasks,
                "temperature": 0.0,
                "seed": seed,
                **params,
            }
            client.generate(f"Extract the order from this message.\n\n{text}", Order, **mine)
        except lmclient.TokenBudgetExceeded as exc:
            stopped += 1
            assert isinstance(exc.__cause__, lmclient.ValidationError)
            requests += len(exc.__cause__.attempts)
            usage = exc.total_usage
        except lmclient.ValidationError as exc:
            requests += len(exc.attempts)
            usage = exc.total_usage
        else:
            raise AssertionError("Order never validates")
        assert usage is not None and usage.prompt_tokens and usage.completion_tokens
        prompt += usage.prompt_tokens
        completion += usage.completion_tokens
    return requests, prompt, completion, stopped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a running OpenAI-compatible server (default: start one)")
    parser.add_argument("--reasks", type=int, default=4, help="max_reasks of each call")
    parser.add_argument("--budget", type=int, default=600, help="token_budget of each call")
    args = parser.parse_args()
    rows = []
    with server(args.url) as url, lmclient.Client(url, dialect="llamacpp") as client:
        model = client.models()[0]
        runs: list[tuple[str, lmclient.CallParams]] = [
            ('`reask_history="full"`', {"reask_history": "full"}),
            ('`reask_history="last"`', {"reask_history": "last"}),
            (f'`"full"`, `token_budget={args.budget}`', {"token_budget": args.budget}),
            (
                f'`"last"`, `token_budget={args.budget}`',
                {"reask_history": "last", "token_budget": args.budget},
            ),
        ]
        for label, params in runs:
            print(f"running {label}", file=sys.stderr)
            rows.append((label, *spend(client, args.reasks, params)))
    calls = len(TEXTS)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"{when}, {model} on llama.cpp, {calls} calls of `max_reasks={args.reasks}`")
    print()
    print(
        "| re-asks | requests | prompt tokens | completion tokens | total | per call "
        "| calls stopped |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, requests, prompt, completion, stopped in rows:
        total = prompt + completion
        print(
            f"| {label} | {requests} | {prompt} | {completion} | {total} | {total // calls} "
            f"| {stopped} |"
        )


if __name__ == "__main__":
    main()
