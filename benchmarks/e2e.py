"""End-to-end: completion tokens and seconds per *valid* value, lmclient next to its peers, on the
real llama.cpp server of `make demo` (issue 16).

    make bench-e2e                                   # installs the peers, runs, writes the docs
    .venv-bench/bin/python benchmarks/e2e.py          # the table on stdout, progress on stderr
    .venv-bench/bin/python benchmarks/e2e.py --quick  # a smoke run: 2 types x 2 prompts
    .venv-bench/bin/python benchmarks/e2e.py --types pet,pets --clients lmclient-compact,openai
    .venv-bench/bin/python benchmarks/e2e.py --types numbers --docs docs/performance.md
    .venv-bench/bin/python benchmarks/e2e.py --url http://127.0.0.1:8080/v1  # a running server

What a constrained answer costs is the server's decode steps, not the client's CPU: every token
is a decode step, and an answer that never closes costs `max_tokens` and then fails. So this
runs the same task set (`e2e_tasks.py`: output types x fixed prompts x temperatures 0 and 0.7,
a fixed seed per prompt, `max_tokens=300` for everyone) through each client, one call at a time,
and counts valid values, completion tokens (the server's `usage`), wall seconds and truncations.

The peers live in their own venv (`.venv-bench`, `pip install -e '.[bench]'`): instructor caps
`jiter` below what the newest openai SDK needs, so beside the `dev` extras it would downgrade the
SDK that the tests and `make bench` use. They are imported only when their client is asked for.

`--types` takes task keys or a group of them (`e2e_tasks.GROUPS`: `numbers`, the bounded
numeric types). A run of some types with `--docs` writes a block of its own, below the full
run's table, which it leaves as measured; a run of every type replaces that table. Ctrl-C (or
`kill -INT`) ends a run with the prompts every client has completed, and reports those.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import importlib
import importlib.metadata
import json
import os
import platform
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
import openai
import pydantic

import lmclient
from lmclient import errors
from lmclient._dialects import Whitespace

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))  # benchmarks/ is a directory of scripts, not a package
sys.path.insert(0, str(ROOT))

from e2e_tasks import GROUPS, TASKS, Task  # noqa: E402

from scripts import llamacpp  # noqa: E402  (the llama.cpp installer/launcher `make demo` uses)

START_MARK, END_MARK = "<!-- bench-e2e:start -->", "<!-- bench-e2e:end -->"
SECTION_TITLE = "## End to end: tokens and time per valid value on a real server"
MAX_TOKENS = 300
TEMPERATURES = (0.0, 0.7)
SEED = 1  # prompt i of every type is sent with seed=SEED + i, by every client
#: A run of this much whitespace inside a JSON answer is padding, not layout.
RUNAWAY = re.compile(r"\s{16}")
CLIENTS = ("lmclient-compact", "lmclient-server", "openai", "instructor", "outlines")
PEERS = ("openai", "instructor", "outlines")
QUICK_TYPES = ("pet", "pets")

Messages = list[dict[str, str]]


@dataclass
class Outcome:
    """One call: did it give a valid value, what did it cost, how did it end."""

    valid: bool
    tokens: int
    finish: str | None
    text: str
    error: str = ""


Runner = Callable[[Task, Messages, float, int], Outcome]


# -- lmclient ----------------------------------------------------------------------------------


def lmclient_runner(url: str, whitespace: Whitespace, tokenize: Callable[[str], int]) -> Runner:
    """`client.create(messages, T)`: the `Response` has the usage and the finish reason; a
    `TruncatedError` has the usage too. A `ValidationError` of another kind carries only the
    text, so its tokens are counted by the server's /tokenize (rare: the server constrained it)."""
    client = lmclient.Client(url, whitespace=whitespace)

    def run(task: Task, messages: Messages, temperature: float, seed: int) -> Outcome:
        try:
            response = client.create(
                messages, task.lm_type, max_tokens=MAX_TOKENS, temperature=temperature, seed=seed
            )
        except errors.TruncatedError as exc:
            tokens = exc.usage.completion_tokens if exc.usage is not None else None
            tokens = MAX_TOKENS if tokens is None else tokens
            return Outcome(False, tokens, "length", exc.text, "TruncatedError")
        except errors.ValidationError as exc:
            error = f"{type(exc).__name__}: {exc.detail}"
            return Outcome(False, tokenize(exc.text), "stop", exc.text, error)
        tokens = response.usage.completion_tokens if response.usage is not None else None
        tokens = tokenize(response.text) if tokens is None else tokens
        return Outcome(True, tokens, response.finish_reason, response.text)

    return run


