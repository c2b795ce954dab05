"""The agent benchmark (`benchmarks/agent.py`, `make bench-agent`): its three clients' loops run
against lmclient's FakeLLM (what each counts: requests, tokens, calls, how a task ended), its
record and replay, its tables and where it writes the docs. The real server is not run here."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec
import pytest

from lmclient.testing import FakeLLM

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    path = ROOT / "benchmarks" / "agent.py"
    spec = importlib.util.spec_from_file_location("bench_agent", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def fake() -> Iterator[tuple[FakeLLM, str]]:
    llm = FakeLLM()
    with llm.serve() as url:
        yield llm, url


def task(bench: ModuleType, key: str) -> Any:
    return next(t for t in bench.TASKS if t.key == key)


def test_every_client_finishes_the_tasks_and_the_record_replays(
    bench: ModuleType, fake: tuple[FakeLLM, str], tmp_path: Path
) -> None:
    """Unscripted, the fake calls the tool under `"auto"` until a result comes back, then
    answers; a typed turn it answers from the turn's grammar, either way."""
    llm, url = fake
    tasks = [task(bench, "weather"), task(bench, "distance")]
    runners = bench.make_runners(bench.CLIENTS, url, "fake-model", tasks)
    record = tmp_path / "agent.jsonl"
    runs, cut = bench.run_all(runners, tasks, 1, 64, record)
    assert not cut and len(runs) == len(tasks) * len(bench.TEMPERATURES) * len(bench.CLIENTS)
    for run in runs:
        o = run.outcome
        assert o.valid, run
        assert o.prompt_tokens > 0 and o.completion_tokens > 0 and o.seconds >= 0
        if run.client == "lmclient-turn":
            assert 1 <= o.requests <= bench.MAX_TURNS
        else:  # one call, the text after its result, then the typed answer
            assert o.requests == 3 and len(o.calls) == 1, run
            assert o.calls[0].startswith(f"{run.task}({{")
    # the rotation: each client goes first once per three task runs
    firsts = [runs[i].client for i in range(0, len(runs), len(bench.CLIENTS))]
    assert firsts[:3] == ["lmclient-turn", "lmclient-two", "openai"]
    replayed = bench.replay(record, tasks, bench.CLIENTS)
    assert replayed == runs
    generations = len(llm.calls)  # the warm-up's and the tasks' requests, nothing else
    assert generations >= sum(run.outcome.requests for run in runs)


def test_the_turn_counts_a_request_per_turn(bench: ModuleType, fake: tuple[FakeLLM, str]) -> None:
    llm, url = fake
    weather = task(bench, "weather")
    llm.reply(None, times=1, tool_calls=[("weather", {"city": "Oslo"})])
    llm.reply(weather.answer("Oslo", 4), times=1)
    run = bench.make_runners(["lmclient-turn"], url, "fake-model", [weather])["lmclient-turn"]
    outcome = run(weather, weather.prompts[0], bench.Sampling(0.0, 1, 64))
    assert outcome.ended == "valid" and outcome.requests == 2
    assert outcome.calls == ['weather({"city": "Oslo"})']
    assert outcome.answer == '{"city":"Oslo","celsius":4}'
    assert llm.calls[1].texts("tool") == ["Oslo: cloudy, 4 degrees Celsius."]


@pytest.mark.parametrize("client", ["lmclient-turn", "lmclient-two", "openai"])
def test_a_model_that_keeps_calling_ends_at_max_turns(
    bench: ModuleType, fake: tuple[FakeLLM, str], client: str
) -> None:
    llm, url = fake
    clock = task(bench, "clock")
    zones = ["Tokyo", "Oslo", "Lima", "Cairo"]  # a new call each turn (`run` asks for the
    for zone in zones:  # answer alone after a turn that only repeats calls)
        llm.reply(None, times=1, tool_calls=[("clock", {"zone": zone})])
    run = bench.make_runners([client], url, "fake-model", [clock])[client]
    outcome = run(clock, clock.prompts[0], bench.Sampling(0.7, 2, 64))
    assert outcome.ended == "max_turns"
    assert outcome.requests == bench.MAX_TURNS == len(zones)
    assert outcome.calls == [f'clock({{"zone": "{zone}"}})' for zone in zones]
    assert outcome.tokens > 0


