"""The sans-I/O core without sockets: response decoding, retry decisions (the error envelopes
themselves: test_status.py)."""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

import msgspec
import pytest

import lmclient
from lmclient import _call, _core, _params, _status, errors
from lmclient._dialects import PROBE_PATHS, Endpoint, ServerInfo
from lmclient._request import CallSettings, PreparedRequest
from tests.helpers import (
    EXAMPLES,
    LLAMACPP_LIVE,
    answered,
    call,
    chat_body,
    completion_body,
    make_core,
)


def finish(
    c: _call.Call, body: Any, status: int = 200, headers: dict[str, str] | None = None
) -> Any:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return c.finish(status, headers or {}, raw)


# -- an error status ------------------------------------------------------------------


def test_error_status_from_finish() -> None:
    with pytest.raises(errors.NotFoundError):
        finish(call(), {"error": {"message": "no"}}, status=404)


# -- success bodies -----------------------------------------------------------------------


def test_truncated_output_raises_truncated_error_with_text_and_usage() -> None:
    with pytest.raises(errors.TruncatedError) as info:
        finish(call(list[int]), chat_body("[1, 2", finish_reason="length"))
    assert info.value.text == "[1, 2"
    assert info.value.usage == lmclient.Usage(3, 5, 8)
    assert isinstance(info.value, errors.ValidationError)


def test_truncated_free_text_is_returned() -> None:
    response = finish(call(str), chat_body("Once upon", finish_reason="length"))
    assert response.value == "Once upon" and response.finish_reason == "length"


def test_invalid_output_raises_validation_error_with_path() -> None:
    class Person(msgspec.Struct):
        name: str
        age: int

    with pytest.raises(errors.ValidationError) as info:
        finish(call(Person), chat_body('{"name": "A", "age": "x"}'))
    exc = info.value
    assert exc.text == '{"name": "A", "age": "x"}'
    assert exc.output_type is Person
    assert "$.age" in exc.detail
    assert exc.attempts == [exc.text]


def test_an_invalid_answer_with_a_reask_left_finishes_as_the_next_call() -> None:
    """`finish` decides what follows an answer: with a re-ask left, the re-ask is its outcome
    (`Next`), carrying the error that rejected the answer (for the re-ask's hook event), not
    raised; the last answer's error is raised, unnamed by the request (`backoff`'s rule)."""
    invalid = chat_body("4.5")
    first = call(int, max_reasks=1)
    outcome = finish(first, invalid)
    assert isinstance(outcome, _call.Next)
    assert isinstance(outcome.invalid, errors.ValidationError) and outcome.invalid.text == "4.5"
    assert outcome.call.reasks == 1 and first.reasks == 0
    assert outcome.call.request.body is not None
    sent = json.loads(outcome.call.request.body)["messages"]
    assert sent[-2] == {"role": "assistant", "content": "4.5"}
    with pytest.raises(errors.ValidationError) as info:
        finish(outcome.call, invalid)
    assert info.value.attempts == ["4.5", "4.5"]
    with pytest.raises(errors.ValidationError) as again:
        outcome.call.backoff(info.value)
    assert again.value is info.value and not str(info.value).endswith("/chat/completions)")


def test_a_spent_budget_keeps_its_message_through_backoff() -> None:
    """The budget refusing a re-ask leaves `finish` as an error, through `backoff` like every
    error: its message is about the call's answers, not one request, and is not named."""
    spent = call(int, max_reasks=1, token_budget=8)  # the answer's usage: 8 tokens
    with pytest.raises(errors.TokenBudgetExceeded) as info:
        finish(spent, chat_body("4.5"))
    message = str(info.value)
    with pytest.raises(errors.TokenBudgetExceeded):
        spent.backoff(info.value)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("output_type", "text"),
    [(int, "4.5"), (bool, "True"), (lmclient.Regex(r"\d+"), "12a"), (lmclient.Choice(["a"]), "b")],
)
def test_scalars_and_markers_fail_closed(output_type: Any, text: str) -> None:
    with pytest.raises(errors.ValidationError):
        finish(call(output_type), chat_body(text))


def test_refusal_raises_refusal_error() -> None:
    with pytest.raises(errors.RefusalError) as info:
        finish(call(int), chat_body(None, refusal="I can't help with that."))
    assert info.value.refusal == "I can't help with that."


def test_content_filter_raises_refusal_error() -> None:
    with pytest.raises(errors.RefusalError):
        finish(call(), chat_body("", finish_reason="content_filter"))