# -- the peers: every response body they receive is tapped for usage and finish_reason ---------


class Tap:
    """An httpx response hook on the openai SDK's client: keeps each chat completion's body, so
    the usage and finish reason of a call are known even where the library hides them (Outlines
    returns only the text) or raises instead of returning (instructor on a truncation)."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, response: Any) -> None:
        response.read()
        if response.status_code == 200 and response.url.path.endswith("/chat/completions"):
            self.bodies.append(response.json())

    def outcome(self, since: int, valid: bool, error: str = "") -> Outcome:
        """What the server said for the responses received since index `since`."""
        bodies = self.bodies[since:]
        tokens = sum(body.get("usage", {}).get("completion_tokens", 0) for body in bodies)
        choice = bodies[-1]["choices"][0] if bodies else {}
        text = choice.get("message", {}).get("content") or ""
        return Outcome(valid, tokens, choice.get("finish_reason"), text, error)


def openai_client(url: str, tap: Tap) -> openai.OpenAI:
    """The SDK client every peer is built on: no retries (one request per call, as lmclient's
    calls here), the tap on its responses."""
    http_client = openai.DefaultHttpxClient(event_hooks={"response": [tap]})
    return openai.OpenAI(base_url=url, api_key="none", max_retries=0, http_client=http_client)


def adapter(task: Task) -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(task.peer_type)


def schema_name(task: Task) -> str:
    return getattr(task.peer_type, "__name__", task.key)


def error_name(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"


def openai_runner(url: str, model: str) -> Runner:
    """The SDK by hand: `response_format` json_schema with the type's pydantic schema (a model's
    `model_json_schema()`, else `TypeAdapter(T).json_schema()`: the schema says a choice, an int
    range, a pattern or a date directly), then pydantic validates the content."""
    tap = Tap()
    client = openai_client(url, tap)

    def run(task: Task, messages: Messages, temperature: float, seed: int) -> Outcome:
        types = adapter(task)
        response_format: Any = {
            "type": "json_schema",
            "json_schema": {"name": schema_name(task), "schema": types.json_schema()},
        }
        since = len(tap.bodies)
        try:
            completion = client.chat.completions.create(
                model=model,
                messages=messages,  # type: ignore[arg-type]
                response_format=response_format,
                max_tokens=MAX_TOKENS,
                temperature=temperature,
                seed=seed,
            )
            types.validate_json(completion.choices[0].message.content or "")
        except Exception as exc:  # the library's own failures: whatever they are, not valid
            return tap.outcome(since, False, error_name(exc))
        return tap.outcome(since, True)

    return run


def instructor_response_model(task: Task) -> Any:
    """instructor takes models, and wraps `int`, `Literal`, `Annotated` and lists itself (into
    `{"content": ...}`, or `{"tasks": [...]}` for a plain list); other classes (`date`) it
    refuses, so they get the same wrapping here."""
    peer = task.peer_type
    if isinstance(peer, type) and not issubclass(peer, pydantic.BaseModel):
        return pydantic.create_model("Response", content=(peer, ...))
    return peer


def instructor_runner(url: str, model: str) -> Runner:
    """instructor in JSON-schema mode, `max_retries=0` (one request per call)."""
    instructor: Any = importlib.import_module("instructor")
    tap = Tap()
    client = instructor.from_openai(openai_client(url, tap), mode=instructor.Mode.JSON_SCHEMA)

    def run(task: Task, messages: Messages, temperature: float, seed: int) -> Outcome:
        since = len(tap.bodies)
        try:
            client.chat.completions.create(
                model=model,
                messages=messages,
                response_model=instructor_response_model(task),
                max_retries=0,
                max_tokens=MAX_TOKENS,
                temperature=temperature,
                seed=seed,
            )
        except Exception as exc:  # instructor validated with pydantic, or raised
            return tap.outcome(since, False, error_name(exc))
        return tap.outcome(since, True)

    return run


def outlines_runner(url: str, model: str) -> Runner:
    """Outlines' OpenAI model: a pydantic model as is, any other type as
    `outlines.types.JsonSchema` of its pydantic schema (its OpenAI model takes only JSON
    schemas; it sends them with `strict: true`); pydantic validates the text it returns."""
    outlines: Any = importlib.import_module("outlines")
    tap = Tap()
    generator = outlines.from_openai(openai_client(url, tap), model)

    def run(task: Task, messages: Messages, temperature: float, seed: int) -> Outcome:
        types = adapter(task)
        peer = task.peer_type
        is_model = isinstance(peer, type) and issubclass(peer, pydantic.BaseModel)
        output_type = peer if is_model else outlines.types.JsonSchema(types.json_schema())
        since = len(tap.bodies)
        try:
            text = generator(
                outlines.inputs.Chat(messages),
                output_type,
                max_tokens=MAX_TOKENS,
                temperature=temperature,
                seed=seed,
            )
            types.validate_json(text)
        except Exception as exc:
            return tap.outcome(since, False, error_name(exc))
        return tap.outcome(since, True)

    return run


def make_runners(names: Sequence[str], url: str, model: str, root_url: str) -> dict[str, Runner]:
    def tokenize(text: str) -> int:
        reply = httpx.post(f"{root_url}/tokenize", json={"content": text}, timeout=30)
        reply.raise_for_status()
        return len(reply.json()["tokens"])

    factories: dict[str, Callable[[], Runner]] = {
        "lmclient-compact": lambda: lmclient_runner(url, "compact", tokenize),
        "lmclient-server": lambda: lmclient_runner(url, "server", tokenize),
        "openai": lambda: openai_runner(url, model),
        "instructor": lambda: instructor_runner(url, model),
        "outlines": lambda: outlines_runner(url, model),
    }
    return {name: factories[name]() for name in names}


# -- running -------------------------------------------------------------------------------------


@dataclass
class Tally:
    """One client's results on one type."""

    calls: collections.Counter[float] = field(default_factory=collections.Counter)
    valid: collections.Counter[float] = field(default_factory=collections.Counter)
    tokens: int = 0
    seconds: float = 0.0
    truncated: int = 0
    runaways: int = 0
    errors: collections.Counter[str] = field(default_factory=collections.Counter)

    def add(self, temperature: float, outcome: Outcome, seconds: float) -> None:
        self.calls[temperature] += 1
        self.valid[temperature] += outcome.valid
        self.tokens += outcome.tokens
        self.seconds += seconds
        self.truncated += outcome.finish == "length"
        self.runaways += bool(RUNAWAY.search(outcome.text))
        if outcome.error:
            self.errors[outcome.error] += 1

    def merge(self, other: Tally) -> None:
        self.calls.update(other.calls)
        self.valid.update(other.valid)
        self.tokens += other.tokens
        self.seconds += other.seconds
        self.truncated += other.truncated
        self.runaways += other.runaways
        self.errors.update(other.errors)

    @property
    def n_valid(self) -> int:
        return sum(self.valid.values())

    @property
    def n_calls(self) -> int:
        return sum(self.calls.values())

    def per_valid(self, amount: float) -> float:
        return amount / self.n_valid if self.n_valid else float("inf")