def test_an_invalid_answer_is_counted_with_its_tokens(
    bench: ModuleType, fake: tuple[FakeLLM, str]
) -> None:
    llm, url = fake
    money = task(bench, "convert")
    llm.reply('{"amount": -1, "currency": "EUR"}')  # below the bound: valid for no client
    runners = bench.make_runners(["lmclient-turn", "openai"], url, "fake-model", [money])
    for name, run in runners.items():
        outcome = run(money, money.prompts[0], bench.Sampling(0.0, 1, 64))
        assert outcome.ended == "ValidationError", (name, outcome)
        assert outcome.tokens > 0 and outcome.requests >= 1


def strings(schema: Any) -> Iterator[dict[str, Any]]:
    if isinstance(schema, dict):
        if schema.get("type") == "string":
            yield schema
        for value in schema.values():
            yield from strings(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from strings(value)


def test_every_string_is_bounded(bench: ModuleType) -> None:
    """In the tools' arguments (as every client sends them) and in both answer types: no call
    and no answer can run long under its constraint."""
    tools = bench.Tools(bench.TASKS)
    for t in bench.TASKS:
        tool = tools.lm[t.key]
        assert tool.function is not None and tool.name == t.function.__name__
        schemas = [tool.param()["function"]["parameters"], t.model.model_json_schema()]
        schemas.append(msgspec.json.schema(t.answer))
        found = [s for schema in schemas for s in strings(schema)]
        assert found and all(0 < s.get("minLength", 1) <= s["maxLength"] <= 80 for s in found)


def outcome(bench: ModuleType, ended: str, requests: int, tokens: int, calls: int) -> Any:
    return bench.Outcome(ended, requests, tokens, 0, seconds=float(requests), calls=["f()"] * calls)


def test_the_tables(bench: ModuleType) -> None:
    runs = [
        bench.Run("lmclient-turn", "weather", 0, 0.0, outcome(bench, "valid", 2, 300, 1)),
        bench.Run("lmclient-turn", "weather", 0, 0.7, outcome(bench, "valid", 1, 100, 0)),
        bench.Run("lmclient-turn", "weather", 1, 0.0, outcome(bench, "max_turns", 4, 800, 4)),
        bench.Run("openai", "weather", 0, 0.0, outcome(bench, "valid", 3, 600, 1)),
    ]
    table = bench.summary_table(runs, ["lmclient-turn", "openai"])
    rows = table.splitlines()
    assert (
        rows[2] == "| lmclient-turn | 2/3 | 1 | 1.7 | 1.50 | 200 | 600 | 2.0 / 4.0 | 1 max_turns |"
    )
    assert rows[3] == "| openai | 1/1 | 1 | 1.0 | 3.00 | 600 | 600 | 3.0 / 3.0 | — |"
    per_task = bench.task_table(runs, [task(bench, "weather")], ["lmclient-turn", "openai"])
    assert "| weather → `Forecast` | lmclient-turn | 2/3 |" in per_task


def test_the_section_goes_after_the_runaways(bench: ModuleType, tmp_path: Path) -> None:
    page = tmp_path / "performance.md"
    page.write_text("# Performance\n\n## Runaways\n\nloops\n\n## Embeddings\n\nvectors\n")
    bench.write_docs(page, "first")
    text = page.read_text()
    assert text.index("## Runaways") < text.index("## Agent turns") < text.index("## Embeddings")
    assert f"{bench.START_MARK}\nfirst\n{bench.END_MARK}\n\n## Embeddings" in text
    bench.write_docs(page, "second")
    again = page.read_text()
    assert again == text.replace("\nfirst\n", "\nsecond\n") and again.count("## Agent turns") == 1
