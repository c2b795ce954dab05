"""The per-call parameters (`lmclient._params`): the TypedDicts and the run-time table agree, a
misspelt or mistyped parameter is a `TypeError` and a value out of range a `ValueError` before
anything is sent, `Timeouts` is what ``timeout=`` means per phase, and the environment's base
URL and key are read in their order."""

from __future__ import annotations

import math
from typing import Any

import httpx
import pytest

import lmclient
from lmclient import _core, _params
from lmclient._params import CallParams, CreateParams, Timeouts, check_params
from lmclient.testing import FakeLLM


def test_call_params_typeddict_matches_the_runtime_table() -> None:
    typed = set(CreateParams.__annotations__) | set(CallParams.__annotations__)
    assert typed == set(_params.PARAMS)


def test_file_params_are_the_call_params_that_travel_in_a_body() -> None:
    """A batch file's lines carry no model, headers, request id nor trace context; nor the
    runaway watch, as no one reads a line's answer as it comes."""
    left_out = set(CallParams.__annotations__) - set(_params.FileParams.__annotations__)
    assert left_out == {"model", "request_id", "headers", "traceparent", "tracestate", "runaway"}


# -- check_params ---------------------------------------------------------------------------------


def test_every_parameter_of_the_table_is_accepted_with_a_good_value() -> None:
    tool = lmclient.Tool.from_function(_weather)
    good: dict[str, Any] = {
        "max_tokens": 8,
        "temperature": 0,
        "top_p": 0.5,
        "stop": ["\n", "END"],
        "seed": 1,
        "logprobs": True,
        "top_logprobs": 0,
        "presence_penalty": -1.5,
        "frequency_penalty": 2,
        "timeout": httpx.Timeout(3.0),
        "deadline": 9.5,
        "max_retries": 0,
        "max_reasks": 0,
        "reask_history": "last",
        "token_budget": 1,
        "extra_body": {"x": 1},
        "thinking": False,
        "thinking_budget": 0,
        "reasoning_effort": "low",
        "tools": (tool,),
        "tool_choice": tool,
        "parallel_tool_calls": True,
        "model": "m",
        "headers": {"x-a": "b"},
        "request_id": "r1",
        "priority": -3,
        "cache_salt": "salt",
        "session_id": "agent-7",
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "tracestate": "k=v",
        "runaway": lmclient.Runaway(repeats=4),
    }
    assert set(good) == set(_params.PARAMS) - {"n", "probabilities"}
    check_params("create", good)
    check_params("create", {"n": 2, "probabilities": True}, allow_n=True)


def _weather(city: str) -> str:
    """The weather in a city."""
    return city


def test_none_means_not_given() -> None:
    check_params("generate", dict.fromkeys(_params.CALL_PARAMS))


def test_a_misspelt_parameter_is_a_type_error_naming_it() -> None:
    with pytest.raises(
        TypeError, match=r"generate\(\) got an unexpected keyword argument 'tempreature'"
    ):
        check_params("generate", {"tempreature": 0.5})


def test_n_is_a_parameter_of_create_only() -> None:
    with pytest.raises(TypeError, match=r"'n' \(n is a parameter of create\(\) only\)"):
        check_params("generate", {"n": 2})


def test_a_misspelt_parameter_is_told_the_one_it_may_mean() -> None:
    with pytest.raises(TypeError) as info:
        check_params("generate", {"max_token": 8})
    assert str(info.value) == (
        "generate() got an unexpected keyword argument 'max_token' (did you mean 'max_tokens'?)"
    )
    with pytest.raises(TypeError) as info:
        check_params("generate", {"zzz": 1})
    assert str(info.value) == "generate() got an unexpected keyword argument 'zzz'"


def test_every_parameter_told_what_to_do_instead_is_one_lmclient_does_not_take() -> None:
    """An entry of the table that lmclient took would never be reached (create() only: but
    for create)."""
    assert set(_params._INSTEAD).isdisjoint(_params._CALL_CHECKS)
    assert set(_params._INSTEAD) & set(_params.PARAMS) == set(_params._CREATE_ONLY)