Results = dict[str, dict[str, Tally]]  # client -> task key -> tally


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_all(
    runners: dict[str, Runner], tasks: Sequence[Task], prompts: int, record: Path | None
) -> tuple[Results, int]:
    """Prompt by prompt (so a cut-off run still covers every type and temperature), each
    (prompt, type, temperature) through every client in an order rotated each time: the
    server's prompt cache and the drift of a shared machine fall on every client alike.

    An interrupt (Ctrl-C, SIGINT) ends the run with the prompts completed so far: a prompt is
    counted only once every client has answered it for every type and temperature, so a run
    cut short on a loaded machine still compares the clients on the same calls. Returns the
    results and the number of prompts they cover."""
    results: Results = {name: {task.key: Tally() for task in tasks} for name in runners}
    warm = [{"role": "user", "content": "Say hi."}]
    for name, runner in runners.items():  # connections, lmclient's server probe: not measured
        runner(tasks[0], warm, 0.0, SEED)
        say(f"e2e: {name} ready")
    started = time.perf_counter()
    total = len(tasks) * len(TEMPERATURES) * prompts * len(runners)
    done = group = completed = 0
    with record.open("a", encoding="utf-8") if record else nullcontext() as sink:
        try:
            for i in range(prompts):
                pending = run_prompt(runners, tasks, i, group, sink)
                group += len(tasks) * len(TEMPERATURES)
                for name, key, temperature, outcome, seconds in pending:
                    results[name][key].add(temperature, outcome, seconds)
                completed += 1
                done += len(pending)
                elapsed = time.perf_counter() - started
                say(f"e2e: prompt {i + 1}/{prompts} done, {done}/{total} calls in {elapsed:.0f} s")
        except KeyboardInterrupt:
            say(f"e2e: interrupted; reporting the {completed} prompts completed")
    return results, completed


