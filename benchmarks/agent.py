"""Agent turns: requests, tokens and seconds per finished task of an agent loop with tools and
a typed answer, lmclient's one-request turn against the two-request way, on the real llama.cpp
server of `make demo` (issue 40, the benchmark of its acceptance).

    make bench-agent                                   # installs, runs, writes the docs
    .venv/bin/python benchmarks/agent.py               # the tables on stdout, progress on stderr
    .venv/bin/python benchmarks/agent.py --quick       # smoke: 2 tasks x 1 prompt
    .venv/bin/python benchmarks/agent.py --tasks weather,clock --clients lmclient-turn,openai
    .venv/bin/python benchmarks/agent.py --url http://127.0.0.1:8080/v1  # a running server

Each task (`agent_tasks.py`) is a question that needs one tool and ends in a typed answer. The
clients answer it as their users would write the loop:

* `lmclient-turn`: `client.run(prompt, Answer, tools=[...], max_turns=4)`: every turn is one
  request whose grammar lets the model call the tool or give the answer, until it answers.
* `lmclient-two`: the way before the typed turn, with lmclient: `create(messages, tools=...,
  tool_choice="auto")` while the model calls the tool (at most 4 times), then one more request,
  `create(messages + ["Give the answer as JSON."], Answer)`, for the typed value.
* `openai`: the openai SDK the same two-request way: `tools` with `tool_choice="auto"`, then
  `response_format` json_schema (the pydantic twin's schema) and pydantic validating the content.

Per task and client: the requests, prompt and completion tokens, wall seconds, how it ended
(`valid`, the error's type name, `max_turns`, or `cut` for the SDK's answer cut at `max_tokens`)
and the calls made. The server starts with the project's chat template that renders tools
(`scripts/llamacpp.py`'s `GEMMA_TOOLS_TEMPLATE`: Gemma 3 270M's own renders none). Ctrl-C (or
`kill -INT`) ends a run with the tasks every client has completed, and reports them.
"""

from __future__ import annotations

import argparse
import functools
import json
import signal
import statistics
import sys
import time
import typing
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import msgspec
import openai
import pydantic

import lmclient
from lmclient import errors

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # benchmarks/ is a directory of scripts, not a package
sys.path.insert(0, str(HERE.parent))

from agent_tasks import QUICK_TASKS, TASKS, Task  # noqa: E402
from e2e import cpu_model, pick, python_path, say, server_props, version  # noqa: E402
from runaway import lmclient_commit  # noqa: E402

from scripts import llamacpp  # noqa: E402

START_MARK, END_MARK = "<!-- bench-agent:start -->", "<!-- bench-agent:end -->"
SECTION_TITLE = "## Agent turns"
AFTER_SECTION = "## Runaways"  # the new section goes after this one
CLIENTS = ("lmclient-turn", "lmclient-two", "openai")
MAX_TURNS = 4
MAX_TOKENS = 256
PROMPTS = 2
TEMPERATURES = (0.0, 0.7)
SEED = 1  # prompt i of every task is sent with seed=SEED + i, by every client
ANSWER_PLEASE = "Give the answer as JSON."
TAIL = 80


@dataclass
class Outcome:
    """One task run by one client: how it ended and what it cost."""

    ended: str  # "valid", "max_turns", "cut", or the error's type name
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    calls: list[str] = field(default_factory=list)  # the tool calls made, in order
    answer: str = ""  # the value as JSON, or the tail of what failed

    @property
    def valid(self) -> bool:
        return self.ended == "valid"

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Sampling:
    temperature: float
    seed: int
    max_tokens: int


Runner = Callable[[Task, str, Sampling], Outcome]
Messages = list[dict[str, Any]]


def recording(function: Callable[..., str], calls: list[str]) -> Callable[..., str]:
    """``function``, keeping each call in ``calls``: how every client's calls are seen alike.
    Its signature and hints stay the function's (`bounded_tool` reads them)."""

    @functools.wraps(function)
    def call(**arguments: Any) -> str:
        calls.append(f"{function.__name__}({json.dumps(arguments, ensure_ascii=False)})")
        return function(**arguments)

    return call