def test_sglang_abort_is_a_server_error() -> None:
    with pytest.raises(errors.ServerError):
        finish(call(), chat_body("", finish_reason="abort"))


def test_empty_content_with_reasoning_says_why() -> None:
    with pytest.raises(errors.ValidationError, match="reasoning"):
        finish(call(int), chat_body(None, reasoning_content="Let me think", finish_reason="stop"))


def test_reasoning_is_carried_and_content_decoded() -> None:
    response = finish(call(int), chat_body("3", reasoning="1+2"))
    assert (response.value, response.reasoning) == (3, "1+2")


@pytest.mark.parametrize(
    "body",
    [b"not json", b"{}", b'{"choices": []}', b'{"choices": [{"message": 3}]}', b"\xff\xfe"],
)
def test_bad_bodies_raise_protocol_error_with_the_bytes(body: bytes) -> None:
    with pytest.raises(errors.ProtocolError) as info:
        finish(call(), body)
    assert info.value.body == body or "no choices" in str(info.value)


def test_completion_logprobs_are_normalised() -> None:
    body = completion_body("ab")
    body["choices"][0]["logprobs"] = {
        "tokens": ["a", "b"],
        "token_logprobs": [-0.5, None],
        "top_logprobs": [{"a": -0.5, "c": -1.0}, None],
    }
    response = finish(call(endpoint="completions"), body)
    assert response.logprobs == [
        lmclient.TokenLogprob(
            "a", -0.5, [lmclient.TopLogprob("a", -0.5), lmclient.TopLogprob("c", -1.0)]
        ),
        lmclient.TokenLogprob("b", float("-inf"), []),
    ]


def test_tgi_fixture_decodes() -> None:
    body = (EXAMPLES / "tgi_chat_completion_json_schema.json").read_bytes()
    response = answered(call(lmclient.JsonSchema({"type": "object"})), body)
    assert response.value["numCats"] == 2
    assert response.id == ""


def test_llamacpp_live_recordings_decode() -> None:
    """Every recorded 200 chat/completions body from the real llama.cpp server decodes; the two
    that loop until max_tokens (a URL's part, the question said again) are `RunawayError`s."""
    decoded = 0
    runaways = []
    for meta in sorted(LLAMACPP_LIVE.glob("*.meta.txt")):
        name = meta.name.removesuffix(".meta.txt")
        body_path = LLAMACPP_LIVE / f"{name}.response.json"
        request_path = LLAMACPP_LIVE / f"{name}.request.json"
        text = meta.read_text()
        if not body_path.exists() or not request_path.exists() or "200" not in text:
            continue
        request = json.loads(request_path.read_text())
        if request.get("stream") or ("messages" not in request and "prompt" not in request):
            continue
        endpoint: Endpoint = "chat" if "messages" in request else "completions"
        body = json.loads(body_path.read_text())
        if "choices" not in body:
            continue
        c = make_core().prepare("create", "Q", str, endpoint, {})
        try:
            response = answered(c, body_path.read_bytes())
        except errors.RunawayError as exc:
            assert exc.text == body["choices"][0]["message"]["content"]
            runaways.append(name)
            continue
        assert isinstance(response.value, str)
        decoded += 1
    assert decoded >= 5
    assert runaways == [
        "so_response_format_json_object_runaway_max256",
        "tools_ignored_gemma_template",
    ]


def test_models_list_decodes_to_the_ids() -> None:
    c = make_core().models_call()
    ids = c.finish(200, {}, (EXAMPLES / "llamacpp_v1_models.json").read_bytes())
    assert ids == ["../models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"]
    with pytest.raises(errors.ProtocolError):
        c.finish(200, {}, b'{"data": [{"name": "m"}]}')


def test_probes_decode_to_json_objects_and_the_listing_to_models() -> None:
    core = make_core()
    listing = core.listing_call()
    probes = [p for p in core.probe_calls(None) if p is not None]
    assert len(probes) == len(PROBE_PATHS)  # nothing named the server: every probe
    assert probes[0].finish(200, {}, b'{"version": "0.11.0"}') == {"version": "0.11.0"}
    with pytest.raises(errors.ProtocolError):
        probes[0].finish(200, {}, b'["not an object"]')
    with pytest.raises(errors.NotFoundError):
        probes[0].finish(404, {}, b"{}")
    assert listing.finish(200, {}, b'{"data": [{"id": "m"}]}') == ["m"]
    assert {p.settings.max_retries for p in [*probes, listing]} == {0}