def run_prompt(
    runners: dict[str, Runner], tasks: Sequence[Task], i: int, group: int, sink: IO[str] | None
) -> list[tuple[str, str, float, Outcome, float]]:
    """Prompt `i` of every type, at every temperature, through every client (the order rotated
    from `group` on): each call's client, type, temperature, outcome and seconds."""
    names = list(runners)
    out = []
    for task in tasks:
        messages = [{"role": "user", "content": task.prompts[i]}]
        for temperature in TEMPERATURES:
            turn = group % len(names)
            group += 1
            for name in names[turn:] + names[:turn]:
                t0 = time.perf_counter()
                outcome = runners[name](task, messages, temperature, SEED + i)
                seconds = time.perf_counter() - t0
                out.append((name, task.key, temperature, outcome, seconds))
                if sink is not None:
                    row = {"client": name, "type": task.key, "prompt": i}
                    row |= {"temperature": temperature, "seconds": seconds}
                    sink.write(json.dumps(row | outcome.__dict__) + "\n")
                    sink.flush()
    return out


def replay(record: Path, tasks: Sequence[Task], clients: Sequence[str]) -> Results:
    """The results of a recorded run (`--record`), e.g. one cut short, without calling."""
    results: Results = {name: {task.key: Tally() for task in tasks} for name in clients}
    for line in record.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["client"] in results and row["type"] in results[row["client"]]:
            outcome = Outcome(row["valid"], row["tokens"], row["finish"], row["text"], row["error"])
            results[row["client"]][row["type"]].add(row["temperature"], outcome, row["seconds"])
    return results


# -- the report ----------------------------------------------------------------------------------


def fmt_ratio(value: float, digits: int = 2) -> str:
    return "—" if value == float("inf") else f"{value:.{digits}f}"


def valid_cell(tally: Tally, temperature: float) -> str:
    calls = tally.calls[temperature]
    return f"{tally.valid[temperature]}/{calls}" if calls else "—"


def row(label: str, client: str, tally: Tally) -> str:
    cells = [
        label,
        client,
        *(valid_cell(tally, t) for t in TEMPERATURES),
        fmt_ratio(tally.per_valid(tally.tokens), 1),
        fmt_ratio(tally.per_valid(tally.seconds)),
        str(tally.truncated),
        str(tally.runaways),
    ]
    return "| " + " | ".join(cells) + " |"


def totals(results: Results, keys: Sequence[str]) -> dict[str, Tally]:
    out: dict[str, Tally] = {}
    for client, per_type in results.items():
        out[client] = Tally()
        for key in keys:
            out[client].merge(per_type[key])
    return out