def bounded_tool(function: Callable[..., str]) -> lmclient.Tool[Any]:
    """`Tool.from_function(function)`, its parameters' bounds kept. This lmclient's
    `from_function` reads the hints without ``include_extras``, so it drops each `Annotated`
    bound (``msgspec.Meta(max_length=...)``) and a tool's strings are unbounded, in its schema
    and in a typed turn's grammar: until it keeps them, the same tool is made here from a Struct
    of the hints with their bounds."""
    made = lmclient.Tool.from_function(function)
    hints = typing.get_type_hints(function, include_extras=True)
    hints.pop("return", None)
    arguments = msgspec.defstruct(function.__name__, list(hints.items()), kw_only=True)
    bounded: lmclient.Tool[Any] = lmclient.Tool(
        arguments, name=made.name, description=made.description
    )
    if bounded.schema == made.schema:  # `from_function` keeps the bounds: take its tool
        return made
    bounded.function = function
    return bounded


class Tools:
    """A runner's tools, each made once (a new `Tool` per task would compile a new grammar)
    and recording the calls of the task being run into ``calls``."""

    def __init__(self, tasks: Sequence[Task]) -> None:
        self.calls: list[str] = []
        self.functions = {t.key: recording(t.function, self.calls) for t in tasks}
        self.lm = {key: bounded_tool(f) for key, f in self.functions.items()}

    def start(self) -> list[str]:
        self.calls.clear()
        return self.calls


# -- lmclient ----------------------------------------------------------------------------------


class Meter:
    """An lmclient hook counting the requests sent (each attempt: a re-ask or a retry too) and
    the tokens of every answer received, valid or not."""

    def __init__(self) -> None:
        self.requests = self.prompt = self.completion = 0

    def __call__(self, event: lmclient.HookEvent) -> None:
        if isinstance(event, lmclient.RequestSent):
            self.requests += 1
        elif isinstance(event, (lmclient.CallFinished, lmclient.CallFailed)):
            usage = event.total_usage
            if usage is not None:
                self.prompt += usage.prompt_tokens or 0
                self.completion += usage.completion_tokens or 0

    def read(self, outcome: Outcome) -> Outcome:
        """Put the counts into ``outcome``, and start counting anew."""
        outcome.requests, outcome.prompt_tokens = self.requests, self.prompt
        outcome.completion_tokens = self.completion
        self.requests = self.prompt = self.completion = 0
        return outcome


def failed(exc: Exception) -> Outcome:
    text = getattr(exc, "text", None)
    return Outcome(type(exc).__name__, answer=text[-TAIL:] if isinstance(text, str) else "")


def turn_runner(url: str, tasks: Sequence[Task]) -> Runner:
    """`client.run(prompt, Answer, tools=..., max_turns=...)`: one request per turn."""
    meter, tools = Meter(), Tools(tasks)
    client = lmclient.Client(url, hooks=[meter])

    def run(task: Task, prompt: str, sampling: Sampling) -> Outcome:
        calls = tools.start()
        try:
            tool = tools.lm[task.key]
            given = asdict(sampling)
            response = client.run(prompt, task.answer, tools=[tool], max_turns=MAX_TURNS, **given)
            outcome = Outcome("valid", answer=msgspec.json.encode(response.value).decode())
        except errors.NoValueError as exc:  # the loop's only NoValueError: turns used up
            outcome = Outcome("max_turns") if "max_turns" in str(exc) else failed(exc)
        except errors.LMClientError as exc:
            outcome = failed(exc)
        outcome.calls = list(calls)
        return meter.read(outcome)

    return run


def two_runner(url: str, tasks: Sequence[Task]) -> Runner:
    """The two-request way with lmclient: tool calls until the model stops, then the value."""
    meter, tools = Meter(), Tools(tasks)
    client = lmclient.Client(url, hooks=[meter])

    def loop(task: Task, prompt: str, given: dict[str, Any]) -> Outcome:
        messages: Messages = [{"role": "user", "content": prompt}]
        for _ in range(MAX_TURNS):
            r = client.create(messages, tools=[tools.lm[task.key]], tool_choice="auto", **given)
            if r.text or r.tool_calls:  # (an empty assistant message is left out)
                messages.append(r.message)
            if not r.tool_calls:
                break
            messages += [call.result(call.run()) for call in r.tool_calls]
        else:
            return Outcome("max_turns")
        messages.append({"role": "user", "content": ANSWER_PLEASE})
        value = client.create(messages, task.answer, **given).value
        return Outcome("valid", answer=msgspec.json.encode(value).decode())

    def run(task: Task, prompt: str, sampling: Sampling) -> Outcome:
        calls = tools.start()
        try:
            outcome = loop(task, prompt, asdict(sampling))
        except errors.LMClientError as exc:
            outcome = failed(exc)
        outcome.calls = list(calls)
        return meter.read(outcome)

    return run


