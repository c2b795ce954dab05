"""The ``lmclient`` command: typed generation, batches and server checks from a shell.

::

    lmclient generate "Is the sky blue?" --choice yes no
    lmclient batch prompts.jsonl --schema person.json > people.jsonl
    lmclient probe http://127.0.0.1:8000/v1 --check
    lmclient models http://127.0.0.1:8000/v1

Exit status: 0 success, 1 a request failed (API, connection or validation error; the message is
on stderr), 2 usage error. Building the parser needs only the standard library; what the
subcommands use is imported when they run, so ``--help`` costs no more than the package import.
The API key is never printed: not as a ``--help`` default, not in output, not in errors.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

from ._cli_shared import EXIT_FAILED, EXIT_OK, UsageError, make_client, print_json

if TYPE_CHECKING:
    from ._client import Client
    from ._dialects import Endpoint
    from ._progress import Progress

__all__ = ["main"]

EXIT_INTERRUPTED = 130  # the shell's convention for Ctrl-C (128 + SIGINT)

# The names `--dialect` accepts; a test keeps them equal to ("auto", *lmclient.DIALECTS), so that
# building the parser does not import the dialects module.
DIALECT_NAMES = (
    "auto",
    "vllm",
    "vllm-guided",
    "sglang",
    "llamacpp",
    "tgi",
    "generic",
    "ollama",
    "lmstudio",
    "sglang-gateway",
    "openai",
)
_TYPES = ("int", "float", "bool", "json")


# -- the parser ------------------------------------------------------------------------------


def _examples(*lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line; only argparse is needed to build it."""
    parser = argparse.ArgumentParser(
        prog="lmclient",
        description="Typed generation and server checks for OpenAI-compatible LLM servers.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_examples(
            'lmclient generate "Is the sky blue?" --choice yes no',
            "lmclient batch prompts.jsonl --schema person.json > people.jsonl",
            "lmclient probe http://127.0.0.1:8000/v1 --check",
            "lmclient models http://127.0.0.1:8000/v1",
        )
        + "\n\nexit status: 0 success, 1 a request failed, 2 usage error",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    key = argparse.ArgumentParser(add_help=False)
    key.add_argument(
        "--api-key",
        metavar="KEY",
        help="API key (default: $LMCLIENT_API_KEY, then $OPENAI_API_KEY; prefer those: a flag "
        "is visible to other users in the process list)",
    )
    key.add_argument(
        "--uds",
        metavar="PATH",
        help="connect to the server's Unix socket (the URL then defaults to "
        "http://localhost/v1 and gives only the Host header and the path)",
    )
    server = argparse.ArgumentParser(add_help=False, parents=[key])
    server.add_argument(
        "--url",
        metavar="URL",
        help="the API root, e.g. http://127.0.0.1:8000/v1 "
        "(default: $LMCLIENT_BASE_URL, then $OPENAI_BASE_URL)",
    )
    _add_model_and_dialect(server)

    output = argparse.ArgumentParser(add_help=False)
    kinds = output.add_argument_group("output type (at most one; default: text)")
    exclusive = kinds.add_mutually_exclusive_group()
    exclusive.add_argument("--schema", metavar="FILE|JSON", help="a JSON schema, inline or a file")
    exclusive.add_argument("--regex", metavar="PATTERN", help="the text must fully match PATTERN")
    exclusive.add_argument(
        "--choice",
        metavar="OPTION",
        nargs="+",
        action="append",
        help="one of these strings (repeat the flag, or separate them with commas: a,b)",
    )
    exclusive.add_argument("--grammar", metavar="FILE", help="a grammar file (see --syntax)")
    exclusive.add_argument("--type", choices=_TYPES, help="a JSON scalar, or any JSON value")
    kinds.add_argument(
        "--syntax", choices=("gbnf", "lark"), help="the --grammar file's syntax (default: gbnf)"
    )
    sampling = output.add_argument_group("request")
    sampling.add_argument(
        "--completions", action="store_true", help="use /v1/completions instead of chat"
    )
    sampling.add_argument("--max-tokens", type=_positive_int, metavar="N")
    sampling.add_argument("--temperature", type=float, metavar="T")
    sampling.add_argument("--seed", type=int, metavar="N")
    _add_whitespace(sampling)

    generate = commands.add_parser(
        "generate",
        parents=[server, output],
        help="generate one value of a type and print it",
        description="Generate one value and print it: text as is, any other type as JSON.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_examples(
            'lmclient generate "Is the sky blue?" --choice yes no',
            'lmclient generate "Invent a person." --schema person.json --full',
            'echo "2 + 2 =" | lmclient generate --completions --type int',
            'lmclient generate "Tell a story." --stream --max-tokens 200',
        ),
    )
    generate.add_argument(
        "prompt",
        nargs="?",
        metavar="PROMPT",
        help="the prompt; read from stdin when omitted or '-' (trailing newlines dropped)",
    )
    generate.add_argument("--stream", action="store_true", help="print the text as it is generated")
    generate.add_argument(
        "-n",
        type=_positive_int,
        metavar="N",
        help="N choices, each validated, printed one JSON value a line",
    )
    generate.add_argument(
        "--full",
        action="store_true",
        help="print the whole response as JSON (values, texts, usage, raw body...)",
    )
    generate.set_defaults(run=_generate, parser=generate)

    batch = commands.add_parser(
        "batch",
        parents=[server, output],
        help="run a JSONL file of prompts, write a JSONL file of results",
        description="Run every prompt of a JSONL file (a JSON string, or an object with a "
        '"prompt": a string or a list of chat messages, a line) at once, and write one result '
        'a line, in input order: {"value": ...} or {"error": {"type", "message", ...}}. '
        "A progress bar is drawn on stderr when it is a terminal; the exit status is 1 when "
        "any prompt failed.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_examples(
            "lmclient batch prompts.jsonl --schema person.json > people.jsonl",
            "lmclient batch - --choice yes no --concurrency 32 < questions.jsonl",
        ),
    )
    batch.add_argument("input", nargs="?", metavar="IN.jsonl", help="the prompts; '-' reads stdin")
    batch.add_argument(
        "-o", "--output", metavar="OUT.jsonl", help="where to write results (default: stdout)"
    )
    batch.add_argument(
        "--concurrency",
        type=_positive_int,
        default=16,
        metavar="N",
        help="requests in flight at once (default: 16)",
    )
    batch.set_defaults(run=_batch, parser=batch)

    probe = commands.add_parser(
        "probe",
        parents=[key],
        help="show what kind of server this is; --check: which constraints it enforces",
        description='Print what dialect="auto" detects: the server kind, version, dialect and '
        "models. With --check, send one tiny request per constraint kind and report whether "
        'the server enforced it, or returned output that does not validate ("ignored by '
        'server"), or rejected it, or whether the dialect cannot express it at all (or its '
        "fields are ones this release of the server ignores: then nothing is sent).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_examples(
            "lmclient probe http://127.0.0.1:8000/v1",
            "lmclient probe http://127.0.0.1:8000/v1 --check",
            "lmclient probe http://127.0.0.1:8000/v1 --check --dialect vllm-guided --json",
        ),
    )
    _add_url_argument(probe)
    _add_model_and_dialect(probe)
    probe.add_argument("--check", action="store_true", help="test each constraint kind")
    probe.add_argument(
        "--completions", action="store_true", help="check /v1/completions instead of chat"
    )
    probe.add_argument("--json", action="store_true", help="print one JSON object")
    _add_whitespace(probe)
    probe.set_defaults(run=_probe, parser=probe)

    models = commands.add_parser(
        "models",
        parents=[key],
        help="list the models a server serves",
        description="Print the ids of the models the server serves (GET /v1/models), one a line.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_examples("lmclient models http://127.0.0.1:8000/v1"),
    )
    _add_url_argument(models)
    models.add_argument("--json", action="store_true", help="print a JSON array")
    models.set_defaults(run=_models, parser=models)
    return parser