def table(results: Results, tasks: Sequence[Task]) -> str:
    heads = ["type", "client", *(f"valid, t={t:g}" for t in TEMPERATURES)]
    heads += ["tokens / valid", "s / valid", "truncated", "whitespace runs"]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * 2 + "---:|" * (len(heads) - 2)]
    for task in tasks:
        lines += [row(task.label, client, results[client][task.key]) for client in results]
    whole = totals(results, [task.key for task in tasks])
    label = f"**all {len(tasks)} types**"
    lines += [row(label, f"**{client}**", tally) for client, tally in whole.items()]
    return "\n".join(lines)


def targets(results: Results, tasks: Sequence[Task]) -> list[str]:
    """The issue's targets for lmclient compact, as ratios of this run, met or missed."""
    lm = "lmclient-compact"
    peers = [p for p in PEERS if p in results]
    if lm not in results or not peers:
        return ["Targets: need lmclient-compact and at least one peer in the run."]
    whole = totals(results, [task.key for task in tasks])
    out = []
    for what, attr, limit in (("completion tokens", "tokens", 0.65), ("wall s", "seconds", 0.7)):
        best = min(peers, key=lambda p: whole[p].per_valid(getattr(whole[p], attr)))
        ratio = whole[lm].per_valid(getattr(whole[lm], attr)) / whole[best].per_valid(
            getattr(whole[best], attr)
        )
        verdict = "met" if ratio <= limit else f"**missed** by {ratio / limit - 1:.0%}"
        out.append(
            f"- {what} per valid value, lmclient compact ÷ best peer ({best}): "
            f"{fmt_ratio(ratio)} (target ≤ {limit}): {verdict}"
        )
    bounded = [t for t in tasks if t.bounded]
    short = [
        f"{t.key} at t={temp:g} ({results[lm][t.key].valid[temp]}/{results[lm][t.key].calls[temp]})"
        for t in bounded
        for temp in TEMPERATURES
        if results[lm][t.key].valid[temp] < results[lm][t.key].calls[temp]
    ]
    out.append(
        "- valid values on bounded types, lmclient compact: "
        + ("100 % at both temperatures: met" if not short else "**missed**: " + ", ".join(short))
    )
    for t in (t for t in tasks if not t.bounded):
        best_peer = max(results[p][t.key].n_valid for p in peers)
        mine = results[lm][t.key].n_valid
        verdict = "met" if mine >= best_peer else "**missed**"
        out.append(
            f"- valid values on {t.key} (unbounded): {mine} vs best peer {best_peer}: {verdict}"
        )
    bad = sum(results[lm][t.key].truncated + results[lm][t.key].runaways for t in bounded)
    out.append(
        "- truncations + whitespace runs on bounded types, lmclient compact: "
        + (f"{bad}: " + ("met" if bad == 0 else "**missed**"))
    )
    return out


def error_summary(results: Results) -> list[str]:
    lines = []
    for client, per_type in results.items():
        for key, tally in per_type.items():
            for error, count in tally.errors.most_common(3):
                lines.append(f"  {client} / {key}: {count}x {error}")
    return lines


# -- where it ran ------------------------------------------------------------------------------


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor() or platform.machine()
    found = re.search(r"^Model name:\s*(.+)$", out, re.MULTILINE)
    return found.group(1).strip() if found else platform.machine()


def git_commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return commit + (" + uncommitted changes" if git("status", "--porcelain", "lmclient") else "")


def version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def python_path() -> str:
    executable = Path(sys.executable)
    if executable.is_relative_to(ROOT):
        return executable.relative_to(ROOT).as_posix()
    return executable.name


def server_props(root_url: str) -> dict[str, Any]:
    try:
        props: dict[str, Any] = httpx.get(f"{root_url}/props", timeout=10).json()
    except (httpx.HTTPError, ValueError):
        return {}
    return props


