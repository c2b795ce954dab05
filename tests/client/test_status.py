"""An error response, read (`lmclient._status`): every server's envelope into the typed
exception, its headers into the delay the server asked for, a body in no known shape into an
error with its text, never a crash. The context-length wording of a 400: test_context_length.py."""

from __future__ import annotations

import email.utils
import json
import time
from typing import Any

import pytest

from lmclient import _status, errors
from tests.helpers import EXAMPLES

# -- recorded and documented envelopes ----------------------------------------------------------

ENVELOPES = [
    ("vllm_error_nested_0.10.1_plus.json", 400, errors.ContextLengthError, "maximum context"),
    ("vllm_error_flat_pre_0.10.1.json", 400, errors.ContextLengthError, "maximum context"),
    ("llamacpp_error_auth.json", 401, errors.AuthenticationError, "Invalid API Key"),
    ("llamacpp_error_invalid_grammar.json", 400, errors.BadRequestError, "Failed to parse grammar"),
    ("llamacpp_health_loading_503.json", 503, errors.ServerError, "Loading model"),
    ("lmstudio_error_json_object.json", 400, errors.BadRequestError, "must be 'json_schema'"),
    ("openai_error_invalid_schema.json", 400, errors.BadRequestError, "additionalProperties"),
    ("openai_error_unknown_parameter.json", 400, errors.BadRequestError, "Unknown parameter"),
]


@pytest.mark.parametrize(("name", "status", "cls", "message"), ENVELOPES)
def test_reference_error_envelopes(name: str, status: int, cls: type, message: str) -> None:
    body = (EXAMPLES / name).read_bytes()
    exc = _status.api_error(status, {}, body)
    assert type(exc) is cls
    assert message in exc.message
    assert exc.status_code == status
    assert exc.body == json.loads(body)


def test_openai_envelope_fields() -> None:
    exc = _status.api_error(
        400,
        {"x-request-id": "req-1"},
        (EXAMPLES / "openai_error_unknown_parameter.json").read_bytes(),
    )
    assert (exc.type, exc.code, exc.param, exc.request_id) == (
        "invalid_request_error",
        "unknown_parameter",
        "response_format.schema",
        "req-1",
    )


@pytest.mark.parametrize(
    ("status", "body", "cls", "message"),
    [
        (
            401,
            {"error": "Unauthorized"},
            errors.AuthenticationError,
            "Unauthorized",
        ),  # vLLM --api-key
        (
            422,
            {"error": "Input validation error", "error_type": "validation"},
            errors.BadRequestError,
            "Input validation",
        ),  # TGI
        (
            424,
            {"error": "Request failed during generation", "error_type": "generation"},
            errors.ServerError,
            "during generation",
        ),  # TGI
        (
            429,
            {"error": "Model is overloaded", "error_type": "overloaded"},
            errors.RateLimitError,
            "overloaded",
        ),  # TGI
        (
            400,
            {
                "object": "error",
                "message": "bad",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            },
            errors.BadRequestError,
            "bad",
        ),  # SGLang
        (
            404,
            {
                "error": {
                    "message": "The model `x` does not exist.",
                    "type": "NotFoundError",
                    "param": "model",
                    "code": 404,
                }
            },
            errors.NotFoundError,
            "does not exist",
        ),
        (
            403,
            {"error": {"code": 403, "message": "nope", "type": "permission_error"}},
            errors.PermissionDeniedError,
            "nope",
        ),
        (
            422,
            {"detail": [{"loc": ["body", "model"], "msg": "field required"}]},
            errors.BadRequestError,
            "field required",
        ),  # FastAPI
        (500, {"detail": "Internal Server Error"}, errors.ServerError, "Internal Server Error"),
        (
            501,
            {
                "error": {
                    "message": "chat not supported",
                    "type": "NotImplementedError",
                    "code": 501,
                }
            },
            errors.ServerError,
            "chat not supported",
        ),
        (418, {"unexpected": True}, errors.APIStatusError, "HTTP 418"),
    ],
)
def test_every_server_envelope(status: int, body: Any, cls: type, message: str) -> None:
    exc = _status.api_error(status, {}, json.dumps(body).encode())
    assert type(exc) is cls
    assert message in exc.message


def test_non_json_error_body_keeps_the_text() -> None:
    exc = _status.api_error(502, {}, b"<html>Bad Gateway</html>")
    assert isinstance(exc, errors.ServerError)
    assert "Bad Gateway" in exc.message
    assert exc.body == "<html>Bad Gateway</html>"