@pytest.mark.parametrize(
    ("owners", "asked"),
    [
        (["vllm"], ["/version"]),
        (["sglang"], ["/server_info", "/get_server_info"]),
        (["llamacpp"], ["/props"]),
        (["vllm", "vllm"], ["/version"]),
        (["vllm", "sglang"], list(PROBE_PATHS)),  # cards that disagree name nothing
        (["organization-owner"], list(PROBE_PATHS)),
        ([7], list(PROBE_PATHS)),
    ],
)
def test_the_listing_names_the_probes_worth_asking(owners: list[Any], asked: list[str]) -> None:
    core = make_core()
    cards = [{"id": f"m{i}", "owned_by": owner} for i, owner in enumerate(owners)]
    listing = core.listing_call().finish(200, {}, json.dumps({"data": cards}).encode())
    calls = core.probe_calls(listing)
    assert {p for p, c in zip(PROBE_PATHS, calls, strict=True) if c is not None} == set(asked)


# -- retry decisions ----------------------------------------------------------------------


def _api(status: int, headers: dict[str, str] | None = None) -> errors.APIStatusError:
    return _status.api_error(status, headers or {}, b"{}")


@pytest.mark.parametrize("status", sorted(_call.RETRY_STATUSES))
def test_retryable_statuses_back_off_exponentially(status: int) -> None:
    c = call(max_retries=3)
    delays = [c.backoff(_api(status)) for _ in range(3)]
    for n, delay in enumerate(delays):
        assert 0.75 * 0.5 * 2**n <= delay <= 0.5 * 2**n
    with pytest.raises(errors.APIStatusError):
        c.backoff(_api(status))  # retries exhausted: the error itself
    assert c.retries == 3


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422, 501])
def test_client_errors_are_not_retried(status: int) -> None:
    exc = _api(status)
    with pytest.raises(errors.APIStatusError) as info:
        call().backoff(exc)
    assert info.value is exc


def test_validation_errors_are_not_retried_by_transport_layer() -> None:
    exc = errors.ValidationError("x", text="", output_type=int)
    with pytest.raises(errors.ValidationError):
        call().backoff(exc)


def test_connection_errors_are_retried() -> None:
    assert call().backoff(errors.APIConnectionError("reset")) <= 0.5
    assert call().backoff(errors.APITimeoutError("slow")) <= 0.5


def test_backoff_is_capped_at_8_seconds() -> None:
    c = call(max_retries=10)
    delays = [c.backoff(_api(503)) for _ in range(10)]
    assert max(delays) <= 8.0 and delays[-1] >= 6.0


def test_server_asked_delay_is_used_and_too_long_is_refused() -> None:
    assert call().backoff(_api(429, {"retry-after": "2"})) == 2.0
    long_wait = _api(429, {"retry-after": "3600"})
    assert isinstance(long_wait, errors.RateLimitError) and long_wait.retry_after == 3600
    with pytest.raises(errors.RateLimitError):
        call().backoff(long_wait)


def test_x_should_retry_overrides_the_status() -> None:
    with pytest.raises(errors.ServerError):
        call().backoff(_api(503, {"x-should-retry": "false"}))
    assert call().backoff(_api(400, {"x-should-retry": "true"})) > 0


def test_deadline_stops_retries_that_would_outlive_it() -> None:
    c = call(deadline=0.2)
    exc = _api(503, {"retry-after": "1"})
    with pytest.raises(errors.ServerError):
        c.backoff(exc)


def test_timeouts_shrink_to_the_deadline() -> None:
    c = call(deadline=2.0)
    t = c.start_attempt()
    assert t.read <= 2.0 and t.connect <= 2.0
    assert call().start_attempt() == _params.Timeouts(5.0, 600.0, 600.0, 600.0)
    assert call(timeout=3).start_attempt() == _params.Timeouts(3.0, 3.0, 3.0, 3.0)


# -- a plan: made once per output type, checked again for the server found -------------------------


class _Pet(msgspec.Struct):
    name: str