def test_the_longest_timeout_and_deadline_and_no_limit_are_taken() -> None:
    """A year, to the second, and math.inf (no limit), as a number and in each phase."""
    year = _params.MAX_SECONDS
    assert year == 365 * 24 * 3600
    check_params("generate", {"timeout": year, "deadline": float(year)})
    check_params("generate", {"timeout": math.inf, "deadline": math.inf})
    check_params("generate", {"timeout": httpx.Timeout(year, read=math.inf)})
    assert Timeouts.from_user(year) == Timeouts(year, year, year, year)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("max_tokens", 1.5, "max_tokens must be int, not float"),
        ("max_tokens", True, "max_tokens must be int, not bool"),  # a bool is an int to Python
        ("temperature", "0.2", "temperature must be int or float, not str"),
        ("temperature", False, "temperature must be int or float, not bool"),
        ("logprobs", 1, "logprobs must be bool, not int"),
        ("stop", {"x"}, "stop must be str or list or tuple, not set"),
        ("headers", [("a", "b")], "headers must be Mapping, not list"),
        ("tool_choice", 3, "tool_choice must be str or Tool, not int"),
    ],
)
def test_a_mistyped_parameter_is_a_type_error(name: str, value: Any, message: str) -> None:
    with pytest.raises(TypeError, match=rf"^create\(\): {message}$"):
        check_params("create", {name: value}, allow_n=True)


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("stop", ["a", 1], "must be a str or list of str"),
        ("max_tokens", 0, "must be at least 1"),
        ("n", 0, "must be at least 1"),
        ("top_logprobs", -1, "must not be negative"),
        ("max_retries", -1, "must not be negative"),
        ("max_reasks", -2, "must not be negative"),
        ("token_budget", 0, "must be at least 1"),
        ("reask_history", "all", "must be 'full' or 'last'"),
        ("thinking_budget", -1, "must not be negative"),
        ("tools", ["weather"], "must be a list of lmclient.Tool"),
        ("tool_choice", "any", "must be 'auto', 'required', 'none' or one of the tools"),
        ("reasoning_effort", "max", "must be one of 'low', 'medium', 'high'"),
        ("deadline", 0, "must be a positive number of seconds"),
        ("timeout", -1.0, "must be a positive number of seconds"),
        ("timeout", math.nan, "must be a positive number of seconds"),
        ("deadline", math.nan, "must be a positive number of seconds"),
        (
            "timeout",
            httpx.Timeout(0.0),
            "must bound each phase by a positive number of seconds, or None",
        ),
        (
            "timeout",
            httpx.Timeout(5.0, read=-1.0),
            "must bound each phase by a positive number of seconds, or None",
        ),
        (
            "timeout",
            httpx.Timeout(5.0, write=math.nan),
            "must bound each phase by a positive number of seconds, or None",
        ),
        ("timeout", 1e10, "must be at most 31536000 seconds (a year), or math.inf for no limit"),
        ("deadline", 1e300, "must be at most 31536000 seconds (a year), or math.inf for no limit"),
        (
            "deadline",
            31536001,
            "must be at most 31536000 seconds (a year), or math.inf for no limit",
        ),
        (
            "timeout",
            httpx.Timeout(5.0, pool=1e10),
            "must bound each phase by at most 31536000 seconds (a year), or None for no limit",
        ),
    ],
)
def test_a_value_out_of_range_is_a_value_error_showing_it(
    name: str, value: Any, problem: str
) -> None:
    with pytest.raises(ValueError, match=r"^create\(\): ") as info:
        check_params("create", {name: value}, allow_n=True)
    assert str(info.value) == f"create(): {name} {problem}, not {value!r}"


def test_a_serving_field_is_checked_by_its_own_rule() -> None:
    """`lmclient._serving` holds the rules; the problem comes back as a `ValueError`."""
    with pytest.raises(ValueError, match=r"^create\(\): request_id "):
        check_params("create", {"request_id": ""})


def test_a_bad_header_is_refused_without_showing_its_value() -> None:
    """The headers may hold a credential: the message names the header, not the mapping."""
    with pytest.raises(ValueError, match="header") as info:
        check_params("create", {"headers": {"authorization": "Bearer sk-secret\n"}})
    assert "sk-secret" not in str(info.value)


# -- Timeouts -------------------------------------------------------------------------------------


def test_the_default_timeouts() -> None:
    assert Timeouts.from_user(None) == Timeouts(5.0, 600.0, 600.0, 600.0)


def test_one_number_bounds_every_phase() -> None:
    assert Timeouts.from_user(3) == Timeouts(3.0, 3.0, 3.0, 3.0)
    assert Timeouts.from_user(0.5) == Timeouts(0.5, 0.5, 0.5, 0.5)