def header(
    props: dict[str, Any], where: str, command: str, calls: int, seconds: float, lmclient_at: str
) -> str:
    model = Path(str(props.get("model_path", llamacpp.MODEL_FILENAME))).name
    libraries = ", ".join(
        f"{name} {version(name)}" for name in ("openai", "instructor", "outlines", "pydantic")
    )
    return (
        f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on "
        f"{cpu_model()} ({os.cpu_count()} cores, shared), {calls} calls in "
        f"{seconds / 60:.0f} min. Server: llama.cpp `llama-server` "
        f"{props.get('build_info', 'unknown build')} with `{model}`, {where}. "
        f"lmclient {lmclient.__version__} at commit {lmclient_at}; {libraries}. "
        f"Command: `{command}`."
    )


EXPLANATION = """\
Each client gets the same user message, `max_tokens=300`, `temperature` 0 and 0.7 and `seed=1+i`
for prompt i, one call at a time, in an order rotated for every prompt, type and temperature.
*valid* counts values that validate against the type (msgspec for lmclient, pydantic with the
same bounds for the peers); *tokens / valid* and *s / valid* divide everything spent, failures
included, by the valid values; *truncated* counts `finish_reason == "length"`; *whitespace runs*
counts answers with 16 or more whitespace characters in a row. `lmclient-compact` sends the type
as a compact GBNF `grammar`, `lmclient-server` as `json_schema` (the server's whitespace); both
send the `Literal` as a GBNF alternation of the bare words (so they answer alike there). The
openai SDK sends `response_format` json_schema with the pydantic schema (`model_json_schema()`,
or `TypeAdapter(T).json_schema()` for the choice, the int ranges, the pattern and the date) and
validates with pydantic; instructor (JSON_SCHEMA mode, `max_retries=0`) wraps non-model types
itself into `{"content": ...}` (a plain list into `{"tasks": [...]}`; `date`, which it refuses,
is wrapped the same way here); Outlines' OpenAI model takes a pydantic model or
`outlines.types.JsonSchema` of the same schema. The peers' usage is read from each response body
(an httpx hook on the openai client they share); llama.cpp has no regex field, so every client
sends the regex as a JSON string with a `pattern`. Task set and prompts:
`benchmarks/e2e_tasks.py`.
"""


def report(results: Results, tasks: Sequence[Task], head: str) -> str:
    return "\n\n".join(
        [head, EXPLANATION.strip(), table(results, tasks), "\n".join(targets(results, tasks))]
    )


def write_docs(path: Path, body: str, subset: str | None = None, title: str = "") -> None:
    """Replace the marked block, or append it as the page's last section. A run of some types
    (`subset` names them) has a block of its own, `title` its heading, placed after the full
    run's block, so a re-run of a few types leaves the other rows as they were measured."""
    text = path.read_text(encoding="utf-8")
    start_mark, end_mark = START_MARK, END_MARK
    if subset is not None:
        start_mark = START_MARK.replace("bench-e2e:", f"bench-e2e-{subset}:")
        end_mark = END_MARK.replace("bench-e2e:", f"bench-e2e-{subset}:")
    block = f"{start_mark}\n{body}\n{end_mark}"
    if start_mark in text and end_mark in text:
        start = text.index(start_mark)
        end = text.index(end_mark) + len(end_mark)
        text = text[:start] + block + text[end:]
    elif subset is not None and END_MARK in text:
        end = text.index(END_MARK) + len(END_MARK)
        text = text[:end] + f"\n\n{title}\n\n{block}" + text[end:]
    else:
        heading = SECTION_TITLE if subset is None else f"{SECTION_TITLE}\n\n{title}"
        text = text.rstrip("\n") + f"\n\n{heading}\n\n{block}\n"
    path.write_text(text, encoding="utf-8")


@contextmanager
def server(url: str | None) -> Iterator[str]:
    """The given server, or the llama.cpp server of `make demo` (built on first use)."""
    if url:
        yield url
        return
    with llamacpp.LlamaServer() as started:
        say(f"e2e: llama-server pid {started.pid} ready on {started.base_url}")
        yield started.base_url


