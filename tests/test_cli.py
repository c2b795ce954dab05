"""The ``lmclient`` command, run as installed (the console script, in a subprocess) against a
FakeLLM served on 127.0.0.1 in this process."""

from __future__ import annotations

import io
import math
import os
import pty
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

import lmclient
from lmclient._cli import DIALECT_NAMES, _InOrder
from lmclient._dialects import DIALECTS
from lmclient.testing import FakeLLM, RecordedRequest

pytestmark = pytest.mark.slow  # a console-script process per test: ~25 s on 2 cores

SCRIPT = Path(sys.executable).with_name("lmclient")
SECRET = "sk-test-3c1f9a0e-never-print-me"
KINDS = ("json schema", "regex", "choice", "grammar gbnf", "grammar lark", "int")
REASONING = "after reasoning"  # the reasoning check's row, after the kinds' (`_after_reasoning`)


def run(
    *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The installed ``lmclient`` with ``args``; the caller's LMCLIENT_*/OPENAI_* variables are
    dropped so that only ``env`` configures it. stdin is a pipe (never a terminal)."""
    assert SCRIPT.exists(), f"no {SCRIPT}: run `.venv/bin/pip install -e . --no-deps`"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("LMCLIENT_", "OPENAI_"))}
    return subprocess.run(
        [str(SCRIPT), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        timeout=60,
    )


def lines(text: str) -> list[Any]:
    return [msgspec.json.decode(line) for line in text.splitlines()]


# -- the command line itself -------------------------------------------------------------------


@pytest.mark.parametrize("command", ["", "generate", "batch", "probe", "models"])
def test_help_has_an_example(command: str) -> None:
    result = run(*[command] * bool(command), "--help")
    assert result.returncode == 0, result.stderr
    examples = result.stdout.split("examples:\n", 1)[1]
    assert f"lmclient {command}".strip() in examples


def test_python_dash_m_is_the_same_command() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "lmclient", "--version"], capture_output=True, text=True
    )
    assert (result.returncode, result.stdout) == (0, f"lmclient {lmclient.__version__}\n")


def test_dialect_names_are_the_librarys() -> None:
    assert ("auto", *DIALECTS) == DIALECT_NAMES


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["generate", "Q", "--bogus"], "unrecognized arguments: --bogus"),
        (["generate", "Q", "--temperature", "hot"], "invalid float value"),
        (["generate", "Q", "--regex", "a", "--choice", "a", "b"], "not allowed with"),
        (["generate", "Q", "--type", "str"], "invalid choice"),
        (["generate", "Q", "--dialect", "vllm2"], "invalid choice"),
        (["generate", "Q", "-n", "0"], "expected a positive integer"),
        (["generate", "Q", "--syntax", "lark"], "--syntax needs --grammar"),
        (["generate", "Q", "--regex", "("], "invalid regex"),
        (["generate", "Q", "--schema", "{not json"], "--schema: not JSON"),
        (["generate", "Q", "--schema", '{"type": "wat"}'], "invalid JSON schema"),
        (["generate", "Q", "--schema", "missing.json"], "cannot read the schema file"),
        (["generate", "Q", "--grammar", "missing.gbnf"], "cannot read the grammar file"),
        (["generate", "Q", "--stream", "-n", "2"], "--stream cannot be combined"),
        (["generate", "Q", "--stream", "--full"], "--stream cannot be combined"),
        (["generate"], "the prompt is empty"),  # stdin is an empty pipe
        (["batch", "missing.jsonl"], "cannot read the input file"),
    ],
)
def test_usage_errors_exit_2_before_any_request(
    fake: FakeLLM, url: str, args: list[str], message: str
) -> None:
    result = run(*args, "--url", url)
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stdout == ""
    assert fake.requests == []


def test_no_prompt_from_a_terminal_is_a_usage_error(fake: FakeLLM, url: str) -> None:
    terminal, stdin = pty.openpty()
    try:
        result = subprocess.run(
            [str(SCRIPT), "generate", "--url", url], stdin=stdin, capture_output=True, text=True
        )
    finally:
        os.close(stdin)
        os.close(terminal)
    assert result.returncode == 2
    assert "no prompt: give PROMPT, or pipe it on stdin" in result.stderr
    assert fake.requests == []


@pytest.mark.parametrize(
    "args",
    [
        ["--choice", "yes", "--choice", "no", "Is it?"],
        ["--choice", "yes,no", "Is it?"],
        ["--choice", "yes", "no", "Is it?"],  # the last word of the list is the prompt
        ["--choice", "yes", "no", "Is it?", "--seed", "1"],
        ["Is it?", "--choice", "yes", "no"],
        ["Is it?", "--choice", "yes", "--choice", "no"],
    ],
)
def test_choices_and_the_prompt_in_either_order(fake: FakeLLM, url: str, args: list[str]) -> None:
    result = run("generate", *args, "--url", url)
    assert result.returncode == 0, result.stderr
    assert (fake.calls[0].prompt, fake.calls[0].constraint.value) == ("Is it?", ["yes", "no"])


def test_a_piped_prompt_keeps_every_word_a_choice(fake: FakeLLM, url: str) -> None:
    result = run("generate", "--choice", "yes", "no", "--url", url, stdin="Is it?\n")
    assert result.returncode == 0, result.stderr
    assert (fake.calls[0].prompt, fake.calls[0].constraint.value) == ("Is it?", ["yes", "no"])


def test_choices_then_the_prompt_from_a_terminal(fake: FakeLLM, url: str) -> None:
    terminal, stdin = pty.openpty()
    try:
        result = subprocess.run(
            [str(SCRIPT), "generate", "--choice", "yes", "no", "Is it?", "--url", url],
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        os.close(stdin)
        os.close(terminal)
    assert result.returncode == 0, result.stderr
    assert (fake.calls[0].prompt, fake.calls[0].constraint.value) == ("Is it?", ["yes", "no"])


def test_batch_input_after_choices(fake: FakeLLM, url: str) -> None:
    result = run("batch", "--choice", "yes", "no", "-", "--url", url, stdin='"a"\n')
    assert result.returncode == 0, result.stderr
    assert (fake.calls[0].prompt, fake.calls[0].constraint.value) == ("a", ["yes", "no"])
    missing = run("batch", "--choice", "yes", "--url", url)
    assert missing.returncode == 2
    assert "required: IN.jsonl" in missing.stderr


@pytest.mark.parametrize("command", ["generate Q", "batch -", "probe", "models"])
def test_no_url_is_a_usage_error(command: str) -> None:
    result = run(*command.split())
    assert result.returncode == 2
    assert "no server URL" in result.stderr


# -- generate ----------------------------------------------------------------------------------


def test_generate_prints_the_text(fake: FakeLLM, url: str) -> None:
    result = run("generate", "Say hi.", "--url", url)
    assert (result.returncode, result.stdout) == (0, "This is a fake reply.\n")
    (call,) = fake.calls
    assert (call.endpoint, call.prompt, call.constraint.kind) == ("chat", "Say hi.", "none")


@pytest.mark.parametrize("args", [[], ["-"]])
def test_generate_reads_the_prompt_from_stdin(fake: FakeLLM, url: str, args: list[str]) -> None:
    result = run("generate", *args, "--url", url, stdin="Say hi.\nPlease.\n\n")
    assert result.returncode == 0, result.stderr
    assert fake.calls[0].prompt == "Say hi.\nPlease."  # trailing newlines dropped


SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 8}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}


@pytest.mark.parametrize(
    ("args", "kind", "check"),
    [
        (["--schema", msgspec.json.encode(SCHEMA).decode()], "grammar", "person"),
        (["--regex", "[a-z]{3}-[0-9]{2}"], "regex", r"[a-z]{3}-[0-9]{2}"),
        (["--choice", "yes", "no"], "choice", "yes|no"),
        (["--type", "int"], "regex", r"-?[0-9]+"),
        (["--type", "float"], "regex", r"-?[0-9.eE+-]+"),
        (["--type", "bool"], "regex", "true|false"),
        (["--type", "json"], "grammar", r".+"),
    ],
)
def test_generate_output_types(
    fake: FakeLLM, url: str, args: list[str], kind: str, check: str
) -> None:
    result = run("generate", "Q", *args, "--url", url)
    assert result.returncode == 0, result.stderr
    printed = result.stdout.removesuffix("\n")
    assert fake.calls[0].constraint.kind == kind
    if check == "person":  # JSON types print as JSON
        value = msgspec.json.decode(printed)
        assert set(value) == {"name", "age"} and isinstance(value["age"], int)
    else:  # text types print as is: a choice is `yes`, not `"yes"`
        assert re.fullmatch(check, printed), printed


def test_generate_schema_from_a_file(fake: FakeLLM, url: str, tmp_path: Path) -> None:
    path = tmp_path / "person.json"
    path.write_bytes(msgspec.json.encode(SCHEMA))
    fake.reply({"name": "Ada", "age": 36})
    result = run(
        "generate",
        "Invent a person.",
        "--schema",
        str(path),
        "--whitespace",
        "server",
        "--url",
        url,
    )
    assert (result.returncode, result.stdout) == (0, '{"name":"Ada","age":36}\n')
    assert fake.calls[0].constraint.value == SCHEMA


@pytest.mark.parametrize(
    ("grammar", "syntax", "expected"),
    [
        ('root ::= "ab" [0-9]', None, r"ab[0-9]"),
        ('start: "left" | "right"', "lark", "left|right"),
    ],
)
def test_generate_grammar_file(
    fake: FakeLLM, url: str, tmp_path: Path, grammar: str, syntax: str | None, expected: str
) -> None:
    path = tmp_path / "g.txt"
    path.write_text(grammar)
    syntax_args = ["--syntax", syntax] if syntax else []
    result = run("generate", "Q", "--grammar", str(path), *syntax_args, "--url", url)
    assert result.returncode == 0, result.stderr
    assert re.fullmatch(expected, result.stdout.removesuffix("\n"))
    assert fake.calls[0].constraint.value == grammar


def test_generate_completions(fake: FakeLLM, url: str) -> None:
    result = run("generate", "2 + 2 =", "--completions", "--type", "int", "--url", url)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == msgspec.json.decode(result.stdout)
    (call,) = fake.calls
    assert (call.endpoint, call.prompt) == ("completions", "2 + 2 =")


def test_generate_sends_the_sampling_flags(fake: FakeLLM, url: str) -> None:
    flags = ["--max-tokens", "7", "--temperature", "0.5", "--seed", "3"]
    result = run("generate", "Q", *flags, "--url", url)
    assert result.returncode == 0, result.stderr
    body = fake.calls[0].body
    assert (body["max_tokens"], body["temperature"], body["seed"]) == (7, 0.5, 3)


@pytest.mark.parametrize(
    ("flag", "kind"), [([], "grammar"), (["--whitespace", "server"], "json_object")]
)
def test_generate_json_is_compact_unless_asked_otherwise(
    fake: FakeLLM, url: str, flag: list[str], kind: str
) -> None:
    result = run("generate", "Q", "--type", "json", *flag, "--url", url)
    assert result.returncode == 0, result.stderr
    assert fake.calls[0].constraint.kind == kind


def test_generate_n_prints_one_json_value_a_line(fake: FakeLLM, url: str) -> None:
    fake.reply_sequence(["one\nline", "two"])
    result = run("generate", "Q", "-n", "2", "--url", url)
    assert result.returncode == 0, result.stderr
    assert lines(result.stdout) == ["one\nline", "two"]
    assert fake.calls[0].body["n"] == 2


def test_generate_full_prints_the_whole_response(fake: FakeLLM, url: str) -> None:
    fake.reply("yes", usage={"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6})
    result = run("generate", "Q", "--choice", "yes", "no", "--full", "--url", url)
    assert result.returncode == 0, result.stderr
    full = msgspec.json.decode(result.stdout)
    assert full["values"] == ["yes"] and full["texts"] == ["yes"]
    assert full["finish_reasons"] == ["stop"] and full["model"] == "fake-model"
    assert full["usage"] == {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}
    assert full["raw"]["choices"][0]["message"]["content"] == "yes"


def test_generate_model_and_dialect_flags() -> None:
    fake = FakeLLM(["fake-model", "other"], server="sglang")
    args = ["--model", "fake-model", "--dialect", "sglang", "--choice", "a", "b"]
    with fake.serve() as url:
        result = run("generate", "Q", *args, "--url", url)
    assert result.returncode == 0, result.stderr
    assert result.stdout in ("a\n", "b\n")
    assert [r.endpoint for r in fake.requests] == ["chat"]  # no probes, no model lookup
    body = fake.calls[0].body
    assert (body["model"], body["regex"]) == ("fake-model", "(?:a|b)")


@pytest.mark.parametrize("variable", ["LMCLIENT_BASE_URL", "OPENAI_BASE_URL"])
def test_url_from_the_environment(fake: FakeLLM, url: str, variable: str) -> None:
    result = run("generate", "Q", env={variable: url})
    assert result.returncode == 0, result.stderr
    assert len(fake.calls) == 1


def test_stream_prints_deltas_as_they_come(url: str, fake: FakeLLM) -> None:
    fake.reply("one two three four five six", chunk_size=4)
    held = threading.Event()
    fake.on_chunk = lambda index: index == 3 and held.wait(30)  # the rest waits for the test
    with subprocess.Popen(
        [str(SCRIPT), "generate", "Q", "--stream", "--url", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        first = os.read(process.stdout.fileno(), 1024)  # arrives while the stream is held
        held.set()
        rest = process.stdout.read()
        assert process.wait(30) == 0, process.stderr.read()
    assert first and "one two three four five six".startswith(first.decode())
    assert (first + rest).decode() == "one two three four five six\n"
    assert fake.calls[0].stream


def test_stream_of_an_invalid_value_exits_1(fake: FakeLLM, url: str) -> None:
    fake.reply("yess")  # (begins as an option does: not a constraint the server ignored)
    result = run("generate", "Q", "--stream", "--choice", "yes", "no", "--url", url)
    assert result.returncode == 1
    assert result.stdout == "yess\n"  # shown as it came, then refused
    assert "ValidationError" in result.stderr and "expected one of ['yes', 'no']" in result.stderr


def test_validation_failure_exits_1(fake: FakeLLM, url: str) -> None:
    fake.reply("42 years")  # (begins as an int does: not a constraint the server ignored)
    result = run("generate", "Q", "--type", "int", "--url", url)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.startswith("lmclient: ValidationError: output does not match int")
    assert "42 years" in result.stderr


def test_api_error_exits_1(fake: FakeLLM, url: str) -> None:
    fake.fail(400, body="the prompt is too long")
    result = run("generate", "Q", "--url", url)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "lmclient: BadRequestError: 400: the prompt is too long (POST /v1/chat/completions)\n"
    )


def test_unknown_model_exits_1() -> None:
    with FakeLLM(models=["fake-model"]).serve() as url:
        result = run("generate", "Q", "--model", "nope", "--url", url)
    assert result.returncode == 1
    assert "NotFoundError: 404" in result.stderr


@pytest.mark.parametrize("how", ["flag", "LMCLIENT_API_KEY", "OPENAI_API_KEY"])
def test_api_key_is_sent_and_never_printed(fake: FakeLLM, url: str, how: str) -> None:
    args = ["--api-key", SECRET] if how == "flag" else []
    env = {} if how == "flag" else {how: SECRET}
    fake.fail(401, body="wrong key", when="fail", times=None)
    results = [
        run("generate", "Q", "--full", "--url", url, *args, env=env),
        run("generate", "fail", "--url", url, *args, env=env),  # an error message
        run("batch", "-", "--url", url, *args, env=env, stdin='"Q"\n"fail"\n'),
        run("probe", url, "--check", "--json", *args, env=env),
        run("models", url, *args, env=env),
        run("generate", "--help", env=env),
    ]
    assert [r.returncode for r in results] == [0, 1, 1, 0, 0, 0]
    assert all(SECRET not in r.stdout + r.stderr for r in results)
    assert "401: wrong key" in results[1].stderr
    assert {r.headers.get("authorization") for r in fake.requests} == {f"Bearer {SECRET}"}


def test_ctrl_c_exits_130_without_a_traceback(fake: FakeLLM, url: str) -> None:
    fake.delay(math.inf)  # the answer never comes (until the server stops)
    asked = threading.Event()

    def on_request(request: RecordedRequest) -> None:
        if request.endpoint == "chat":
            asked.set()

    fake.on_request = on_request
    # A child inherits an ignored SIGINT through exec, and Python then leaves it ignored: the
    # case under a background job of a non-interactive shell (`make test &`, `(... &)`), where
    # this Ctrl-C never arrived and the call waited out the fake's held answer. A handled
    # signal is reset to its default by exec, so the child starts as a terminal's would.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        process = subprocess.Popen(
            [str(SCRIPT), "generate", "Q", "--url", url], stderr=subprocess.PIPE, text=True
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    with process:
        assert asked.wait(30)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    assert (process.returncode, stderr) == (130, "")


def test_broken_pipe_exits_quietly(url: str) -> None:
    read, write = os.pipe()
    os.close(read)  # nobody will read: the first write fails with EPIPE
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # written at exit
    try:
        result = subprocess.run(
            [str(SCRIPT), "models", url], stdout=write, stderr=subprocess.PIPE, env=env
        )
    finally:
        os.close(write)
    assert (result.returncode, result.stderr) == (1, b"")


# -- batch -------------------------------------------------------------------------------------


def test_batch_writes_results_in_input_order(fake: FakeLLM, url: str, tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "third"}]
    items = ["first", {"prompt": "second"}, {"prompt": messages}]
    path.write_text("\n".join(msgspec.json.encode(item).decode() for item in items) + "\n\n")
    for word in ("first", "second", "third"):
        fake.reply(f"re: {word}", when=word)
    result = run("batch", str(path), "--url", url)
    assert result.returncode == 0, result.stderr
    assert lines(result.stdout) == [
        {"value": "re: first"},
        {"value": "re: second"},
        {"value": "re: third"},
    ]
    assert [c.body["messages"] for c in fake.calls if c.prompt == "third"] == [messages]


def test_batch_output_order_does_not_depend_on_finishing_order() -> None:
    out = io.StringIO()
    write = _InOrder(out, lmclient.Progress(3, stream=io.StringIO()))
    write(2, "c")
    assert out.getvalue() == ""  # waits for 0 and 1
    write(0, "a")
    assert lines(out.getvalue()) == [{"value": "a"}]
    write(1, lmclient.BadRequestError("no", status_code=400))
    assert lines(out.getvalue())[1:] == [
        {"error": {"type": "BadRequestError", "message": "400: no", "status_code": 400}},
        {"value": "c"},
    ]


def test_batch_failures_are_error_lines_and_exit_1(fake: FakeLLM, url: str) -> None:
    fake.fail(400, body="nope", when="rejected", times=None)
    fake.reply("7 many", when="invalid")  # (begins as an int: a ValidationError)
    stdin = '"one"\n"rejected"\n"invalid"\n"two"\n'
    result = run("batch", "-", "--type", "int", "--url", url, stdin=stdin)
    assert result.returncode == 1
    assert result.stderr == "lmclient: 2 of 4 prompts failed\n"
    one, rejected, invalid, two = lines(result.stdout)
    assert isinstance(one["value"], int) and isinstance(two["value"], int)
    assert rejected == {
        "error": {
            "type": "BadRequestError",
            "message": "400: nope (POST /v1/chat/completions)",
            "status_code": 400,
        }
    }
    assert invalid["error"]["type"] == "ValidationError" and invalid["error"]["text"] == "7 many"


def test_batch_flags_reach_every_request(fake: FakeLLM, url: str, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    flags = ["--choice", "yes", "no", "--max-tokens", "5", "--temperature", "0", "--seed", "9"]
    result = run("batch", "-", "-o", str(out), *flags, "--url", url, stdin='"a"\n"b"\n')
    assert (result.returncode, result.stdout) == (0, "")
    assert [r["value"] in ("yes", "no") for r in lines(out.read_text())] == [True, True]
    for call in fake.calls:
        body = call.body
        assert (body["max_tokens"], body["temperature"], body["seed"]) == (5, 0, 9)
        assert call.constraint.value == ["yes", "no"]


def test_batch_completions(fake: FakeLLM, url: str) -> None:
    result = run("batch", "-", "--completions", "--url", url, stdin='"a"\n{"prompt": "b"}\n')
    assert result.returncode == 0, result.stderr
    assert sorted((c.endpoint, c.prompt) for c in fake.calls) == [
        ("completions", "a"),
        ("completions", "b"),
    ]


@pytest.mark.parametrize(
    ("stdin", "args", "message"),
    [
        ('"a"\n{oops\n', [], "- line 2: not JSON"),
        ('"a"\n\n{"text": "b"}\n', [], "- line 3: expected a JSON string"),
        ('[{"content": "no role"}]\n', [], "- line 1: expected"),
        ('{"prompt": [{"role": "user", "content": "a"}]}\n', ["--completions"], "line 1"),
    ],
)
def test_batch_bad_input_exits_2_before_any_request(
    fake: FakeLLM, url: str, stdin: str, args: list[str], message: str
) -> None:
    result = run("batch", "-", *args, "--url", url, stdin=stdin)
    assert result.returncode == 2
    assert message in result.stderr
    assert fake.requests == []


def test_batch_concurrency(url: str, fake: FakeLLM) -> None:
    together = threading.Barrier(3, timeout=30)  # breaks unless 3 requests are in flight at once
    fake.on_request = lambda request: together.wait()
    args = ["--concurrency", "3", "--dialect", "vllm", "--model", "fake-model", "--url", url]
    result = run("batch", "-", *args, stdin='"a"\n"b"\n"c"\n')
    assert result.returncode == 0, result.stderr
    assert fake.max_in_flight == 3


def test_batch_draws_a_progress_bar_on_a_terminal(url: str) -> None:
    terminal, stderr = pty.openpty()
    with subprocess.Popen(
        [str(SCRIPT), "batch", "-", "--url", url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
    ) as process:
        os.close(stderr)
        out, _ = process.communicate(b'"a"\n"b"\n', timeout=30)
    drawn = b""
    while True:
        try:
            chunk = os.read(terminal, 1024)
        except OSError:  # EIO: the terminal's other end is closed and everything was read
            break
        if not chunk:
            break
        drawn += chunk
    os.close(terminal)
    assert process.returncode == 0
    assert len(out.splitlines()) == 2
    assert re.search(rb"batch \[#{30}\] 2/2", drawn), drawn


# -- probe and models --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("server", "shown"),
    [
        ("vllm", ("vllm 0.33.0", "vllm")),
        ("vllm-guided", ("vllm 0.10.1.1", "vllm-guided")),
        ("llamacpp", ("llamacpp b11434-515e855", "llamacpp")),
        ("generic", ("unknown", "generic")),
    ],
)
def test_probe_shows_what_auto_detects(server: str, shown: tuple[str, str]) -> None:
    fake = FakeLLM(["m1", "m2"], server=server)
    with fake.serve() as url:
        result = run("probe", url)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        f"url      {url}\nserver   {shown[0]}\ndialect  {shown[1]}\nmodels   m1, m2\n"
    )
    assert fake.calls == []  # detection only: nothing generated


def test_probe_json(url: str) -> None:
    result = run("probe", url, "--json")
    assert result.returncode == 0, result.stderr
    assert msgspec.json.decode(result.stdout) == {
        "url": url,
        "kind": "vllm",
        "version": "0.11.0",  # the default FakeLLM's: a vLLM that reads every dialect's fields
        "dialect": "vllm",
        "models": ["fake-model"],
    }


def check_results(result: subprocess.CompletedProcess[str]) -> dict[str, dict[str, str]]:
    assert result.returncode == 0, result.stderr
    report = msgspec.json.decode(result.stdout)
    return {row.pop("constraint"): row for row in report["check"]["results"]}


def test_probe_check_finds_every_constraint_enforced(fake: FakeLLM, url: str) -> None:
    rows = check_results(run("probe", url, "--check", "--json"))
    assert {name: row["result"] for name, row in rows.items()} == {
        **dict.fromkeys(KINDS, "enforced"),
        REASONING: "holds",
    }
    assert rows["choice"]["sent_as"] == "structured_outputs.choice"
    assert {c.body["temperature"] for c in fake.calls} == {0}
    assert all(c.body["max_tokens"] <= 64 for c in fake.calls[:-1])
    assert fake.calls[-1].body["max_tokens"] == 256  # unbounded thinking: max_tokens bounds it


def test_probe_check_table(url: str) -> None:
    result = run("probe", url, "--check")
    assert result.returncode == 0, result.stderr
    table = result.stdout.split("\n\n", 1)[1].splitlines()
    assert table[0].split() == ["constraint", "sent", "as", "result"]
    assert table[1].split() == [
        "json",
        "schema",
        "structured_outputs.grammar",
        "(compact)",
        "enforced",
    ]
    assert "checked  chat with dialect vllm\n" in result.stdout


def test_probe_check_reports_output_that_does_not_validate_as_ignored(
    fake: FakeLLM, url: str
) -> None:
    fake.reply("It is sunny and warm today.")  # what a server ignoring the constraint writes
    result = run("probe", url, "--check")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("ignored by server (got 'It is sunny and warm today.')") == 7
    rows = check_results(run("probe", url, "--check", "--json"))
    assert {row["result"] for row in rows.values()} == {"ignored"}


def test_probe_check_vllm_guided_on_a_new_vllm_is_refused_unsent() -> None:
    """vLLM >= 0.12 reads only `structured_outputs` and ignores `guided_*` (HTTP 200): known
    from its version, so nothing is sent."""
    fake = FakeLLM(server="vllm")
    with fake.serve() as url:
        rows = check_results(run("probe", url, "--dialect", "vllm-guided", "--check", "--json"))
        table = run("probe", url, "--dialect", "vllm-guided", "--check")
    assert {name: row["result"] for name, row in rows.items()} == dict.fromkeys(
        (*KINDS, REASONING), "refused"
    )
    assert rows["choice"]["sent_as"] == "guided_choice"
    assert "accepts and ignores" in rows["choice"]["detail"]
    assert (table.returncode, table.stdout.count("ignored by this release of the server")) == (0, 7)
    assert fake.calls == []


def test_probe_check_cut_json_padded_with_whitespace_is_enforced(fake: FakeLLM, url: str) -> None:
    """Servers let a model pad JSON with whitespace, up to max_tokens: the start of a valid
    answer, cut, shows an enforced constraint; cut prose does not."""
    fake.reply("It is sunny and", finish_reason="length")
    fake.reply(  # the newest matching reply wins
        '{\n  \t  "zq_k7"  \n\t :',
        finish_reason="length",
        when=lambda request: request.constraint.kind == "json_schema",
    )
    rows = check_results(run("probe", url, "--check", "--json", "--whitespace", "server"))
    assert rows["json schema"]["result"] == "enforced"
    assert rows["regex"]["result"] == "ignored"


def test_probe_check_not_expressible_sends_nothing(fake: FakeLLM, url: str) -> None:
    rows = check_results(run("probe", url, "--check", "--json", "--dialect", "generic"))
    assert rows["grammar gbnf"]["result"] == rows["grammar lark"]["result"] == "unsupported"
    assert rows["grammar gbnf"]["sent_as"] == "-"
    assert rows["regex"] == {
        "sent_as": "response_format json_schema (emulated)",
        "result": "enforced",
        "detail": rows["regex"]["detail"],
    }
    assert len(fake.calls) == 4  # and none for the reasoning: no way to turn thinking on
    assert rows[REASONING]["result"] == "not applicable"
    assert "no request field for thinking=True" in rows[REASONING]["detail"]
    table = run("probe", url, "--check", "--dialect", "generic").stdout
    assert table.count("not expressible in this dialect") == 2
    assert "not applicable (no way to turn thinking on here)" in table


def test_probe_check_reasoning_holds_on_llamacpp() -> None:
    """On llama.cpp the check's choice goes after lmclient's reasoning block, with a thinking
    budget, which the server's own closing of the reasoning keeps short."""
    fake = FakeLLM(server="llamacpp")
    with fake.serve() as url:
        rows = check_results(run("probe", url, "--check", "--json"))
        table = run("probe", url, "--check").stdout
    row = rows[REASONING]
    assert (row["result"], row["detail"]) == ("holds", row["detail"])
    assert row["detail"] in ("xylo-7", "quib-3")
    assert row["sent_as"] == (
        "grammar (after reasoning), chat_template_kwargs.enable_thinking, reasoning_budget_tokens"
    )
    body = fake.calls[-1].body
    assert body["reasoning_budget_tokens"] == 32 and "think-answer ::=" in body["grammar"]
    assert re.search(r"after reasoning +grammar \(after reasoning\).* +holds\n", table), table


def test_probe_check_reasoning_says_an_answer_taken_for_reasoning() -> None:
    """A server whose reasoning parser took the answer for thinking: the row gives the
    error's advice (the parser, and what to change)."""
    fake = FakeLLM(server="llamacpp")
    fake.reply("", reasoning="xylo-7", when=lambda r: "chat_template_kwargs" in r.body)
    with fake.serve() as url:
        rows = check_results(run("probe", url, "--check", "--json"))
        fake.reply("", reasoning="xylo-7")  # every answer: a template that opens the reasoning
        every = check_results(run("probe", url, "--check", "--json"))
        table = run("probe", url, "--check")
    assert rows["choice"]["result"] == "enforced"
    row = rows[REASONING]
    assert row["result"] == "reasoning"
    assert "--reasoning-format" in row["detail"] and "without closing" in row["detail"]
    assert {every[name]["result"] for name in KINDS} == {"reasoning", "unsupported"}
    assert "thinking=False" in every["choice"]["detail"]
    assert table.returncode == 0  # said, not a failure of the command
    assert "the answer came back as reasoning (llama.cpp's --reasoning-format" in table.stdout


def test_probe_check_rejected(fake: FakeLLM, url: str) -> None:
    fake.fail(
        400, body="grammars are off", times=None, when=lambda r: r.constraint.kind == "grammar"
    )
    rows = check_results(run("probe", url, "--check", "--json"))
    assert rows["grammar gbnf"]["result"] == "rejected"
    assert rows["grammar gbnf"]["detail"] == "400: grammars are off"
    assert rows["json schema"]["result"] == "rejected"  # lmclient's compact JSON is a grammar
    assert rows["int"]["result"] == "enforced"
    table = run("probe", url, "--check").stdout
    assert table.count("rejected (400: grammars are off)") == 3
    served = check_results(run("probe", url, "--check", "--json", "--whitespace", "server"))
    assert served["json schema"]["result"] == "enforced"


def test_probe_check_completions(fake: FakeLLM, url: str) -> None:
    rows = check_results(run("probe", url, "--check", "--json", "--completions"))
    assert rows.pop(REASONING)["result"] == "not applicable"  # no chat template: no thinking
    assert {row["result"] for row in rows.values()} == {"enforced"}
    assert {c.endpoint for c in fake.calls} == {"completions"}


def test_probe_check_needs_a_model_when_several_are_served() -> None:
    fake = FakeLLM(["a", "b"])
    with fake.serve() as url:
        several = run("probe", url, "--check")
        chosen = check_results(run("probe", url, "--check", "--json", "--model", "b"))
    assert several.returncode == 2
    assert "serves 2 models (a, b); pass --model" in several.stderr
    assert len(chosen) == 7
    assert {c.model for c in fake.calls} == {"b"}


def test_probe_of_a_server_that_refuses_exits_1() -> None:
    fake = FakeLLM(server="generic")
    fake.add_route("GET", "/v1/models", {"error": "bad key"}, status=401)
    with fake.serve() as url:
        result = run("probe", url)
    assert (result.returncode, result.stdout) == (1, "")
    assert "AuthenticationError: 401" in result.stderr


def test_models() -> None:
    fake = FakeLLM(["a", "b"])
    with fake.serve() as url:
        plain = run("models", url)
        as_json = run("models", url, "--json")
        from_env = run("models", env={"LMCLIENT_BASE_URL": url})
    assert (plain.returncode, plain.stdout) == (0, "a\nb\n")
    assert (as_json.returncode, as_json.stdout) == (0, '["a","b"]\n')
    assert from_env.stdout == "a\nb\n"
    assert [r.endpoint for r in fake.requests] == ["models"] * 3  # no probes