def test_an_httpx_timeout_keeps_its_phases_and_none_is_no_bound() -> None:
    given = httpx.Timeout(None, connect=1.0, read=2.0)
    assert Timeouts.from_user(given) == Timeouts(1.0, 2.0, math.inf, math.inf)


def test_capped_shortens_each_phase_to_what_remains() -> None:
    assert Timeouts(5.0, 600.0, 1.0, 600.0).capped(2.0) == Timeouts(2.0, 2.0, 1.0, 2.0)


def test_as_httpx_writes_no_bound_as_none() -> None:
    assert Timeouts(1.0, math.inf, 3.0, math.inf).as_httpx() == {
        "connect": 1.0,
        "read": None,
        "write": 3.0,
        "pool": None,
    }


# -- the environment ------------------------------------------------------------------------------


def test_the_base_url_argument_then_lmclient_s_variable_then_openai_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LMCLIENT_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert _params.env_base_url(None) is None
    monkeypatch.setenv("OPENAI_BASE_URL", "http://openai/v1")
    assert _params.env_base_url(None) == "http://openai/v1"
    monkeypatch.setenv("LMCLIENT_BASE_URL", "http://lmclient/v1")
    assert _params.env_base_url(None) == "http://lmclient/v1"
    assert _params.env_base_url("http://given/v1") == "http://given/v1"


def test_the_api_key_argument_then_lmclient_s_variable_then_openai_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LMCLIENT_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert _params.env_api_key(None) is None
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    assert _params.env_api_key(None) == "sk-openai"
    monkeypatch.setenv("LMCLIENT_API_KEY", "sk-lmclient")
    assert _params.env_api_key(None) == "sk-lmclient"
    assert _params.env_api_key("sk-given") == "sk-given"


def test_as_given_tells_whether_every_parameter_goes_in_the_body_as_it_is() -> None:
    """The usual call's parameters go in the body as they are (the request is built with one
    ``dict.update`` and the call keeps the client's settings); a ``None``, a parameter respelt
    per endpoint or one lmclient reads itself does not (`check_params` only checks)."""
    assert _params.as_given({"temperature": 0.2, "max_tokens": 8}) is True
    assert _params.as_given({}) is True
    assert _params.as_given({"temperature": None}) is False
    assert _params.as_given({"stop": ["x"], "seed": 1}) is False
    assert _params.as_given({"max_retries": 0, "top_p": 0.9}) is False
    # create()'s own parameters left at None are taken by every method, and not sent
    assert _params.as_given({"n": None, "probabilities": None}) is False
    assert _params.as_given({"n": 2}) is True
    assert _params.AS_GIVEN.isdisjoint(_params.CALL_PARAMS)
    assert _params.AS_GIVEN.isdisjoint(_core._CHECKED)  # `ClientCore._checked` relies on it


@pytest.mark.parametrize(
    ("params", "defaults", "shape"),
    [
        ({}, {}, "given"),
        ({"temperature": 0.2, "max_tokens": 8}, {}, "given"),
        ({"temperature": 0.2}, {"seed": 1}, "spelt"),
        ({"stop": ["x"]}, {}, "spelt"),
        ({"temperature": None}, {}, "spelt"),
        ({"max_retries": 0}, {}, "spelt"),
        ({"model": "m2"}, {}, "special"),
        ({}, {"extra_body": {"k": 1}}, "special"),
        ({"request_id": "r"}, {}, "special"),
    ],
)
def test_the_shape_of_a_call_is_told_once_by_its_checks(
    params: dict[str, Any], defaults: dict[str, Any], shape: str
) -> None:
    """`ClientCore._checked` tells how the parameters go in the body (`Shape`), the defaults'
    included, so that building the request asks no more."""
    core = _core.ClientCore("http://127.0.0.1:9/v1", "m", dialect="vllm", defaults=defaults)
    assert core._checked("generate", "Q", str, "chat", params).shape == shape


@pytest.mark.parametrize(
    "timeout", [math.nan, httpx.Timeout(0.0), httpx.Timeout(1.0, pool=-1.0)], ids=repr
)
def test_a_client_refuses_a_timeout_that_would_not_bound_its_waits(timeout: Any) -> None:
    """NaN would wait forever, a negative phase end every wait at once, and httpx's 0 means
    "at once" where a missing limit means none: refused when the client is made."""
    with pytest.raises(ValueError, match=r"^Client\(\): timeout must "):
        lmclient.Client("http://127.0.0.1:9/v1", "m", dialect="vllm", timeout=timeout)


