"""A batch file written by `lmclient.batch` runs through the real ``vllm run-batch``, and its
results read back into validated values, in the order of the requests."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import pytest

import lmclient
from lmclient import batch
from scripts import vllm

# run-batch loads its own engine (a minute or more on 2 cores), so one file, on chat.
pytestmark = pytest.mark.timeout(900, func_only=True)


class Person(msgspec.Struct):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=12)]
    age: Annotated[int, msgspec.Meta(ge=0, le=120)]


# One type per request, each a different one, so that a value read back in the wrong place
# fails validation instead of passing unnoticed.
ITEMS: list[tuple[str, Any]] = [
    ('A person as JSON, like {"name": "Ann", "age": 30}:', Person),
    ("Is the sky blue? yes or no:", Literal["yes", "no"]),
    ("Three digits:", lmclient.Grammar("root ::= [0-9] [0-9] [0-9]")),
    ("Is water wet? true or false:", bool),
]


def test_run_batch_round_trip(vllm_installed: vllm.Installation, tmp_path: Path) -> None:
    requests, results = tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    written = batch.write_requests(
        requests,
        ITEMS,
        model=vllm.MODEL_ALIAS,
        dialect="vllm",
        max_tokens=48,
        temperature=0.0,
        seed=1,
    )
    assert written == len(ITEMS)

    vllm.run_batch(requests, results)

    ids = [msgspec.json.decode(line)["custom_id"] for line in results.read_bytes().splitlines()]
    assert ids == [f"request-{i}" for i in range(written)]
    values = batch.read_results(results, [tp for _, tp in ITEMS], dialect="vllm", expected=written)
    person, answer, digits, wet = values
    assert isinstance(person, Person)
    assert answer in ("yes", "no")
    assert isinstance(digits, str) and len(digits) == 3 and digits.isdigit()
    assert isinstance(wet, bool)
