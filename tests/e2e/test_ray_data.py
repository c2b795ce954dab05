"""`lmclient.ray` on a real local Ray cluster (2 CPUs, no dashboard, usage stats off, on
127.0.0.1, shut down when the module ends): against `FakeLLM` over real sockets, 100,000 rows
with every value valid and none lost, failures as rows or failing the job, and against the real
llama.cpp server with a few hundred rows."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

# Read when Ray is imported: no usage report (it would reach for the network), and the node's
# address is the loopback one, not the address a UDP socket to the outside would use, so that
# every Ray server listens on 127.0.0.1 only.
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

import ray
import ray.cloudpickle
import ray.data

import lmclient.ray
from lmclient.testing import FakeLLM
from scripts import llamacpp
from tests.e2e import ray_types
from tests.e2e.fake_process import fake_process
from tests.e2e.ray_types import ByValue, Person, Review

pytestmark = pytest.mark.slow  # a Ray cluster and its actors: seconds to start each

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = ["id", "prompt", "prompt_tokens", "completion_tokens", "error_type", "error_message"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    try:  # a start that timed out (a loaded machine) leaves processes that shutdown() stops
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            object_store_memory=256 * 2**20,  # the machine's other work keeps the rest
            _node_ip_address="127.0.0.1",
            runtime_env={"env_vars": {"PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}},
            logging_level=logging.WARNING,
        )
        ray.data.DataContext.get_current().enable_progress_bars = False
        yield
    finally:
        ray.shutdown()


def prompt(i: int) -> str:
    """Row i's prompt, of a length of its own: the fake counts a row's prompt tokens from it,
    so each output row's ``prompt_tokens`` shows it is the answer to that row's prompt."""
    return f"row {i}." + "x" * (4 * (i % 37))


def tokens(i: int) -> int:
    return (len(prompt(i)) + 3) // 4  # the fake's count: one token per four characters


def dataset(count: int) -> ray.data.Dataset:
    return ray.data.range(count, override_num_blocks=8).map_batches(
        lambda batch: {"id": batch["id"], "prompt": [prompt(int(i)) for i in batch["id"]]}
    )


def check_rows(rows: list[dict[str, Any]], count: int, fields: tuple[str, ...]) -> None:
    """Every input row once, each with its own prompt's answer."""
    assert len(rows) == count
    assert sorted(row["id"] for row in rows) == list(range(count))
    for row in rows:
        assert list(row) == [*COLUMNS[:2], *fields, *COLUMNS[2:]]
        assert row["prompt"] == prompt(row["id"])
        answered = row["error_type"] != "ServerError"  # an error status reports no usage
        assert row["prompt_tokens"] == (tokens(row["id"]) if answered else None)


@pytest.mark.timeout(1800)  # a few minutes on a quiet 2-core machine; the bound catches a hang
def test_100000_rows_through_two_actors_every_value_valid_none_lost(cluster: None) -> None:
    with fake_process() as fake:
        out = lmclient.ray.generate(
            dataset(100_000), fake.base_url, Person, actors=2, concurrency=32, num_cpus=0.5
        )
        rows = out.take_all()
    check_rows(rows, 100_000, ("name", "age"))
    for row in rows:
        assert row["error_type"] is None, row
        msgspec.convert({"name": row["name"], "age": row["age"]}, Person)  # valid, or raises
    assert fake.calls == 100_000  # one request a row: no retries were needed


def test_failed_rows_are_rows_carrying_their_error(cluster: None) -> None:
    fake = FakeLLM()
    fake.fail(503, times=5, retry_after=0)  # the first five requests, wherever they land
    fake.reply("{not json", when="row 7.")  # invalid: a ValidationError, with its usage
    with fake.serve() as url:
        out = lmclient.ray.generate(
            dataset(300), url, Review, concurrency=8, num_cpus=0.5, client={"max_retries": 0}
        )
        rows = out.take_all()
    check_rows(rows, 300, ("sentiment", "stars"))
    failed = [row for row in rows if row["error_type"] is not None]
    assert sorted(row["error_type"] for row in failed) == ["ServerError"] * 5 + ["ValidationError"]
    for row in failed:
        assert row["sentiment"] is None and row["stars"] is None and row["error_message"]
    invalid = next(row for row in rows if row["id"] == 7)
    assert invalid["error_type"] == "ValidationError" and invalid["completion_tokens"] == 3
    assert all(row["stars"] in range(1, 6) for row in rows if row["error_type"] is None)


def test_retries_and_scalar_outputs_as_generate_many(cluster: None) -> None:
    fake = FakeLLM()
    # Retried (max_retries=2 by default): no error row. Each failure names its row: "the first
    # three requests" could be one call's three attempts, when its retries (Retry-After: 0)
    # come before the other calls' first requests, as on a loaded machine.
    fake.fail(503, times=2, retry_after=0, when="row 7.")  # twice: its last retry answers
    fake.fail(503, times=1, retry_after=0, when="row 8.")
    with fake.serve() as url:
        out = lmclient.ray.generate(dataset(200), url, int, concurrency=4, num_cpus=0.5)
        rows = out.take_all()
    check_rows(rows, 200, ("value",))
    assert all(isinstance(row["value"], int) and row["error_type"] is None for row in rows)
    assert len(fake.calls) == 203


def test_on_error_raise_fails_the_job(cluster: None) -> None:
    fake = FakeLLM()
    fake.fail(400, times=None, when="row 3.", body="bad prompt")
    with fake.serve() as url:
        out = lmclient.ray.generate(dataset(50), url, int, on_error="raise", num_cpus=0.5)
        with pytest.raises(Exception, match="bad prompt"):
            out.take_all()