def test_an_httpx_timeout_with_a_phase_left_unbounded_is_taken() -> None:
    timeout = httpx.Timeout(5.0, read=None)
    check_params("generate", {"timeout": timeout})
    assert Timeouts.from_user(timeout).read == math.inf


# -- timeouts a client and a call take, over real sockets -----------------------------------------

_TOO_LONG = [
    {"timeout": 1e10},  # a sync socket's settimeout raised a bare OverflowError mid-call
    {"deadline": 1e10},
    {"timeout": math.inf, "deadline": 1e10},
    {"timeout": httpx.Timeout(5.0, read=1e10)},
]
_LONGEST = [
    {"timeout": 365 * 24 * 3600, "deadline": 365 * 24 * 3600},
    {"timeout": math.inf, "deadline": 365 * 24 * 3600},
    {"timeout": httpx.Timeout(None)},
]


@pytest.mark.parametrize("given", _TOO_LONG, ids=repr)
def test_a_sync_client_and_call_refuse_a_timeout_longer_than_a_year(
    given: dict[str, Any], fake: FakeLLM, url: str
) -> None:
    """Refused before any request, in place of an `OverflowError` from the socket."""
    with pytest.raises(ValueError, match=r"^Client\(\): (timeout|deadline) must .*at most"):
        lmclient.Client(url, "m", dialect="vllm", **given)
    calling = pytest.raises(ValueError, match=r"^generate\(\): (timeout|deadline) must .*at most")
    with lmclient.Client(url, "m", dialect="vllm") as client, calling:
        client.generate("Q", **given)
    assert fake.requests == []


@pytest.mark.parametrize("given", _TOO_LONG, ids=repr)
async def test_an_async_client_and_call_refuse_a_timeout_longer_than_a_year(
    given: dict[str, Any], fake: FakeLLM, url: str
) -> None:
    """asyncio would wait that long; refused all the same, as the sync client refuses it."""
    with pytest.raises(ValueError, match=r"^Client\(\): (timeout|deadline) must .*at most"):
        lmclient.AsyncClient(url, "m", dialect="vllm", **given)
    async with lmclient.AsyncClient(url, "m", dialect="vllm") as client:
        with pytest.raises(ValueError, match=r"^generate\(\): (timeout|deadline) must .*at most"):
            await client.generate("Q", **given)
    assert fake.requests == []


@pytest.mark.parametrize("given", _LONGEST, ids=repr)
def test_the_longest_timeout_taken_waits_in_a_sync_call(
    given: dict[str, Any], fake: FakeLLM, url: str
) -> None:
    fake.reply("yes")
    with lmclient.Client(url, "m", dialect="vllm", **given) as client:
        assert client.generate("Q") == "yes"
        assert client.generate("Q", **given) == "yes"


@pytest.mark.parametrize("given", _LONGEST, ids=repr)
async def test_the_longest_timeout_taken_waits_in_an_async_call(
    given: dict[str, Any], fake: FakeLLM, url: str
) -> None:
    fake.reply("yes")
    async with lmclient.AsyncClient(url, "m", dialect="vllm", **given) as client:
        assert await client.generate("Q") == "yes"
        assert await client.generate("Q", **given) == "yes"


# -- what an OpenAI SDK user's parameters are told ------------------------------------------------