def test_the_usual_call_is_checked_again_once_the_server_is_known() -> None:
    """A call's plan is kept, but checked again for the server the probes find: a dialect
    forced before the probes is refused once they find a release that ignores its fields, and
    a new model gets its own body."""
    core = _core.ClientCore("http://h/v1", "m", dialect="vllm-guided")
    first = core.prepare("generate", "Q", int, "chat", {})
    assert first.request.body == core.prepare("generate", "Q", int, "chat", {}).request.body
    assert b"guided_regex" in (first.request.body or b"")
    core.server_info = ServerInfo("vllm", "vllm", "0.33.0", ["m"])
    with pytest.raises(lmclient.UnsupportedConstraintError, match="guided_regex"):
        core.prepare("generate", "Q", int, "chat", {})
    core = make_core()
    body = msgspec.json.decode(core.prepare("generate", "Q", _Pet, "chat", {}).request.body or b"")
    assert body["model"] == "m"
    core.model = "other"
    body = msgspec.json.decode(core.prepare("generate", "Q", _Pet, "chat", {}).request.body or b"")
    assert body["model"] == "other"
    assert body["messages"] == [{"role": "user", "content": "Q"}]


def test_each_parameter_is_one_entry_of_the_checks_table() -> None:
    """`check_params` looks each parameter up once in `_CHECKS`: every parameter has its entry,
    with its accepted types, and every value check belongs to a parameter; `_CALL_CHECKS` is
    the same without create()'s own."""
    assert set(_params._CHECKS) == set(_params.PARAMS)
    for name, (exact, accepted, least, value_problem) in _params._CHECKS.items():
        assert exact == frozenset(accepted) and accepted == _params.PARAMS[name], name
        assert least == _params._LEAST.get(name), name
        assert value_problem is _params._VALUE_CHECKS.get(name), name
    assert set(_params._VALUE_CHECKS) | set(_params._LEAST) <= set(_params.PARAMS)
    assert set(_params._VALUE_CHECKS).isdisjoint(_params._LEAST)  # one check a value
    assert set(_params._LEAST.values()) == set(_params._TOO_LOW)
    assert {
        name: check for name, check in _params._CHECKS.items() if name not in ("n", "probabilities")
    } == _params._CALL_CHECKS


def test_a_subclass_of_an_accepted_type_is_accepted_but_bool_for_a_number() -> None:
    """The exact types pass with one set look-up; any other value by `isinstance`, as before."""

    class Seed(int):
        pass

    _params.check_params("generate", {"seed": Seed(3), "headers": MappingProxyType({"a": "b"})})
    with pytest.raises(TypeError, match="max_tokens must be int, not bool"):
        _params.check_params("generate", {"max_tokens": True})
    with pytest.raises(TypeError, match="temperature must be int or float, not str"):
        _params.check_params("generate", {"temperature": "0.2"})


def test_settings_calls_and_lookups_are_built_by_name() -> None:
    """Two adjacent ints (max_retries, max_response_bytes) cannot be swapped on the way: the
    settings, calls and look-ups take keywords only."""
    timeouts = _params.Timeouts.from_user(None)
    with pytest.raises(TypeError):
        CallSettings(2, 0, 1024, timeouts, None)  # type: ignore[call-arg]
    settings = CallSettings(
        max_retries=2, max_reasks=0, max_response_bytes=1024, timeouts=timeouts, deadline=None
    )
    request = PreparedRequest("GET", "http://x/v1/models", [])
    with pytest.raises(TypeError):
        _call.Lookup(request, settings, None, 0, 0.0, _json)  # type: ignore[call-arg]
    assert settings.given({}) is settings  # a call without overrides shares the client's
    given = settings.given({"max_retries": 0, "timeout": 3, "deadline": 9.0})
    assert (given.max_retries, given.max_reasks, given.max_response_bytes) == (0, 0, 1024)
    assert (given.timeouts.read, given.deadline) == (3.0, 9.0)


def _json(body: bytes) -> Any:
    return body


def test_a_call_with_messages_and_sampling_takes_the_general_path() -> None:
    """The realistic call (a system and a user message, temperature, max_tokens) and the narrow
    one (a str prompt) are built by the same code: same fields, same settings."""
    core = make_core()
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}]
    narrow = core.prepare("generate", "Q", int, "chat", {})
    real = core.prepare("generate", messages, int, "chat", {"temperature": 0.2, "max_tokens": 9})
    assert real.settings is narrow.settings is core.settings
    body = msgspec.json.decode(real.request.body or b"")
    assert body["messages"] == messages and (body["temperature"], body["max_tokens"]) == (0.2, 9)
    narrow_body = msgspec.json.decode(narrow.request.body or b"")
    assert narrow_body["messages"] == [{"role": "user", "content": "Q"}]
    assert {
        k: v for k, v in body.items() if k not in ("messages", "temperature", "max_tokens")
    } == {k: v for k, v in narrow_body.items() if k not in ("messages", "max_tokens")}