def pick(
    option: str | None,
    known: Sequence[str],
    default: Sequence[str],
    groups: dict[str, tuple[str, ...]] | None = None,
) -> list[str]:
    if option is None:
        return list(default)
    groups = groups or {}
    named = [name.strip() for name in option.split(",") if name.strip()]
    chosen = list(dict.fromkeys(key for name in named for key in groups.get(name, (name,))))
    unknown = [name for name in chosen if name not in known]
    if unknown:
        raise SystemExit(f"unknown: {', '.join(unknown)}; known: {', '.join(known)}")
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prompts", type=int, default=10, help="prompts per type (max 10)")
    parser.add_argument(
        "--types",
        help="comma-separated: " + ",".join([*(t.key for t in TASKS), *GROUPS]),
    )
    parser.add_argument("--clients", help="comma-separated: " + ",".join(CLIENTS))
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 types x 2 prompts")
    parser.add_argument("--url", help="run against this server (…/v1) instead of starting one")
    parser.add_argument("--docs", type=Path, help="also write the report into this page")
    parser.add_argument("--record", type=Path, help="append every call's outcome here (JSONL)")
    parser.add_argument("--replay", type=Path, help="report a --record file; call nothing")
    args = parser.parse_args(argv)
    if args.quick and args.docs:
        parser.error("a --quick run's numbers mean nothing: it does not write --docs")

    keys = [t.key for t in TASKS]
    chosen = pick(args.types, keys, QUICK_TYPES if args.quick else keys, GROUPS)
    tasks = [t for t in TASKS if t.key in chosen]
    clients = pick(args.clients, CLIENTS, CLIENTS)
    prompts = min(2 if args.quick else args.prompts, min(len(t.prompts) for t in tasks))
    command = " ".join([python_path(), *sys.argv])
    where = (
        f"at {args.url}"
        if args.url
        else f"as `make demo` starts it ({llamacpp.DEFAULT_THREADS} thread, "
        f"{llamacpp.DEFAULT_PARALLEL} slots)"
    )

    if args.replay:
        results = replay(args.replay, tasks, clients)
        calls = sum(t.n_calls for per_type in results.values() for t in per_type.values())
        seconds = sum(t.seconds for per_type in results.values() for t in per_type.values())
        head = f"Replayed from `{args.replay}`: {calls} calls, {seconds / 60:.0f} min of calls."
        print(report(results, tasks, head))
        return 0
    # a run started in the background inherits SIGINT ignored: `kill -INT` still cuts it short
    signal.signal(signal.SIGINT, signal.default_int_handler)
    lmclient_at = git_commit()  # what ran: the tree may be committed before the run ends
    started = time.perf_counter()
    with server(args.url) as url:
        root_url = url.removesuffix("/").removesuffix("/v1")
        props = server_props(root_url)
        model = str(props.get("model_alias") or llamacpp.MODEL_ALIAS)
        runners = make_runners(clients, url, model, root_url)
        results, completed = run_all(runners, tasks, prompts, args.record)
    seconds = time.perf_counter() - started
    calls = sum(tally.n_calls for per_type in results.values() for tally in per_type.values())
    head = header(props, where, command, calls, seconds, lmclient_at)
    if completed < prompts:
        head += f" Interrupted: the first {completed} of {prompts} prompts of each type."
    subset = None  # a run of every type: the full table
    if len(tasks) < len(TASKS):
        subset = args.types if args.types in GROUPS else "-".join(t.key for t in tasks)
        names = ", ".join(t.label for t in tasks)
        head = (
            f"A run of {len(tasks)} of the {len(TASKS)} types alone ({names}); the table "
            f"above is the full run's, not re-run. {head}"
        )
    text = report(results, tasks, head)
    print(text)
    say("e2e: failures by kind:\n" + "\n".join(error_summary(results) or ["  none"]))
    if args.docs:
        title = f"### Re-run: {', '.join(t.label for t in tasks)}"
        write_docs(args.docs, text, subset, title)
        say(f"e2e: written into {args.docs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