def _add_model_and_dialect(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", metavar="NAME", help="the model (default: the only one the server serves)"
    )
    parser.add_argument(
        "--dialect",
        choices=DIALECT_NAMES,
        default="auto",
        metavar="NAME",
        help=f"how to send constraints: {', '.join(DIALECT_NAMES)} "
        "(default: auto, which asks the server what it is)",
    )


def _add_url_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "url",
        nargs="?",
        metavar="URL",
        help="the API root, e.g. http://127.0.0.1:8000/v1 "
        "(default: $LMCLIENT_BASE_URL, then $OPENAI_BASE_URL)",
    )


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _version() -> str:
    from . import __version__

    return __version__


# -- entry point -----------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (argparse exits 2 itself on bad flags)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from .errors import LMClientError

    try:
        status: int = args.run(args)
        sys.stdout.flush()  # here, where a closed pipe is handled, rather than at exit
    except UsageError as exc:
        command: argparse.ArgumentParser = args.parser
        command.error(str(exc))  # exits 2
    except LMClientError as exc:
        _fail(exc)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`lmclient batch ... | head`): stop quietly, and point stdout at
        # /dev/null so that flushing it at exit does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    return status


def _fail(exc: BaseException) -> None:
    """One line on stderr: the error's class (which says what failed) and its message."""
    print(f"lmclient: {type(exc).__name__}: {exc}", file=sys.stderr)