_UNEXPECTED = "generate() got an unexpected keyword argument"
_OPENAI_SHAPED = [
    (
        "response_format",
        {"type": "json_object"},
        f"{_UNEXPECTED} 'response_format' (pass the output type as the second argument instead,"
        " as in generate(prompt, Person); lmclient.JsonSchema(schema) for a JSON schema,"
        " typing.Any for any JSON)",
    ),
    (
        "messages",
        [{"role": "user", "content": "Hi"}],
        f"{_UNEXPECTED} 'messages' (pass the messages as the prompt instead, as in"
        " generate([{'role': 'user', 'content': 'Hi'}]))",
    ),
    (
        "max_completion_tokens",
        8,
        f"{_UNEXPECTED} 'max_completion_tokens' (lmclient spells it max_tokens=)",
    ),
    ("max_output_tokens", 8, f"{_UNEXPECTED} 'max_output_tokens' (lmclient spells it max_tokens=)"),
    (
        "stream",
        True,
        f"{_UNEXPECTED} 'stream' (call stream(prompt, ...) instead, a context manager)",
    ),
    (
        "functions",
        [{"name": "f"}],
        f"{_UNEXPECTED} 'functions' (pass tools=[lmclient.Tool(...)] instead)",
    ),
    (
        "function_call",
        "auto",
        f"{_UNEXPECTED} 'function_call' (pass tool_choice= instead: 'auto', 'required', 'none'"
        " or one of the tools)",
    ),
    ("extra_headers", {"x-a": "b"}, f"{_UNEXPECTED} 'extra_headers' (lmclient spells it headers=)"),
    *[
        (
            name,
            {},
            f"{_UNEXPECTED} {name!r} (pass the output type as the second argument instead:"
            " lmclient.JsonSchema(...), Regex(...), Choice([...]) or Grammar(...))",
        )
        for name in ("guided_json", "guided_regex", "guided_choice", "guided_grammar")
    ],
    *[
        (
            name,
            1,
            f"{_UNEXPECTED} {name!r} (pass it in extra_body={{{name!r}: ...}}, which lmclient"
            " sends as given)",
        )
        for name in ("top_k", "min_p", "repetition_penalty")
    ],
    ("n", 2, f"{_UNEXPECTED} 'n' (n is a parameter of create() only)"),
    (
        "probabilities",
        True,
        f"{_UNEXPECTED} 'probabilities' (probabilities is a parameter of create() only)",
    ),
]


def test_every_parameter_told_what_to_do_instead_is_tested() -> None:
    assert {name for name, _, _ in _OPENAI_SHAPED} == set(_params._INSTEAD)


@pytest.mark.parametrize(("name", "value", "message"), _OPENAI_SHAPED, ids=lambda v: str(v)[:30])
def test_an_openai_shaped_parameter_is_told_the_lmclient_way(
    name: str, value: Any, message: str, fake: FakeLLM, url: str
) -> None:
    with lmclient.Client(url, "m", dialect="vllm") as client, pytest.raises(TypeError) as info:
        client.generate("Q", **{name: value})
    assert str(info.value) == message
    assert fake.requests == []


async def test_an_async_call_and_create_are_told_the_same(fake: FakeLLM, url: str) -> None:
    async with lmclient.AsyncClient(url, "m", dialect="vllm") as client:
        with pytest.raises(TypeError) as info:
            await client.create("Q", response_format={"type": "json_object"})  # type: ignore[call-overload]
        assert str(info.value).startswith(
            "create() got an unexpected keyword argument 'response_format' (pass the output type"
        )
        with pytest.raises(TypeError) as info:
            await client.generate("Q", max_completion_tokens=8)  # type: ignore[call-overload]
    assert str(info.value) == (
        "generate() got an unexpected keyword argument 'max_completion_tokens'"
        " (lmclient spells it max_tokens=)"
    )
    assert fake.requests == []


_MESSAGES = [{"role": "user", "content": "Q"}]
_AS_PROMPT = (
    "got an unexpected keyword argument 'messages' (pass the messages as the prompt instead, as"
    " in generate([{'role': 'user', 'content': 'Hi'}]))"
)


def test_a_call_written_the_openai_way_without_a_prompt_is_told_the_lmclient_way(
    fake: FakeLLM, url: str
) -> None:
    """``create(messages=..., response_format=...)``, no prompt: the messages are the prompt
    (it was Python's bare "missing 1 required positional argument: 'prompt'")."""
    with lmclient.Client(url, "m", dialect="vllm") as client:
        for method in (client.create, client.generate, client.stream):
            with pytest.raises(TypeError) as info:
                method(messages=_MESSAGES, response_format={"type": "json_object"})  # type: ignore[call-overload]
            assert str(info.value) == f"{method.__name__}() {_AS_PROMPT}"
        with pytest.raises(TypeError, match=r"^a prompt is required: prompt must be a str, "):
            client.generate()  # type: ignore[call-overload]
        with pytest.raises(TypeError, match=r"^complete\(\) takes a str prompt$"):
            client.complete()  # type: ignore[call-overload]
    assert fake.requests == []


async def test_an_async_call_written_the_openai_way_is_told_the_same(
    fake: FakeLLM, url: str
) -> None:
    async with lmclient.AsyncClient(url, "m", dialect="vllm") as client:
        with pytest.raises(TypeError) as info:
            await client.create(messages=_MESSAGES)  # type: ignore[call-overload]
        assert str(info.value) == f"create() {_AS_PROMPT}"
        with pytest.raises(TypeError, match=r"^a prompt is required: "):
            await client.generate()  # type: ignore[call-overload]
    assert fake.requests == []