# -- the status picks the class ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, errors.BadRequestError),
        (422, errors.BadRequestError),  # FastAPI's validation error
        (401, errors.AuthenticationError),
        (403, errors.PermissionDeniedError),
        (404, errors.NotFoundError),
        (429, errors.RateLimitError),
        (424, errors.ServerError),  # TGI: generation error
        (500, errors.ServerError),
        (503, errors.ServerError),
        (599, errors.ServerError),
        (409, errors.APIStatusError),
    ],
)
def test_the_status_picks_the_class(status: int, cls: type[errors.APIStatusError]) -> None:
    exc = _status.api_error(status, {}, b'{"error": {"message": "m"}}')
    assert type(exc) is cls
    assert (exc.status_code, exc.message) == (status, "m")


def test_an_empty_or_blank_body_names_the_status() -> None:
    assert _status.api_error(503, {}, b"").message == "HTTP 503"
    assert _status.api_error(502, {}, b"  \n").message == "HTTP 502"
    assert _status.api_error(500, {}, b"[1, 2]").message == "HTTP 500"  # JSON, but no envelope


def test_a_long_text_body_is_cut_in_the_message_and_kept_whole_in_the_body() -> None:
    text = "x" * 2000
    exc = _status.api_error(500, {}, text.encode())
    assert (
        exc.message == "x" * 500 + "... (1500 more characters: the whole text is the error's body)"
    )
    assert exc.body == text


def test_a_body_nested_too_deep_is_read_as_text() -> None:
    """msgspec's decoder never sees it (`lmclient._output.depth`): the error carries the text."""
    body = b"[" * 10_000 + b"]" * 10_000
    exc = _status.api_error(500, {}, body)
    assert isinstance(exc, errors.ServerError)
    assert exc.body == body.decode()


def test_bytes_that_are_not_utf8_are_replaced_not_raised() -> None:
    exc = _status.api_error(502, {}, b"bad \xff gateway")
    assert exc.message == "bad \ufffd gateway"


def test_the_headers_are_kept_and_read() -> None:
    headers = {"x-request-id": "r-9", "retry-after": "4", "x-should-retry": "false"}
    exc = _status.api_error(503, headers, b"{}")
    assert exc.headers == headers
    assert (exc.request_id, exc.retry_after, exc.should_retry) == ("r-9", 4.0, False)
    assert _status.api_error(503, {"x-should-retry": "true"}, b"{}").should_retry is True
    assert _status.api_error(503, {"x-should-retry": "maybe"}, b"{}").should_retry is None
    assert _status.api_error(503, {}, b"{}").request_id is None


# -- error_info: every envelope ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"error": {"message": "m", "type": "t", "code": "c", "param": "p"}},
            _status.ErrorInfo("m", "t", "c", "p"),
        ),
        ({"error": {"message": 7, "code": 400}}, _status.ErrorInfo("7", None, 400, None)),
        ({"error": {"message": "m", "code": True, "type": 3}}, _status.ErrorInfo("m")),
        ({"error": "text", "error_type": "validation"}, _status.ErrorInfo("text", "validation")),
        ({"error": "text", "error_type": 5}, _status.ErrorInfo("text")),
        ({"message": "flat", "code": 400, "object": "error"}, _status.ErrorInfo("flat", None, 400)),
        ({"detail": "Not Found"}, _status.ErrorInfo("Not Found")),
        (
            {"detail": [{"loc": ["body"], "msg": "m"}]},
            _status.ErrorInfo('[{"loc":["body"],"msg":"m"}]'),
        ),
        ({"error": {"code": 1}}, None),  # no message anywhere
        ({"error": None, "message": None}, None),
        ({}, None),
        ("text", None),
        ([{"error": "x"}], None),
        (None, None),
    ],
)
def test_error_info_reads_every_envelope(body: Any, expected: _status.ErrorInfo | None) -> None:
    assert _status.error_info(body) == expected


# -- the delay a server asks for -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after": "3"}, 3.0),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_headers(headers: dict[str, str], expected: float | None) -> None:
    assert _status.retry_after(headers) == expected


def test_retry_after_http_date() -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    delay = _status.retry_after({"retry-after": when})
    assert delay is not None and 25 <= delay <= 31


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "-5"}, 0.0),
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after-ms": "soon", "retry-after": "2"}, 2.0),  # a bad ms falls back
        ({"retry-after": "Thu, 01 Jan 1970 00:00:00 GMT"}, 0.0),  # a date past
        ({"retry-after": ""}, None),
    ],
)
def test_retry_after_is_never_negative_and_falls_back(
    headers: dict[str, str], expected: float | None
) -> None:
    assert _status.retry_after(headers) == expected