# -- generate --------------------------------------------------------------------------------


def _generate(args: argparse.Namespace) -> int:
    if args.stream and (args.n or args.full):
        raise UsageError("--stream cannot be combined with -n or --full")
    prompt = _prompt_and_choices(args)
    output_type, as_text = _output_type(args)
    endpoint: Endpoint = "completions" if args.completions else "chat"
    params = _params(args)
    with make_client(args, args.model, args.dialect) as client:
        if args.stream:
            return _stream(client, prompt, output_type, endpoint, params)
        if args.n is not None:
            params["n"] = args.n
        response = client.create(prompt, output_type, endpoint=endpoint, **params)
    if args.full:  # the body as JSON, not as the bytes the Response keeps
        import msgspec

        full = msgspec.to_builtins(response)
        del full["body"]
        print_json({**full, "raw": response.raw})
    elif len(response.values) > 1:  # JSON lines: a multi-line text stays on one line
        for value in response.values:
            print_json(value)
    else:
        _print_value(response.value, as_text)
    return EXIT_OK


def _stream(
    client: Client, prompt: str, output_type: Any, endpoint: Endpoint, params: dict[str, Any]
) -> int:
    """Print each delta as it arrives; validate the whole once it has ended."""
    out = sys.stdout
    with client.stream(prompt, output_type, endpoint=endpoint, **params) as stream:
        for delta in stream:
            out.write(delta)
            out.flush()
        out.write("\n")
        out.flush()
        stream.read()  # validates: a ValidationError exits 1 after the text was shown
    return EXIT_OK


def _prompt_and_choices(args: argparse.Namespace) -> str:
    """The prompt, wherever it was written: a ``--choice`` list takes every word up to the next
    option, so a prompt written after one is that list's last word. Without PROMPT before the
    options, a prompt piped on stdin comes first (``--choice yes no`` then lists two options,
    as it always did); else the last word of the last ``--choice`` list of two or more is it."""
    groups = args.choice
    if args.prompt is None and groups and any(len(group) > 1 for group in groups):
        piped = None if sys.stdin.isatty() else sys.stdin.read().rstrip("\n")
        if piped:
            args.choice = _options(groups)
            return piped
        args.prompt = next(group for group in reversed(groups) if len(group) > 1).pop()
    if groups is not None:
        args.choice = _options(groups)
    return _prompt(args.prompt)


def _input_and_choices(args: argparse.Namespace) -> str:
    """`batch`'s IN.jsonl, wherever it was written (after a ``--choice`` list, its last word)."""
    groups = args.choice
    if args.input is None and groups and any(len(group) > 1 for group in groups):
        args.input = next(group for group in reversed(groups) if len(group) > 1).pop()
    if groups is not None:
        args.choice = _options(groups)
    if args.input is None:
        raise UsageError("the following arguments are required: IN.jsonl")
    source: str = args.input
    return source


def _options(groups: list[list[str]]) -> list[str]:
    """The options of every ``--choice`` list, each word split at its commas."""
    return [option for group in groups for word in group for option in word.split(",")]


def _prompt(given: str | None) -> str:
    if given is None or given == "-":
        if sys.stdin.isatty():
            raise UsageError("no prompt: give PROMPT, or pipe it on stdin")
        given = sys.stdin.read().rstrip("\n")
    if not given:
        raise UsageError("the prompt is empty")
    return given


def _output_type(args: argparse.Namespace) -> tuple[Any, bool]:
    """The output type the flags ask for, checked now (a bad regex or schema is a usage error,
    found before any request), and whether its values are text to print as is."""
    from ._output.markers import Choice, Grammar, JsonSchema, Regex
    from ._output.types import compile_output

    if args.syntax is not None and args.grammar is None:
        raise UsageError("--syntax needs --grammar")
    try:
        output_type: Any
        if args.schema is not None:
            output_type = JsonSchema(_schema(args.schema))
        elif args.regex is not None:
            output_type = Regex(args.regex)
        elif args.choice is not None:
            output_type = Choice(args.choice)
        elif args.grammar is not None:
            text = _read_file(args.grammar, "grammar")
            output_type = Grammar(text, syntax=args.syntax or "gbnf")
        elif args.type is not None:
            output_type = {"int": int, "float": float, "bool": bool, "json": Any}[args.type]
        else:
            output_type = str
        compile_output(output_type)  # compiles a JsonSchema's schema: errors now
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    as_text = args.schema is None and args.type is None
    return output_type, as_text