# -- the openai SDK ----------------------------------------------------------------------------


def openai_runner(url: str, model: str, tasks: Sequence[Task]) -> Runner:
    """The SDK by hand: `tools` with `tool_choice="auto"` while the model calls them (the
    arguments `json.loads`-ed into the function), then `response_format` json_schema with the
    pydantic twin's schema, validated by pydantic. No retries: each request is one request."""
    client = openai.OpenAI(base_url=url, api_key="none", max_retries=0, timeout=600)
    tools = Tools(tasks)
    params = {key: tool.param() for key, tool in tools.lm.items()}  # the same tools' JSON
    spent = Outcome("")  # the counts of the task being run, whatever its end

    def create(messages: Messages, sampling: Sampling, **extra: Any) -> Any:
        completion = client.chat.completions.create(
            model=model,
            messages=messages,  # type: ignore[arg-type]
            temperature=sampling.temperature,
            seed=sampling.seed,
            max_tokens=sampling.max_tokens,
            **extra,
        )
        spent.requests += 1
        if completion.usage is not None:
            spent.prompt_tokens += completion.usage.prompt_tokens
            spent.completion_tokens += completion.usage.completion_tokens
        return completion.choices[0]

    def loop(task: Task, prompt: str, sampling: Sampling) -> Outcome:
        messages: Messages = [{"role": "user", "content": prompt}]
        function = tools.functions[task.key]
        for _ in range(MAX_TURNS):
            message = create(
                messages, sampling, tools=[params[task.key]], tool_choice="auto"
            ).message
            if not message.tool_calls:
                if message.content:
                    messages.append({"role": "assistant", "content": message.content})
                break
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                if call.function.name != task.function.__name__:
                    raise LookupError(f"no tool {call.function.name!r}")
                result = function(**json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        else:
            return Outcome("max_turns")
        messages.append({"role": "user", "content": ANSWER_PLEASE})
        schema = {"name": task.model.__name__, "schema": task.model.model_json_schema()}
        choice = create(
            messages, sampling, response_format={"type": "json_schema", "json_schema": schema}
        )
        text = choice.message.content or ""
        try:
            value = task.model.model_validate_json(text)
        except pydantic.ValidationError:
            ended = "cut" if choice.finish_reason == "length" else "ValidationError"
            return Outcome(ended, answer=text[-TAIL:])
        return Outcome("valid", answer=value.model_dump_json())

    def run(task: Task, prompt: str, sampling: Sampling) -> Outcome:
        calls = tools.start()
        spent.requests = spent.prompt_tokens = spent.completion_tokens = 0
        try:
            outcome = loop(task, prompt, sampling)
        except (openai.OpenAIError, LookupError, TypeError, ValueError) as exc:
            outcome = Outcome(type(exc).__name__, answer=str(exc)[-TAIL:])
        outcome.requests, outcome.calls = spent.requests, list(calls)
        outcome.prompt_tokens, outcome.completion_tokens = (
            spent.prompt_tokens,
            spent.completion_tokens,
        )
        return outcome

    return run


def make_runners(
    names: Sequence[str], url: str, model: str, tasks: Sequence[Task]
) -> dict[str, Runner]:
    factories: dict[str, Callable[[], Runner]] = {
        "lmclient-turn": lambda: turn_runner(url, tasks),
        "lmclient-two": lambda: two_runner(url, tasks),
        "openai": lambda: openai_runner(url, model, tasks),
    }
    return {name: factories[name]() for name in names}


# -- running -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One task run by one client, its place in the run and its outcome."""

    client: str
    task: str
    prompt: int
    temperature: float
    outcome: Outcome


def timed(runner: Runner, task: Task, prompt: str, sampling: Sampling) -> Outcome:
    wall = time.perf_counter()
    outcome = runner(task, prompt, sampling)
    outcome.seconds = time.perf_counter() - wall
    return outcome


def run_all(
    runners: dict[str, Runner],
    tasks: Sequence[Task],
    prompts: int,
    max_tokens: int,
    record: Path | None,
) -> tuple[list[Run], bool]:
    """Prompt by prompt, each (prompt, task, temperature) through every client in an order
    rotated each time, so the server's prompt cache and the drift of a shared machine fall on
    every client alike. An interrupt ends the run with the (prompt, task, temperature) every
    client completed. Returns the runs, and whether the run was cut short."""
    names = list(runners)
    warm = Sampling(0.0, SEED, 16)  # connections, lmclient's server probe: not measured
    for name, runner in runners.items():
        runner(tasks[0], "Say hi.", warm)
        say(f"agent: {name} ready")
    runs: list[Run] = []
    units = prompts * len(tasks) * len(TEMPERATURES)
    done = 0
    with record.open("a", encoding="utf-8") if record else nullcontext() as sink:
        try:
            for i in range(prompts):
                for task in tasks:
                    for temperature in TEMPERATURES:
                        shift = done % len(names)
                        sampling = Sampling(temperature, SEED + i, max_tokens)
                        unit = [
                            run_one(runners[name], name, task, i, sampling, sink)
                            for name in names[shift:] + names[:shift]
                        ]
                        runs += unit
                        done += 1
                say(f"agent: prompt {i + 1}/{prompts} done ({done}/{units})")
        except KeyboardInterrupt:
            say(f"agent: interrupted; reporting the {done} of {units} task runs completed")
            return runs, True
    return runs, False


def run_one(
    runner: Runner, name: str, task: Task, i: int, sampling: Sampling, sink: IO[str] | None
) -> Run:
    outcome = timed(runner, task, task.prompts[i], sampling)
    say(
        f"  {name:<13} {task.key:<10} p{i} t={sampling.temperature:g}: {outcome.ended}, "
        f"{outcome.requests} req, {outcome.tokens} tokens, {outcome.seconds:.1f} s, "
        f"{len(outcome.calls)} calls {outcome.calls[:1]} {outcome.answer[-60:]!r}"
    )
    if sink is not None:
        row = {"client": name, "task": task.key, "prompt": i, "temperature": sampling.temperature}
        sink.write(json.dumps(row | asdict(outcome), ensure_ascii=False) + "\n")
        sink.flush()
    return Run(name, task.key, i, sampling.temperature, outcome)


def replay(record: Path, tasks: Sequence[Task], clients: Sequence[str]) -> list[Run]:
    """The runs of a recorded run (`--record`), e.g. one cut short, without calling."""
    keys = {task.key for task in tasks}
    names = [f.name for f in Outcome.__dataclass_fields__.values()]
    runs = []
    for line in record.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["client"] in clients and row["task"] in keys:
            outcome = Outcome(**{name: row[name] for name in names})
            runs.append(Run(row["client"], row["task"], row["prompt"], row["temperature"], outcome))
    return runs


# -- the report ----------------------------------------------------------------------------------


def mean_cell(values: Sequence[float], digits: int = 1) -> str:
    return f"{statistics.mean(values):.{digits}f}" if values else "—"


def seconds_cell(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.1f} / {max(values):.1f}" if values else "—"


def ended_cell(runs: Sequence[Run]) -> str:
    """How the runs that did not end valid ended, by kind: `2 max_turns, 1 ValidationError`."""
    counts: dict[str, int] = {}
    for run in runs:
        if not run.outcome.valid:
            counts[run.outcome.ended] = counts.get(run.outcome.ended, 0) + 1
    return ", ".join(f"{n} {ended}" for ended, n in sorted(counts.items())) or "—"


def cells(runs: Sequence[Run]) -> list[str]:
    """The columns both tables share, over ``runs`` (one client's)."""
    outcomes = [run.outcome for run in runs]
    valid = [o for o in outcomes if o.valid]
    spent = sum(o.tokens for o in outcomes)
    return [
        f"{len(valid)}/{len(outcomes)}",
        str(sum(bool(o.calls) for o in valid)),
        mean_cell([len(o.calls) for o in outcomes]),
        mean_cell([o.requests for o in valid], 2),
        mean_cell([o.tokens for o in valid], 0),
        f"{spent / len(valid):.0f}" if valid else "—",
        seconds_cell([o.seconds for o in outcomes]),
        ended_cell(runs),
    ]


HEADS = [
    "valid / tasks",
    "valid after a tool call",
    "tool calls / task",
    "requests / valid task",
    "tokens / valid task",
    "all tokens ÷ valid tasks",
    "wall s / task, p50 / max",
    "not valid: how",
]


def summary_table(runs: Sequence[Run], clients: Sequence[str]) -> str:
    lines = [
        "| client | " + " | ".join(HEADS) + " |",
        "|---|" + "---:|" * (len(HEADS) - 1) + "---|",
    ]
    for client in clients:
        mine = [run for run in runs if run.client == client]
        lines.append("| " + " | ".join([client, *cells(mine)]) + " |")
    return "\n".join(lines)


def task_table(runs: Sequence[Run], tasks: Sequence[Task], clients: Sequence[str]) -> str:
    heads = ["task", "client", *HEADS]
    lines = ["| " + " | ".join(heads) + " |", "|---|---|" + "---:|" * (len(HEADS) - 1) + "---|"]
    for task in tasks:
        for client in clients:
            mine = [run for run in runs if run.client == client and run.task == task.key]
            if mine:
                lines.append("| " + " | ".join([task.label, client, *cells(mine)]) + " |")
    return "\n".join(lines)


def explanation(max_tokens: int) -> str:
    return f"""\
Each client gets the same tasks (`benchmarks/agent_tasks.py`: a question, one tool, a typed
answer of two or three bounded fields), one at a time, with `max_tokens={max_tokens}` on every
request, `temperature` 0 and 0.7 and `seed=1+i` for prompt i, in an order rotated for every
task, prompt and temperature. `lmclient-turn` is `client.run(prompt, Answer, tools=[...],
max_turns={MAX_TURNS})`: each turn one request whose grammar holds the tool call or the answer.
`lmclient-two` and `openai` are the two-request way: `tools` with `tool_choice="auto"` until
the model stops calling (at most {MAX_TURNS} requests), then one more request for the typed
answer, the user asking "{ANSWER_PLEASE}" (lmclient's output type; the SDK's `response_format`
json_schema of the pydantic twin, validated by pydantic). A *valid* task ended in a value that
validates; *requests* and *tokens* (prompt + completion, the server's usage) are those of the
task's whole loop, averaged over its valid tasks, and *all tokens ÷ valid tasks* counts the
failed tasks' tokens too. *valid after a tool call* counts the valid tasks whose loop called the
tool at least once (a model may answer without it: the model's choice, not the client's);
*tool calls / task* counts every call run, over all tasks (a typed turn takes one call per
request, up to eight with `parallel_tool_calls=True`; llama.cpp parses several too);
*max_turns* is a loop still calling after {MAX_TURNS} turns; *cut* an SDK answer cut at
`max_tokens` (lmclient's is a `TruncatedError`). pydantic-ai is not in the run: it is not
installed here, and the machine's network is loopback only. Every task's calls and answer are
in the run's `--record` file."""


def header(
    props: dict[str, Any], where: str, command: str, runs: int, seconds: float, commit: str
) -> str:
    model = Path(str(props.get("model_path", llamacpp.MODEL_FILENAME))).name
    build = props.get("build_info", "unknown build")
    return (
        f"Measured {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC on {cpu_model()}, "
        f"{runs} task runs in {seconds / 60:.0f} min. Server: llama.cpp `llama-server` {build} "
        f"with `{model}` and the chat template that renders tools (`scripts/llamacpp.py`'s "
        f"`GEMMA_TOOLS_TEMPLATE`), {where}. lmclient {lmclient.__version__} at commit "
        f"{commit}; openai {version('openai')}, pydantic {version('pydantic')}. "
        f"Command: `{command}`."
    )


def report(
    runs: Sequence[Run], tasks: Sequence[Task], clients: Sequence[str], head: str, max_tokens: int
) -> str:
    return "\n\n".join(
        [
            head,
            explanation(max_tokens),
            summary_table(runs, clients),
            "Per task:",
            task_table(runs, tasks, clients),
        ]
    )


def write_docs(path: Path, body: str) -> None:
    """Replace the marked block; else add the section after the runaways' (or at the end)."""
    text = path.read_text(encoding="utf-8")
    block = f"{START_MARK}\n{body}\n{END_MARK}"
    if START_MARK in text and END_MARK in text:
        start = text.index(START_MARK)
        end = text.index(END_MARK) + len(END_MARK)
        text = text[:start] + block + text[end:]
    else:
        section = f"{SECTION_TITLE}\n\n{INTRO}\n\n{block}\n"
        after = text.find(f"\n{AFTER_SECTION}\n")
        following = text.find("\n## ", after + 1) if after >= 0 else -1
        if following >= 0:
            text = text[: following + 1] + section + "\n" + text[following + 1 :]
        else:
            text = text.rstrip("\n") + f"\n\n{section}"
    path.write_text(text, encoding="utf-8")


INTRO = """\
An agent's turn ends two ways: the model calls tools, or it answers. `make bench-agent`
(`benchmarks/agent.py`, its tasks in `benchmarks/agent_tasks.py`) runs the same agent tasks,
each a question that needs one tool and ends in a typed answer, through lmclient's typed turn
(`client.run`: one request per turn, the call or the answer under one grammar), through the
two-request way with lmclient (tool calls, then one more request for the typed value) and
through the openai SDK the same two-request way, on the llama.cpp server of `make demo`, and
counts per task the requests, the tokens, the wall seconds and how it ended. Gemma 3 270M is a
tiny base model: which tool it calls with what, and whether it calls it at all, are its own
choices; what the run measures is the structure."""


@contextmanager
def serving(url: str | None) -> Iterator[str]:
    """The given server, or the llama.cpp of `make demo` with the template that renders tools,
    one slot (the tasks run one at a time)."""
    if url:
        yield url
        return
    with llamacpp.LlamaServer(parallel=1, tools=True) as started:
        say(f"agent: llama.cpp pid {started.pid} ready on {started.base_url}")
        yield started.base_url


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    keys = [t.key for t in TASKS]
    parser.add_argument("--prompts", type=int, default=PROMPTS, help=f"per task (max {PROMPTS})")
    parser.add_argument("--tasks", help="comma-separated: " + ",".join(keys))
    parser.add_argument("--clients", help="comma-separated: " + ",".join(CLIENTS))
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 tasks x 1 prompt")
    parser.add_argument("--max-tokens", type=int, default=MAX_TOKENS, help="every request's")
    parser.add_argument("--url", help="run against this server (…/v1) instead of starting one")
    parser.add_argument("--docs", type=Path, help="also write the report into this page")
    parser.add_argument("--record", type=Path, help="append every task run here (JSONL)")
    parser.add_argument("--replay", type=Path, help="report a --record file; call nothing")
    args = parser.parse_args(argv)
    if args.quick and args.docs:
        parser.error("a --quick run's numbers mean nothing: it does not write --docs")

    chosen = pick(args.tasks, keys, QUICK_TASKS if args.quick else keys)
    tasks = [t for t in TASKS if t.key in chosen]
    clients = pick(args.clients, CLIENTS, CLIENTS)
    prompts = min(1 if args.quick else args.prompts, min(len(t.prompts) for t in tasks))
    command = " ".join([python_path(), *sys.argv])
    if args.replay:
        runs = replay(args.replay, tasks, clients)
        head = f"Replayed from `{args.replay}`: {len(runs)} task runs."
        print(report(runs, tasks, clients, head, args.max_tokens))
        return 0
    # a run started in the background inherits SIGINT ignored: `kill -INT` still cuts it short
    signal.signal(signal.SIGINT, signal.default_int_handler)
    where = f"at {args.url}" if args.url else "as this script starts it"
    started = time.perf_counter()
    commit = lmclient_commit()  # the code imported now: the tree may move during the run
    with serving(args.url) as url:
        props = server_props(url.removesuffix("/").removesuffix("/v1"))
        model = str(props.get("model_alias") or llamacpp.MODEL_ALIAS)
        runners = make_runners(clients, url, model, tasks)
        runs, cut = run_all(runners, tasks, prompts, args.max_tokens, args.record)
    head = header(props, where, command, len(runs), time.perf_counter() - started, commit)
    if cut:
        head += " Interrupted: the tasks every client completed."
    text = report(runs, tasks, clients, head, args.max_tokens)
    print(text)
    if args.docs:
        write_docs(args.docs, text)
        say(f"agent: written into {args.docs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