def test_bad_arguments_fail_before_any_actor_starts(cluster: None) -> None:
    """The checks run in the driver, in `generate`, before the dataset runs."""
    ds = ray.data.from_items([{"prompt": "a"}])
    with pytest.raises(TypeError, match="temprature"):
        lmclient.ray.generate(ds, "http://127.0.0.1:9/v1", int, temprature=0.5)
    with pytest.raises(ValueError, match="on_error"):
        lmclient.ray.generate(ds, "http://127.0.0.1:9/v1", int, on_error="skip")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prompt_column"):
        lmclient.ray.generate(ds, "http://127.0.0.1:9/v1", int, prompt_column="value")


def test_a_token_budget_of_the_stage_is_refused(cluster: None) -> None:
    """It would be each batch's budget (docs/scaling.md); each call's, in ``defaults``, is not."""
    ds = ray.data.from_items([{"prompt": "a"}])
    with pytest.raises(ValueError, match="no token_budget: it would be each batch's"):
        lmclient.ray.generate(ds, "http://127.0.0.1:9/v1", int, token_budget=1000)
    with pytest.raises(ValueError, match="no token_budget"):
        lmclient.ray.Generate("http://127.0.0.1:9/v1", int, token_budget=1000)
    fake = FakeLLM()
    fake.reply("{not json")  # invalid: the row's call would ask again
    client = {"max_reasks": 2, "defaults": {"token_budget": 1}}
    with fake.serve() as url:
        out = lmclient.ray.generate(ds, url, Review, num_cpus=0.5, client=client).take_all()
    assert [row["error_type"] for row in out] == ["TokenBudgetExceeded"]
    assert len(fake.calls) == 1  # the budget, spent by the first answer, stopped its re-asks


def test_an_input_column_the_stage_would_overwrite_fails_the_job(cluster: None) -> None:
    ds = ray.data.from_items([{"prompt": "a", "error_type": "mine"}])
    with FakeLLM().serve() as url:
        out = lmclient.ray.generate(ds, url, int, num_cpus=0.5)
        with pytest.raises(Exception, match="already has column"):
            out.take_all()


def test_a_struct_that_loses_its_fields_in_transit_fails_the_job(cluster: None) -> None:
    """A regression test: a Struct pickled by value (a script's ``__main__`` class) reached the
    actors as a struct of no fields, and every row "validated" into ``ByValue()``."""
    ray.cloudpickle.register_pickle_by_value(ray_types)  # type: ignore[no-untyped-call]
    try:
        with FakeLLM().serve() as url:
            out = lmclient.ray.generate(dataset(20), url, ByValue, num_cpus=0.5)
            with pytest.raises(Exception, match="did not survive the trip"):
                out.take_all()
    finally:
        ray.cloudpickle.unregister_pickle_by_value(ray_types)  # type: ignore[no-untyped-call]


@pytest.mark.slow
@pytest.mark.timeout(900, func_only=True)
def test_300_rows_on_llama_cpp(cluster: None, llama: llamacpp.LlamaServer) -> None:
    texts = ["I loved it.", "Terrible service.", "It was fine, I guess."]
    ds = ray.data.from_items(
        [{"id": i, "prompt": f"Review: {texts[i % 3]} Rate it."} for i in range(300)]
    )
    out = lmclient.ray.generate(ds, llama.base_url, Review, concurrency=4, num_cpus=0.5)
    rows = out.take_all()
    assert sorted(row["id"] for row in rows) == list(range(300))
    failed = [row for row in rows if row["error_type"] is not None]
    assert failed == []
    for row in rows:
        msgspec.convert({"sentiment": row["sentiment"], "stars": row["stars"]}, Review)
        assert row["prompt_tokens"] > 0 and row["completion_tokens"] > 0


def test_the_example_of_the_scaling_guide_runs(cluster: None, tmp_path: Path) -> None:
    """docs/scaling.md's Ray Data block (tests/test_docs_blocks.py sends it here), with what
    this cluster has in place of what it names: the fake for the router, the tests' types for
    ``myapp.types``, a temporary directory for ``/data``, and 2 actors of half a CPU for 8 of
    one (the cluster has 2 CPUs)."""
    import pyarrow
    import pyarrow.parquet

    text = (ROOT / "docs" / "scaling.md").read_text().split("\n## Ray Data\n", 1)[1]
    found = re.search(r"```python\n(.*?)```", text, re.DOTALL)
    assert found is not None, "no python block under 'Ray Data' in docs/scaling.md"
    prompts = [f"Invent person {i}." for i in range(40)]
    pyarrow.parquet.write_table(pyarrow.table({"prompt": prompts}), tmp_path / "prompts.parquet")
    with FakeLLM().serve() as url:
        stand_ins = {
            '"http://router:8000/v1"': f'"{url}"',
            "from myapp.types import": "from tests.e2e.ray_types import",
            "actors=8,": "actors=2, num_cpus=0.5,",
            '"/data/': f'"{tmp_path}/',
        }
        code = found.group(1)
        for written, used in stand_ins.items():
            assert written in code, f"docs/scaling.md's Ray block no longer has {written}"
            code = code.replace(written, used)
        exec(code, {"__name__": "__docs__"})  # our own docs
    rows = pyarrow.parquet.read_table(tmp_path / "people").to_pylist()
    assert sorted(row["prompt"] for row in rows) == sorted(prompts)
    for row in rows:
        assert row["error_type"] is None, row
        msgspec.convert({"name": row["name"], "age": row["age"]}, Person)  # valid, or raises