def _schema(given: str) -> Any:
    """``--schema``: JSON when it looks like a JSON object, else the name of a file of JSON."""
    import msgspec

    inline = given.lstrip().startswith("{")
    text = given if inline else _read_file(given, "schema")
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError as exc:
        where = "--schema" if inline else given
        raise UsageError(f"{where}: not JSON ({exc})") from None


def _read_file(path: str, what: str) -> str:
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except OSError as exc:
        raise UsageError(f"cannot read the {what} file: {exc}") from None


def _params(args: argparse.Namespace) -> dict[str, Any]:
    given = {"max_tokens": args.max_tokens, "temperature": args.temperature, "seed": args.seed}
    return {name: value for name, value in given.items() if value is not None}


def _add_whitespace(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument(
        "--whitespace",
        choices=("compact", "server"),
        default="compact",
        help="JSON with no whitespace, by lmclient's grammar (default), or the server's own",
    )


def _print_value(value: Any, as_text: bool) -> None:
    if as_text:
        print(value)
    else:
        print_json(value)


# -- batch -----------------------------------------------------------------------------------


def _batch(args: argparse.Namespace) -> int:
    from ._progress import Progress

    source = _input_and_choices(args)
    output_type, _ = _output_type(args)
    prompts = _read_prompts(source, completions=args.completions)
    with make_client(args, args.model, args.dialect) as client:
        out = sys.stdout if args.output is None else _open_output(args.output)
        try:
            with Progress(len(prompts), label="batch") as progress:
                many = client.complete_many if args.completions else client.generate_many
                results = many(
                    prompts,
                    output_type,
                    concurrency=args.concurrency,
                    return_exceptions=True,
                    on_result=_InOrder(out, progress),
                    **_params(args),
                )
        finally:
            if out is not sys.stdout:
                out.close()
    failed = sum(isinstance(result, BaseException) for result in results)
    if failed:
        print(f"lmclient: {failed} of {len(results)} prompts failed", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _open_output(path: str) -> IO[str]:
    try:
        return open(path, "w", encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write the output file: {exc}") from None


def _read_prompts(source: str, *, completions: bool) -> list[Any]:
    """Every prompt of a JSONL input, all checked before the first request is sent."""
    import msgspec

    text = sys.stdin.read() if source == "-" else _read_file(source, "input")
    wanted = "a string" if completions else "a string or a list of messages with a 'role'"
    prompts = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = msgspec.json.decode(line)
        except msgspec.DecodeError as exc:
            raise UsageError(f"{source} line {number}: not JSON ({exc})") from None
        prompt = item.get("prompt") if isinstance(item, dict) else item
        if not (_is_text(prompt) or (not completions and _is_messages(prompt))):
            raise UsageError(
                f'{source} line {number}: expected a JSON string or {{"prompt": ...}} with {wanted}'
            )
        prompts.append(prompt)
    return prompts


def _is_text(prompt: Any) -> bool:
    return isinstance(prompt, str) and bool(prompt)


def _is_messages(prompt: Any) -> bool:
    return (
        isinstance(prompt, list)
        and bool(prompt)
        and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in prompt)
    )


class _InOrder:
    """``on_result`` for a batch: counts each result on the progress bar, and writes result i
    as soon as results 0..i are all in. The output is in input order, and a long batch's
    finished beginning is written while the rest runs (so an interrupted batch keeps it)."""

    def __init__(self, out: IO[str], progress: Progress) -> None:
        self._out = out
        self._progress = progress
        self._waiting: dict[int, Any] = {}
        self._next = 0

    def __call__(self, index: int, result: Any) -> None:
        self._progress(index, result)
        self._waiting[index] = result
        while self._next in self._waiting:
            print_json(_result_line(self._waiting.pop(self._next)), self._out)
            self._next += 1


def _result_line(result: Any) -> dict[str, Any]:
    from .errors import APIStatusError, ValidationError

    if not isinstance(result, BaseException):
        return {"value": result}
    error: dict[str, Any] = {"type": type(result).__name__, "message": str(result)}
    if isinstance(result, APIStatusError):
        error["status_code"] = result.status_code
    if isinstance(result, ValidationError):
        error["text"] = result.text
    return {"error": error}


# -- probe and models ------------------------------------------------------------------------


def _probe(args: argparse.Namespace) -> int:
    from ._cli_probe import probe  # only this command needs it

    return probe(args)


def _models(args: argparse.Namespace) -> int:
    with make_client(args, None, "auto") as client:  # listing models needs no dialect: no probes
        names = client.models()
    if args.json:
        print_json(names)
    else:
        for name in names:
            print(name)
    return EXIT_OK
