"""Batch files: the OpenAI Batch API's JSONL, which `vllm run-batch` and hosted batch services
read, so a job that outgrows one online server runs offline with the same output types.

`write_requests` writes, for each prompt, exactly the request body a `Client` with the same
model and dialect would send; `read_results` validates the results file back into values, in
input order, keeping each line's failure as its exception. The dialect is explicit: there is no
server to probe.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import msgspec

from . import errors
from ._call import Call, Next
from ._core import ClientCore
from ._dialects import Endpoint
from ._output.depth import DECODE_ERRORS
from ._status import api_error

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._params import FileParams

__all__ = ["read_results", "write_requests"]

_URLS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
_NOT_IN_A_FILE = (
    *("timeout", "deadline", "max_retries", "max_reasks", "reask_history", "token_budget"),
    *("model", "headers", "traceparent", "tracestate"),  # a request line is a body only
    "request_id",  # the line's custom_id names it; one id on every line would name none
)


class _Request(msgspec.Struct):
    custom_id: str
    method: str
    url: str
    body: msgspec.Raw


class _Response(msgspec.Struct):
    status_code: int = 200
    body: msgspec.Raw = msgspec.Raw(b"null")


class _Result(msgspec.Struct):
    custom_id: str
    response: _Response | None = None
    error: Any = None


def _core(model: str, dialect: str) -> ClientCore:
    if dialect == "auto":
        raise ValueError("batch files need an explicit dialect: there is no server to probe")
    return ClientCore("http://batch.invalid/v1", model, dialect=dialect)


def write_requests(
    path: str | os.PathLike[str],
    prompts: Iterable[Any],
    output_type: Any = str,
    *,
    model: str,
    dialect: str,
    endpoint: Endpoint = "chat",
    **params: Unpack[FileParams],
) -> int:
    """Write one Batch API request line per prompt (``custom_id`` is ``request-<index>``); an
    item may be a ``(prompt, output_type)`` pair. Returns how many lines were written. Every
    item is checked before the file is opened."""
    misplaced = [name for name in _NOT_IN_A_FILE if name in params]
    if misplaced:
        raise TypeError(f"write_requests() got {misplaced[0]!r}, which a batch file cannot carry")
    core = _core(model, dialect)
    items = core.batch("write_requests", prompts, output_type, endpoint, dict(params), 1)
    encode = msgspec.json.Encoder().encode
    with open(path, "wb") as out:
        for index, (prompt, tp) in enumerate(items):
            call = core.prepare(
                "write_requests", prompt, tp, endpoint, dict(params), reading="file"
            )
            assert call.request.body is not None
            line = _Request(
                f"request-{index}", "POST", _URLS[endpoint], msgspec.Raw(call.request.body)
            )
            out.write(encode(line) + b"\n")
    return len(items)


def read_results(
    path: str | os.PathLike[str],
    output_type: Any = str,
    *,
    dialect: str,
    endpoint: Endpoint = "chat",
    expected: int | None = None,
) -> list[Any]:
    """The validated value of every request, in input order, or the `LMClientError` of its line:
    an error line, a failed status, invalid output, or no result at all (a malformed line cannot
    be matched to its request; its line number is named in the error of every unmatched one).

    ``output_type`` is one type for every request, or a ``list`` with one type per request (for
    a batch written with ``(prompt, output_type)`` pairs). ``expected`` is the number of
    requests written (`write_requests` returns it)."""
    core = _core("batch", dialect)
    per_item = output_type if isinstance(output_type, list) else None
    if per_item is not None and expected is None:
        expected = len(per_item)
    calls: dict[Any, Call] = {}

    def call_for(index: int) -> Call:
        tp = output_type if per_item is None else per_item[index]
        key = id(tp)
        if key not in calls:
            calls[key] = core.prepare("read_results", "", tp, endpoint, {}, reading="file")
        return calls[key]

    found: dict[int, Any] = {}
    malformed: list[int] = []
    decoder = msgspec.json.Decoder(_Result)
    with open(path, "rb") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                result = decoder.decode(line)
                index = int(result.custom_id.removeprefix("request-"))
                call = call_for(index)
            except (*DECODE_ERRORS, ValueError, IndexError):
                malformed.append(number)
                continue
            found[index] = _outcome(call, result)
    count = expected if expected is not None else max(found, default=-1) + 1
    missing = "; malformed lines: " + ", ".join(map(str, malformed)) if malformed else ""
    return [
        found[i] if i in found else errors.ProtocolError(f"no result for request-{i}{missing}")
        for i in range(count)
    ]


def _outcome(call: Call, result: _Result) -> Any:
    if result.error is not None:
        error = result.error if isinstance(result.error, dict) else {"message": str(result.error)}
        code = error.get("code")
        status = code if isinstance(code, int) and 400 <= code <= 599 else 500
        return api_error(status, {}, msgspec.json.encode({"error": error}))
    if result.response is None:
        return errors.ProtocolError(f"{result.custom_id} has neither a response nor an error")
    try:
        outcome = call.finish(result.response.status_code, {}, bytes(result.response.body))
    except errors.LMClientError as exc:
        return exc
    # a file's answer is the last: its call has no re-asks (max_reasks 0) nor probabilities
    assert not isinstance(outcome, Next)
    return outcome.values[0]
