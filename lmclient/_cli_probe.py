"""``lmclient probe``: what dialect="auto" detects, and with ``--check``, which constraints the
server enforces, shown by one tiny request per constraint kind, and whether a constrained answer
survives the model's reasoning.

Imported only when the command runs: nothing else of the command line needs it.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING, Any

from . import errors
from ._cli_shared import EXIT_FAILED, EXIT_OK, UsageError, make_client, print_json, server_url

if TYPE_CHECKING:
    from ._client import Client
    from ._dialects import Endpoint, ServerInfo
    from ._params import CallParams
    from ._response import Response

__all__ = ["probe"]

# `probe --check`: one tiny request per constraint kind, with a prompt that invites prose and a
# constraint whose valid outputs a model essentially never writes unasked; so a value that
# validates shows the server enforced the constraint, and one that does not, that it ignored it.
CHECK_PROMPT = "Write one short sentence about the weather."
CHECK_MAX_TOKENS = 64  # room for every valid answer below several times over
# "probe" needs the server's answers to the probe paths only, never a model: this placeholder
# keeps the client from resolving one (which fails on servers serving several models).
_PROBE_ONLY_MODEL = "(probe only: no model needed)"

# The reasoning check (`_after_reasoning`): a choice with thinking on. Its thinking is bounded
# by a budget where the server takes one without a flag of its own (llama.cpp's closes the
# reasoning after that many tokens; vLLM's needs --reasoning-config), else by max_tokens.
REASONING_CHECK = "after reasoning"
CHECK_THINKING_BUDGET = 32
CHECK_THINKING_TOKENS = 256
_BUDGETED = frozenset({"llamacpp"})

_RESULT_WORDS = {
    "enforced": "enforced",
    "holds": "holds",
    "reasoning": "the answer came back as reasoning",
    "not applicable": "not applicable",
    "cut": "inconclusive: the thinking took every token",
    "ignored": "ignored by server",
    "unsupported": "not expressible in this dialect",
    "refused": "ignored by this release of the server (not sent)",
    "rejected": "rejected",
    "failed": "failed",
}


@dataclasses.dataclass(frozen=True)
class _Check:
    """One constraint kind to check. lmclient validates every output type but grammars (it does
    not parse them), so a grammar check carries its grammar's language as a regex.

    Every valid answer is a few tokens long, so an enforcing server never reaches max_tokens,
    except with JSON: servers let a model pad it with whitespace (a tiny model may do so until
    max_tokens). So a JSON check lists its valid answers without whitespace, and a cut output
    that is, without whitespace, the start of one of them shows an enforced constraint."""

    name: str
    output_type: Any
    language: str | None = None
    json_answers: tuple[str, ...] = ()

    def padded_prefix(self, text: str) -> bool:
        compact = "".join(text.split())
        return bool(compact) and any(answer.startswith(compact) for answer in self.json_answers)


@dataclasses.dataclass(frozen=True)
class _Row:
    constraint: str
    sent_as: str
    result: str  # a key of _RESULT_WORDS
    detail: str

    def words(self) -> str:
        if self.result in ("enforced", "unsupported", "refused", "holds", "cut"):
            return _RESULT_WORDS[self.result]
        if self.result == "not applicable":  # (the refusal, in full, is the JSON's detail)
            return "not applicable (no way to turn thinking on here)"
        if self.result == "ignored":
            shown = self.detail if len(self.detail) <= 40 else self.detail[:40] + "…"
            return f"ignored by server (got {shown!r})"
        return f"{_RESULT_WORDS[self.result]} ({self.detail})"


def _checks() -> list[_Check]:
    from ._output.markers import Choice, Grammar, JsonSchema, Regex

    schema = {
        "type": "object",
        "properties": {"zq_k7": {"type": "integer", "minimum": 0, "maximum": 9}},
        "required": ["zq_k7"],
        "additionalProperties": False,
    }
    return [
        _Check(
            "json schema",
            JsonSchema(schema),
            json_answers=tuple(f'{{"zq_k7":{digit}}}' for digit in range(10)),
        ),
        _Check("regex", Regex(r"[a-z]{3}-[0-9]{4}-zz")),
        _Check("choice", Choice(["xylo-7", "quib-3"])),
        _Check("grammar gbnf", Grammar('root ::= "qz-" [0-9] [0-9] [0-9]'), r"qz-[0-9]{3}"),
        _Check(
            "grammar lark",
            Grammar('start: "vx-418" | "vx-902"', syntax="lark"),
            r"vx-418|vx-902",
        ),
        _Check("int", int),
    ]


def probe(args: argparse.Namespace) -> int:
    """``lmclient probe``: what the server is; with ``--check``, what it enforces."""
    with make_client(args, _PROBE_ONLY_MODEL, "auto") as client:
        info = client.probe()  # exactly what a first call with dialect="auto" learns
        if not info.models:  # a probe never fails, but a refused key is worth an exit 1
            _refused_key(client)
    url = server_url(args.url, args.uds)
    report: dict[str, Any] = {
        "url": url,
        **({"uds": args.uds} if args.uds else {}),
        "kind": info.kind,
        "version": info.version,
        "dialect": info.dialect,
        "models": info.models,
    }
    rows: list[_Row] = []
    if args.check:
        dialect = info.dialect if args.dialect == "auto" else args.dialect
        model = args.model or _only_model(info)
        endpoint: Endpoint = "completions" if args.completions else "chat"
        with make_client(args, model, dialect) as client:
            compact = args.whitespace == "compact"
            rows = [_check(client, dialect, endpoint, check, compact) for check in _checks()]
            rows.append(_after_reasoning(client, dialect, endpoint, compact))
        report["check"] = {
            "dialect": dialect,
            "model": model,
            "endpoint": endpoint,
            "results": [dataclasses.asdict(row) for row in rows],
        }
    if args.json:
        print_json(report)
    else:
        _print_probe(report, rows)
    return EXIT_FAILED if any(row.result == "failed" for row in rows) else EXIT_OK


def _only_model(info: ServerInfo) -> str:
    if len(info.models) != 1:
        served = ", ".join(info.models) or "none"
        raise UsageError(f"the server serves {len(info.models)} models ({served}); pass --model")
    return info.models[0]


def _check(client: Client, dialect: str, endpoint: Endpoint, check: _Check, compact: bool) -> _Row:
    """Send one constrained request and classify what came back."""
    import re

    from ._dialects import get_dialect
    from ._output.types import compile_output
    from ._reasoning import IN_REASONING
    from .errors import (
        APIStatusError,
        ConstraintIgnoredError,
        LMClientError,
        TruncatedError,
        UnsupportedConstraintError,
        ValidationError,
    )

    try:
        plan = get_dialect(dialect).plan(
            compile_output(check.output_type), endpoint, compact=compact
        )
    except UnsupportedConstraintError as exc:
        return _Row(check.name, "-", "unsupported", str(exc))
    sent_as = ", ".join(_field_name(k, v) for k, v in plan.fields.items())
    sent_as += " (compact)" if plan.compact else " (emulated)" if plan.emulated else ""
    try:  # a dialect forced on a server release that ignores its fields is refused unsent
        response: Response[Any] = client.create(
            CHECK_PROMPT,
            check.output_type,
            endpoint=endpoint,
            temperature=0.0,
            max_tokens=CHECK_MAX_TOKENS,
            runaway="off",  # the constraint's fields alone, as a user's call sends them
        )
    except UnsupportedConstraintError as exc:
        return _Row(check.name, sent_as, "refused", str(exc))
    except TruncatedError as exc:
        found = "enforced" if check.padded_prefix(exc.text) else "ignored"
        return _Row(check.name, sent_as, found, exc.text)
    except ConstraintIgnoredError as exc:  # (a template that opens the reasoning in the prompt)
        if exc.why == IN_REASONING:
            return _Row(check.name, sent_as, "reasoning", exc.advice)
        return _Row(check.name, sent_as, "ignored", exc.text)
    except ValidationError as exc:
        return _Row(check.name, sent_as, "ignored", exc.text)
    except APIStatusError as exc:
        return _Row(check.name, sent_as, "rejected", f"{exc.status_code}: {exc.message}")
    except LMClientError as exc:
        return _Row(check.name, sent_as, "failed", f"{type(exc).__name__}: {exc}")
    if check.language is not None and re.fullmatch(check.language, response.text) is None:
        return _Row(check.name, sent_as, "ignored", response.text)
    return _Row(check.name, sent_as, "enforced", response.text)


def _after_reasoning(client: Client, dialect: str, endpoint: Endpoint, compact: bool) -> _Row:
    """Whether a constrained answer survives the model's reasoning: a choice asked for with
    thinking on holds (a valid value in the content), comes back as reasoning (the
    `ConstraintIgnoredError`'s advice: the server's reasoning parser and what to change), or
    the check is not applicable (no way to turn thinking on: the dialect, or the endpoint)."""
    from ._dialects import get_dialect
    from ._output.markers import Choice
    from ._output.types import compile_output
    from ._reasoning import IN_REASONING, reasoning_fields
    from .errors import (
        APIStatusError,
        ConstraintIgnoredError,
        LMClientError,
        TruncatedError,
        UnsupportedConstraintError,
        ValidationError,
    )

    output_type = Choice(["xylo-7", "quib-3"])
    params: CallParams = {"thinking": True, "temperature": 0.0, "runaway": "off"}
    if dialect in _BUDGETED:
        params["thinking_budget"] = CHECK_THINKING_BUDGET
    else:
        params["max_tokens"] = CHECK_THINKING_TOKENS
    controls = {k: v for k, v in params.items() if k in ("thinking", "thinking_budget")}
    try:
        spelt = reasoning_fields(dialect, endpoint, controls)
        plan = get_dialect(dialect).plan(compile_output(output_type), endpoint, compact=compact)
    except UnsupportedConstraintError as exc:
        return _Row(REASONING_CHECK, "-", "not applicable", str(exc))
    # what a first call learns: whether the chat template writes the markers (`thinks`)
    prefix = get_dialect(dialect).reasoning_prefix if client.probe().thinks is not False else None
    fields = [_field_name(k, v) for k, v in plan.fields.items()]
    fields = [f"{f} (after reasoning)" if f == prefix else f for f in fields]
    fields += [f"{k}.{next(iter(v))}" if isinstance(v, dict) else k for k, v in spelt.items()]
    sent_as = ", ".join(fields)
    try:
        response: Response[Any] = client.create(
            CHECK_PROMPT, output_type, endpoint=endpoint, **params
        )
    except UnsupportedConstraintError as exc:
        return _Row(REASONING_CHECK, sent_as, "refused", str(exc))
    except ConstraintIgnoredError as exc:
        if exc.why == IN_REASONING:
            return _Row(REASONING_CHECK, sent_as, "reasoning", exc.advice)
        return _Row(REASONING_CHECK, sent_as, "ignored", exc.text)
    except TruncatedError as exc:
        return _Row(REASONING_CHECK, sent_as, "cut", exc.text)
    except ValidationError as exc:
        return _Row(REASONING_CHECK, sent_as, "ignored", exc.text)
    except APIStatusError as exc:
        return _Row(REASONING_CHECK, sent_as, "rejected", f"{exc.status_code}: {exc.message}")
    except LMClientError as exc:
        return _Row(REASONING_CHECK, sent_as, "failed", f"{type(exc).__name__}: {exc}")
    return _Row(REASONING_CHECK, sent_as, "holds", response.text)


def _field_name(key: str, value: Any) -> str:
    """A request field as the capability matrix (docs/servers.md) names it: ``guided_regex``,
    ``structured_outputs.choice``, ``response_format json_schema``."""
    if key == "response_format":
        return f"{key} {value['type']}"
    if key == "structured_outputs":
        return f"{key}.{next(iter(value))}"
    return key


def _refused_key(client: Client) -> None:
    """Raise the model list's refusal of the key (401, 403): detection took the refusal for
    "not recognised", as a call would; the command is asked what the server is, and a key it
    refuses is the answer to give. Any other failure (a gateway without ``/v1/models``) is not."""
    try:
        client.models()
    except errors.APIStatusError as exc:
        if exc.status_code in (401, 403):
            raise


def _print_probe(report: dict[str, Any], rows: list[_Row]) -> None:
    version = f" {report['version']}" if report["version"] else ""
    lines = [
        ("url", report["url"] + (f" over {report['uds']}" if "uds" in report else "")),
        ("server", f"{report['kind']}{version}"),
        ("dialect", report["dialect"]),
        ("models", ", ".join(report["models"]) or "(none listed)"),
    ]
    if "check" in report:
        check = report["check"]
        lines.append(("checked", f"{check['endpoint']} with dialect {check['dialect']}"))
    for name, value in lines:
        print(f"{name:<9}{value}")
    if rows:
        table = [("constraint", "sent as", "result")]
        table += [(row.constraint, row.sent_as, row.words()) for row in rows]
        widths = [max(len(line[i]) for line in table) for i in range(2)]
        print()
        for a, b, c in table:
            print(f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c}")
