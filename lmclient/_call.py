"""A call's lifecycle: its attempts, retries and re-asks, and the decoding of what came back
into a `Response`, the request to send next (`Next`: a re-ask, a continuation) or a typed
error. `ClientCore.prepare` makes a `Call`; each client's one send loop (`_run`) drives it with
its transport: `start_attempt`, then `finish` (the outcome), or `backoff` (after an error: the
pause before retrying, or the error raised), and `aborting` (after an error or an interruption
that left the server generating: the request that asks it to stop, SGLang's ``/abort_request``).
A `Lookup` is the same for the set-up requests (the model list, the probes) and the aborts, whose
answers are plain values.

An abort, with its precedent: one attempt within 1 s, waited for, its failure logged: the
server stops anyway once it notices the closed connection (SGLang polls every 4 s), so the
abort only shortens that, and must never hold up nor replace the error the program sees.

Retries, with their precedent: 2 retries with 0.5 s · 2^n backoff capped at 8 s, 25 % jitter,
on 408/409/429/5xx but 501: the OpenAI SDK's policy, which users of these servers already live
with.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, final

import httpx
import msgspec

from . import errors
from ._confidence import Reading, continuation, read, split
from ._dialects import DIALECTS, Endpoint, Plan
from ._log import log
from ._output.depth import body_decoder
from ._output.thinking import past_space, split_reasoning
from ._output.turn import OPEN
from ._output.types import OutputSpec
from ._reasoning import IN_REASONING, answer_in_reasoning
from ._request import CallSettings, PreparedRequest, Timeouts
from ._response import Response
from ._runaway import Found, Guard, Runaway, find, json_path, padded, whitespace
from ._secrets import scrub, scrub_text, secrets_of
from ._status import api_error
from ._tools import Tool, ToolCall, calls_in_text, check_choice, decode_calls, tool_table
from ._turn import Turn
from ._unapplied import unapplied
from ._usage import Many, check_budget, counted
from ._wire.protocol import (
    ChatCompletion,
    Completion,
    TokenLogprob,
    Usage,
    WireToolCall,
    add_usage,
)

if TYPE_CHECKING:
    from ._stream_state import StreamState

__all__ = [
    "ABORT_TIMEOUT",
    "Abort",
    "Attempts",
    "Call",
    "Listing",
    "Lookup",
    "Next",
    "abort_failed",
    "name_request",
    "new_rid",
    "stopped",
]

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
MAX_RETRY_AFTER = 60.0  # a server asking for a longer pause gets an error, not a hung call
# An abort (`Call.abort_of`) is one attempt, bounded: a server that is up answers it at once, and
# a cancelled task or an interrupted program waits for it (`Client._abort`).
ABORT_TIMEOUT = 1.0
_ABORT = {"timeout": ABORT_TIMEOUT, "deadline": ABORT_TIMEOUT, "max_retries": 0}

V = TypeVar("V")


class Attempts(msgspec.Struct, kw_only=True):
    """One request's attempts: the timeouts of the next one, when to give up, whether to retry.
    The state every request has; `Call` and `Lookup` add what their answers need. A msgspec
    Struct: one is made for every call, and its C constructor costs far less than a Python
    ``__init__``."""

    request: PreparedRequest
    settings: CallSettings  # the client's, with the call's parameters over them
    deadline_at: float | None  # the deadline as a time of `time.monotonic`
    retries: int = 0
    attempt_started: float = 0.0  # when the attempt began (`start_attempt`), for its DEBUG line

    def start_attempt(self) -> Timeouts:
        """Start an attempt: its clock (for its DEBUG line, `log_attempt`), and its timeouts,
        shortened to what is left of the deadline."""
        self.attempt_started = now = time.monotonic()
        if self.deadline_at is None:
            return self.settings.timeouts
        remaining = self.deadline_at - now
        if remaining <= 0:
            raise errors.APITimeoutError("the call's deadline expired")
        return self.settings.timeouts.capped(remaining)

    def backoff(self, exc: errors.LMClientError) -> float:
        """The pause before retrying after ``exc``; re-raises ``exc`` if it must not be retried,
        its message then naming the request it came from (``... (GET /v1/models)``): a call
        may send set-up requests before its own, and an error must say which one failed. Every
        error of a call passes here first: the client's key leaves the server's text in it
        before it is logged or raised (`scrub`)."""
        scrub(exc, self.request.headers)
        try:
            return self._backoff(exc)
        except errors.LMClientError as raised:
            name_request(raised, self.request)
            raise

    def _backoff(self, exc: errors.LMClientError) -> float:
        """The pause before retrying after ``exc``; re-raises ``exc`` if it must not be retried:
        an error status the server did not mark retryable, or any other `APIError` than a
        connection error or timeout (a `ProtocolError`: the same request gets the same bytes)."""
        if self.retries >= self.settings.max_retries:
            raise exc
        if isinstance(exc, errors.APIStatusError):
            forced = exc.should_retry
            retryable = exc.status_code in RETRY_STATUSES if forced is None else forced
            if not retryable or (exc.retry_after is not None and exc.retry_after > MAX_RETRY_AFTER):
                raise exc
            delay = exc.retry_after
        elif isinstance(exc, errors.APIConnectionError):
            delay = None
        else:
            raise exc
        if delay is None:
            base = min(0.5 * 2**self.retries, 8.0)
            delay = base * (1 - 0.25 * random.random())
        if self.deadline_at is not None and time.monotonic() + delay >= self.deadline_at:
            raise exc  # the pause alone would outlive the deadline: report what happened
        self.retries += 1
        log.warning(
            "retry %d of %d for %s %s in %.2f s after %s: %s",
            self.retries,
            self.settings.max_retries,
            self.request.method,
            httpx.URL(self.request.url).path,
            delay,
            type(exc).__name__,
            exc,
        )
        return delay

    def aborting(self, exc: BaseException) -> Lookup[None] | None:
        """The request that asks the server to stop generating the answer ``exc`` left
        unread, if any (`Call.aborting`); a set-up request has none."""
        return None

    def log_attempt(self, status: int, headers: Mapping[str, str]) -> None:
        """One DEBUG line per attempt; never the key, the prompt or the output. (An answer
        that no attempt sent, a batch file's, is untimed.)"""
        started = self.attempt_started
        log.debug(
            "%s %s -> %d in %s (retry %d, request id %s)",
            self.request.method,
            httpx.URL(self.request.url).path,
            status,
            f"{(time.monotonic() - started) * 1000:.1f} ms" if started else "untimed",
            self.retries,
            scrub_text(headers.get("x-request-id"), secrets_of(self.request.headers)),
        )


def stopped(exc: BaseException) -> bool:
    """Whether ``exc`` ends an attempt whose answer the server may still be generating because
    the client stopped waiting or reading: a timeout (the call's ``deadline`` or ``timeout``),
    a runaway lmclient's watch stopped (the server's own stop, or ``max_tokens``, ended the
    answer), or the program's own interruption (a cancelled task's `asyncio.CancelledError`,
    `KeyboardInterrupt`, `GeneratorExit`: every `BaseException` that is not an `Exception`).
    A server's error (a status, a lost connection, bad bytes) ended the answer there."""
    if isinstance(exc, errors.RunawayError):
        return exc.by == "client"
    return isinstance(exc, errors.APITimeoutError) or not isinstance(exc, Exception)


def abort_failed(abort: Lookup[None], exc: Exception) -> None:
    """Log an abort that failed (`Call.abort_of`): never raised, since the error that ended the
    call is the one its caller must see; the server then stops the generation when it notices
    the closed connection (SGLang looks every few seconds), or at ``max_tokens``."""
    log.warning(
        "the server was not asked to stop a generation lmclient stopped reading "
        "(POST %s %s): %s; it stops when it notices the closed connection",
        httpx.URL(abort.request.url).path,
        (abort.request.body or b"").decode(),
        exc,
    )


class Abort(msgspec.Struct, frozen=True, kw_only=True):
    """How a call's answer is stopped on the server: the ``request`` that asks it to (SGLang's
    ``POST /abort_request {"rid": ...}``), and whether lmclient ``made`` the rid (`new_rid`)
    rather than the user (``request_id``, an ``extra_body`` rid)."""

    request: PreparedRequest
    made: bool

    @classmethod
    def of(cls, url: str, headers: list[tuple[str, str]], rid: str, *, made: bool) -> Abort:
        """The abort of the request whose body carries ``rid``, sent to ``url`` with the
        call's ``headers`` (its key, and whatever a proxy in front routes by)."""
        body = _encode({"rid": rid})
        return cls(request=PreparedRequest("POST", url, headers, body), made=made)

    def renamed(self, rid: str) -> Abort:
        """This abort, for the request now carrying ``rid``."""
        request = self.request
        return Abort.of(request.url, request.headers, rid, made=self.made)


def new_rid() -> str:
    """A rid of lmclient's: a uuid4's 32 hex digits, as SGLang makes its own."""
    return uuid.uuid4().hex


def _no_answer(body: bytes) -> None:
    """An abort's answer: nothing to read (SGLang's is 200 with an empty body)."""


def name_request(exc: errors.LMClientError, request: PreparedRequest) -> None:
    """Add the request's method and path to the message of ``exc`` (once), and to a 404 at an
    OpenAI path without ``/v1`` its likely cause. An invalid output (`ValidationError`) is about the
    model's text, a spent budget about the call's answers, and a closed client about the
    client, not a request: they keep their messages."""
    unnamed = (errors.ValidationError, errors.TokenBudgetExceeded, errors.ClientClosedError)
    if isinstance(exc, unnamed) or not exc.args:
        return
    path = httpx.URL(request.url).path
    named = f"({request.method} {path})"
    message = str(exc.args[0])
    if not message.endswith(named):
        if isinstance(exc, errors.NotFoundError) and "/v1/" not in path and path.endswith(_V1):
            suffix = next(end for end in _V1 if path.endswith(end))
            base = str(request.url).split("?", 1)[0].removesuffix(suffix)
            named += (
                ": the base URL likely lacks the /v1 under which OpenAI-compatible servers "
                f"answer (base_url='{base}/v1')"
            )
        exc.args = (f"{message} {named}", *exc.args[1:])


# The OpenAI paths, which servers answer under /v1 (their own, /tokenize, /rerank, ..., at the root)
_V1 = ("/chat/completions", "/completions", "/embeddings", "/models")


def deadline_at(settings: CallSettings) -> float | None:
    """The time of `time.monotonic` by which a call with ``settings`` must end, if any."""
    deadline = settings.deadline
    return None if deadline is None else time.monotonic() + deadline


class Lookup(Attempts, Generic[V], kw_only=True):
    """A set-up request (the model list, a probe): its answer is a plain value, not a `Response`."""

    decode: Callable[[bytes], V]

    @classmethod
    def new(
        cls,
        settings: CallSettings,
        request: PreparedRequest,
        decode: Callable[[bytes], V],
        params: Mapping[str, Any],
    ) -> Lookup[V]:
        """The look-up of ``request``, with its parameters' settings over the client's."""
        settings = settings.given(params)
        return cls(
            request=request, settings=settings, deadline_at=deadline_at(settings), decode=decode
        )

    def finish(self, status: int, headers: Mapping[str, str], body: bytes) -> V:
        """The decoded answer of a complete HTTP response, or its typed error."""
        if log.isEnabledFor(logging.DEBUG):
            self.log_attempt(status, headers)
        if status >= 300:
            raise api_error(status, headers, body)
        return self.decode(body)


class Listing(list[str]):
    """The served models' ids, and ``owner``: the ``owned_by`` every card names, if they name
    one and the same (``None`` otherwise)."""

    owner: str | None = None


class Call(Attempts, kw_only=True):
    """One generation's state across attempts: what to send, when to give up, what came back."""

    spec: OutputSpec[Any]
    plan: Plan
    endpoint: Endpoint
    caveat: str  # what the errors of invalid output add (`ClientCore.caveat`)
    tools: dict[str, Tool[Any]] | None = None  # its answer's tool calls are decoded with these
    tool_choice: Any = None  # read only when there are tools
    reasks: int = 0
    attempts: Sequence[str] = ()  # texts of the answers re-asked so far
    spent: Usage | None = None  # the usage of the answers re-asked so far (`add_usage`)
    unmetered: int = 0  # of the answers re-asked so far, those with no usage to count
    many: Many | None = None  # the budgeted batch the call is an item of
    probabilities: bool = False  # create(probabilities=True): `Response.probabilities`
    # A continuation of the answer (`_confidence.continuation`): the answer, what was read of
    # its options' chances so far, and the bodies of the continuations still to send.
    answer: Response[Any, Any] | None = None
    reading: Reading | None = None
    pending: tuple[bytes, ...] = ()
    # The call's runaway thresholds (`_runaway`; ``None``: runaway="off"), and who watches its
    # answer: ``"client"``, lmclient, which reads it as a stream; ``"server"``, vLLM; ``None``,
    # no one (a bounded type, an answer read whole).
    runaway: Runaway | None = None
    guard: Guard | None = None
    # Tools beside the output type (`lmclient._turn`): the answer is the calls or the value.
    turn: Turn | None = None
    # How to ask the server to stop generating this call's answer (SGLang's ``/abort_request``
    # for the call's ``rid``: `ClientCore.prepare`), where it can be.
    abort: Abort | None = None

    @classmethod
    def new(
        cls,
        settings: CallSettings,
        request: PreparedRequest,
        *,
        spec: OutputSpec[Any],
        plan: Plan,
        endpoint: Endpoint,
        caveat: str,
        params: Mapping[str, Any],
        many: Many | None = None,
        runaway: Runaway | None = None,
        guard: Guard | None = None,
        turn: Turn | None = None,
    ) -> Call:
        """The call of ``request``, with its parameters' settings over the client's; an item
        of ``many``, a batch whose budgets its re-asks keep too; its answer watched for
        runaways at ``runaway`` by ``guard``."""
        if params:
            settings = settings.given(params)
            tools = tool_table(params)
            probabilities = bool(params.get("probabilities"))
        else:  # the client's settings, shared (the usual call: no look-up in its parameters)
            tools = None
            probabilities = False
        return cls(
            request=request,
            settings=settings,
            deadline_at=deadline_at(settings),
            spec=spec,
            plan=plan,
            endpoint=endpoint,
            caveat=caveat,
            tools=tools,
            tool_choice=params.get("tool_choice") if tools else None,
            many=many if many is not None and many.budgeted else None,
            probabilities=probabilities,
            runaway=runaway,
            guard=guard,
            turn=turn,
        )

    def finish(
        self, status: int, headers: Mapping[str, str], body: bytes
    ) -> Response[Any, Any] | Next:
        """Turn a complete HTTP response into its outcome: the `Response`, or the request to
        send next (`Next`): a re-ask after an invalid answer, a continuation of the answer for
        its probabilities; else raise its typed error (an invalid answer with no re-ask left
        among them). The one decision of what follows an answer, for the clients' one loop."""
        if log.isEnabledFor(logging.DEBUG):
            self.log_attempt(status, headers)
        if status >= 300:
            raise api_error(status, headers, body)
        try:
            if self.answer is not None:
                return self._continued(body)
            if self.endpoint == "chat":
                response = self._chat(_CHAT(body), body, headers)
            else:
                response = self._completion(_COMPLETION(body), body, headers)
            return response if not self.probabilities else self._with_probabilities(response)
        except errors.ValidationError as exc:
            return Next(call=self.reask(exc), invalid=exc)

    def aborting(self, exc: BaseException) -> Lookup[None] | None:
        """The abort to send after ``exc`` ended an attempt (`abort_of`), where the server may
        still be generating its answer because lmclient or the program stopped it (`stopped`);
        ``None`` otherwise: an answer that came whole, an error status, a failure of the server's
        own, a call without an abort request."""
        return self.abort_of() if self.abort is not None and stopped(exc) else None

    def abort_of(self) -> Lookup[None] | None:
        """The look-up that asks the server to stop generating this call's answer: its
        `abort` request, sent once (no retry) within `ABORT_TIMEOUT`, whatever the call's own
        deadline left (it may be what expired). ``None`` for a call without one."""
        if self.abort is None:
            return None
        return Lookup.new(self.settings, self.abort.request, _no_answer, _ABORT)

    def _backoff(self, exc: errors.LMClientError) -> float:
        """`Attempts._backoff`; a retry after an attempt lmclient stopped (`stopped`) gets a
        new ``rid`` where lmclient made the call's: SGLang refuses a rid it still runs with 400
        ("Duplicate request ID"), and the attempt aborted may not have ended yet. A rid the
        user gave (``request_id``) is kept: it names the call."""
        delay = super()._backoff(exc)
        abort = self.abort
        if abort is not None and abort.made and stopped(exc):
            rid = new_rid()
            assert self.request.body is not None
            body = msgspec.json.decode(self.request.body)
            body["rid"] = rid
            self.request = msgspec.structs.replace(self.request, body=_encode(body))
            self.abort = abort.renamed(rid)
        return delay

    @staticmethod
    def streams(status: int, headers: Mapping[str, str]) -> bool:
        """Whether the answer to a call lmclient watches (`guard`) came as the stream it asked for:
        not an error, nor one JSON body (a respx mock's, a server's that ignores ``stream``),
        which `finish` reads as any call's."""
        return status < 300 and headers.get("content-type", "").startswith("text/event-stream")

    def finish_stream(self, state: StreamState) -> Response[Any, Any] | Next:
        """`finish` for a watched call's answer, read to its end as a stream."""
        if log.isEnabledFor(logging.DEBUG):
            self.log_attempt(200, state.headers or {})
        try:
            return state.result()
        except errors.ValidationError as exc:
            return Next(call=self.reask(exc), invalid=exc)

    def ran_away(
        self, found: Found, text: str, *, by: str, usage: Usage | None, deltas: int | None = None
    ) -> errors.RunawayError:
        """The `RunawayError` for the runaway ``found`` in ``text``, stopped ``by`` lmclient
        (``"client"``), the server or ``max_tokens``: where it is, what repeats, what it cost
        (the server's count of tokens, else the ``deltas`` received), and what helps."""
        started = self.attempt_started
        tokens = usage.completion_tokens if usage is not None else deltas
        calls = self.turn is not None and text.startswith(OPEN)  # a typed turn's calls
        exc = errors.RunawayError(
            text=text,
            output_type=self._type,
            path="$" if self.spec.kind == "text" or calls else json_path(text, found.start),
            span=found.span,
            repeats=found.repeats,
            kind=found.kind,
            by=by,
            tokens=tokens,
            seconds=time.monotonic() - started if started else None,
            what=found.what,
            advice=self._runaway_advice(found, text),
        )
        exc.usage = usage
        self.spend(exc, usage)
        return self.explained(exc)  # type: ignore[return-value]

    def stopped_loop(self, text: str, usage: Usage | None) -> errors.RunawayError:
        """The `RunawayError` of an answer the server stopped as a loop (vLLM's
        ``repetition_detection``: finish_reason ``"repetition"``), the loop found in its text."""
        located = find(text, _LOCATE) or Found(
            kind="repeat", span="", repeats=0, start=len(text), what="a loop in its tokens"
        )
        return self.ran_away(located, text, by="server", usage=usage)

    def _runaway_advice(self, found: Found, text: str) -> str:
        """What helps against a runaway like ``found`` in ``text``: the server's JSON
        whitespace, where that is what ran away (or a third of the answer beside a loop); else
        a bound on the field, which gives the call the token budget of its longest value (or the
        runaway thresholds, where the repetition is meant)."""
        tune = "or tune runaway=lmclient.Runaway(...) (or 'off') if the repetition is meant"
        if self.turn is not None and text.startswith(OPEN):
            return (
                "the model repeats its tool calls, and raising max_tokens cannot help: "
                "client.run() runs a repeated call once and then asks for the answer alone; "
                f"or ask with tool_choice='none' once the calls are answered; {tune}"
            )
        json_mode = not self.plan.compact and self.spec.kind != "text"
        if found.kind == "whitespace" and json_mode:
            return f"a higher max_tokens only pays for more of it: {self._json_mode()}"
        if self.spec.kind == "text":
            return (
                "raising max_tokens cannot help: bound the answer (a lower max_tokens, a stop "
                f"sequence), lower the temperature or change the prompt; {tune}"
            )
        advice = (
            "raising max_tokens cannot help: bound the field in the output type "
            "(Annotated[str, msgspec.Meta(max_length=...)] for a str, Meta(max_length=...) for a "
            "list, Meta(le=...) for a number): a bounded type gets the max_tokens of its "
            f"longest value; {tune}"
        )
        spaces = whitespace(text) if json_mode else 0
        if 3 * spaces > len(text):  # padding took a third of the answer too
            advice += f"; and {spaces} of its characters are whitespace: {self._json_mode()}"
        return advice

    def _json_mode(self) -> str:
        """Why a server's own JSON mode lets an answer pad itself, and what to send instead."""
        dialect = DIALECTS.get(self.plan.dialect)
        allowed = "" if dialect is None else f" ({dialect.json_whitespace})"
        gateway = (
            "; behind the SGLang Model Gateway with --backend openai only response_format "
            "reaches the workers: run it with --backend sglang, or call the worker directly "
            "with its dialect="
            if self.plan.dialect == "sglang-gateway"
            else ""
        )
        return (
            f"dialect {self.plan.dialect!r} sends the server's JSON mode, which lets the model "
            f"write whitespace between tokens{allowed}; lmclient's compact grammar, which has "
            f"none, goes to vLLM, SGLang and llama.cpp (whitespace='compact', the default){gateway}"
        )

    def reask(self, exc: errors.ValidationError) -> Call:
        """The call that asks again after an invalid answer, with that answer and the reason
        appended as a correction request; re-raises ``exc`` (carrying every attempt's text)
        when no re-ask is left, or when asking again cannot help (truncation, refusal)."""
        exc.attempts = [*self.attempts, *exc.attempts]
        hopeless = isinstance(exc, (errors.TruncatedError, errors.RefusalError))
        if hopeless or self.reasks >= self.settings.max_reasks or self.endpoint != "chat":
            raise exc
        if self.deadline_at is not None and time.monotonic() >= self.deadline_at:
            raise exc
        assert self.request.body is not None
        body = msgspec.json.decode(self.request.body)
        if body.get("n", 1) != 1:
            raise exc  # which of several choices to correct is not ours to pick
        if self.settings.token_budget is not None or self.many is not None:
            self.keep_budgets(exc)
        messages = body["messages"]
        if self.reasks and self.settings.reask_history == "last":
            messages = messages[:-2]  # the answer re-asked last time, and its correction
        body["messages"] = [
            *messages,
            {"role": "assistant", "content": exc.text},
            {
                "role": "user",
                "content": f"That answer is invalid: {exc.detail}. "
                "Answer again with only a valid value.",
            },
        ]
        again = msgspec.structs.replace(
            self,
            request=msgspec.structs.replace(self.request, body=msgspec.json.encode(body)),
            reasks=self.reasks + 1,
            attempts=exc.attempts,
            spent=exc.total_usage,
            unmetered=exc.unmetered,
        )
        log.warning(
            "re-ask %d of %d after invalid output: %s",
            again.reasks,
            self.settings.max_reasks,
            exc.detail,
        )
        return again

    def keep_budgets(self, exc: errors.ValidationError) -> None:
        """Raise `TokenBudgetExceeded` instead of asking again once the call's ``token_budget``
        or its batch's is spent by its answers (``exc``'s the last), or one of them reported
        no usage to count."""
        unmetered = exc.unmetered > 0
        try:
            budget = self.settings.token_budget
            if budget is not None:
                check_budget(budget, exc.total_usage, "call", unmetered=unmetered)
            if self.many is not None:
                self.many.check(exc.total_usage, unmetered=unmetered)
        except errors.TokenBudgetExceeded as stopped:
            stopped.total_usage = exc.total_usage
            raise stopped from exc

    # -- response bodies -------------------------------------------------------------------

    def _chat(
        self, wire: ChatCompletion, body: bytes, headers: Mapping[str, str]
    ) -> Response[Any, Any]:
        choices = wire.choices
        if len(choices) == 1:
            first = choices[0]
            msg = first.message
            text = msg.content
            if (
                text
                and first.finish_reason == "stop"
                and not msg.refusal
                and first.logprobs is None
                and not msg.tool_calls  # vLLM sends "tool_calls": [] with every message
                and self.tools is None  # `result` holds the answer to the call's tool_choice
            ):
                reasoning = msg.reasoning or msg.reasoning_content
                return self._one(text, wire, body, reasoning, headers)
        elif not choices:
            raise errors.ProtocolError("the response has no choices")
        if len(choices) > 1:
            choices = sorted(choices, key=lambda c: c.index)
        first = choices[0]
        msg = first.message
        reasoning = msg.reasoning or msg.reasoning_content
        refusal = next((c.message.refusal for c in choices if c.message.refusal), None)
        return self.result(
            [c.message.content or "" for c in choices],
            [c.finish_reason for c in choices],
            usage=wire.usage,
            model=wire.model,
            id=wire.id,
            raw=body,
            reasoning=reasoning,
            refusal=refusal,
            logprobs=first.logprobs.content if first.logprobs is not None else None,
            tool_calls=msg.tool_calls,
            headers=headers,
        )

    def _completion(
        self, wire: Completion, body: bytes, headers: Mapping[str, str]
    ) -> Response[Any, Any]:
        choices = wire.choices
        if len(choices) == 1:
            only = choices[0]
            text = only.text
            if text and only.finish_reason == "stop" and only.logprobs is None:
                return self._one(text, wire, body, None, headers)
        elif not choices:
            raise errors.ProtocolError("the response has no choices")
        choices = sorted(choices, key=lambda c: c.index)
        first = choices[0].logprobs
        return self.result(
            [c.text or "" for c in choices],
            [c.finish_reason for c in choices],
            usage=wire.usage,
            model=wire.model,
            id=wire.id,
            raw=body,
            logprobs=first.normalized() if first is not None else None,
            headers=headers,
        )

    def _one(
        self,
        text: str,
        wire: ChatCompletion | Completion,
        body: bytes,
        reasoning: str | None,
        headers: Mapping[str, str],
    ) -> Response[Any, Any]:
        """`result` for the common answer: one choice, ended by "stop", with content, without
        a refusal or logprobs, so that only its decoding can fail."""
        usage = wire.usage
        if self.plan.reasoned:
            text, reasoning = _after_reasoning(text, reasoning)
        try:
            value = self.plan.decode(text)
        except errors.ValidationError as exc:
            error = self.unapplied(text) or exc
            self.spend(error, usage)
            raise self.explained(error) from None
        return self._response(
            values=[value],
            texts=[text],
            reasons=["stop"],
            usage=usage,
            model=wire.model,
            id=wire.id,
            raw=body,
            reasoning=reasoning,
            headers=headers,
        )

    def spend(self, exc: errors.ValidationError, usage: Usage | None) -> None:
        """Put on ``exc`` the usage of the answer it rejects, and the call's total so far."""
        exc.usage = usage
        exc.total_usage = add_usage(self.spent, usage)
        exc.unmetered = self.unmetered + (counted(usage) is None)

    def result(
        self,
        texts: list[str],
        reasons: list[str | None],
        *,
        usage: Usage | None,
        model: str | None,
        id: str | None,
        raw: bytes | list[bytes],
        reasoning: str | None = None,
        refusal: str | None = None,
        logprobs: list[TokenLogprob] | None = None,
        tool_calls: list[WireToolCall] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Response[Any, Any]:
        """Validate every choice's text into the output type, and the first choice's tool
        calls into their tools' types; the same for bodies and streams. ``raw`` is the body
        (a stream: its events' data), kept for `Response.raw`, ``headers`` the response's,
        for `Response.headers`."""
        if self.plan.reasoned:
            answers = [_after_reasoning(text, reasoning) for text in texts]
            texts = [text for text, _ in answers]
            reasoning = reasoning or answers[0][1]
        try:
            values, calls = self._validated(texts, reasons, usage, reasoning, refusal, tool_calls)
        except errors.ValidationError as exc:
            self.spend(exc, usage)
            raise
        return self._response(
            values=values,
            texts=texts,
            reasons=reasons,
            usage=usage,
            model=model,
            id=id,
            raw=raw,
            reasoning=reasoning,
            logprobs=logprobs,
            headers=headers,
            tool_calls=calls,
        )

    def _response(
        self,
        *,
        values: list[Any],
        texts: list[str],
        reasons: list[str | None],
        usage: Usage | None,
        model: str | None,
        id: str | None,
        raw: bytes | list[bytes],
        reasoning: str | None,
        headers: Mapping[str, str] | None,
        logprobs: list[TokenLogprob] | None = None,
        tool_calls: tuple[ToolCall[Any], ...] = (),
    ) -> Response[Any, Any]:
        """The `Response` of validated values, with this call's counts and usage so far."""
        spent = self.spent
        response: Response[Any, Any] = Response(
            values=values,
            texts=texts,
            finish_reasons=reasons,
            usage=usage,
            model=model,
            id=id,
            _body=raw,
            total_usage=usage if spent is None else add_usage(spent, usage),
            reasoning=reasoning,
            logprobs=logprobs,
            retries=self.retries,
            reasks=self.reasks,
            compact=self.plan.compact,
            _headers=headers,
            tool_calls=tool_calls,
        )
        # Set apart, not a 16th keyword above: msgspec (0.23) builds a Struct given more than
        # 15 keywords on a slower path, which every call would take (the guard test holds it).
        unmetered = self.unmetered + (counted(usage) is None)
        if unmetered:
            response = msgspec.structs.replace(response, unmetered=unmetered)
        return response

    def _with_probabilities(self, response: Response[Any, Any]) -> Response[Any, Any] | Next:
        """``response`` with its first choice's options' probabilities (`_confidence`); the
        `Next` call where a shared prefix must be continued first; a `ConfidenceError`
        carrying ``response`` where its logprobs cannot tell them."""
        try:
            reading = read(
                self.spec, self.plan, response.texts[0], response.values[0], response.logprobs
            )
            if reading.waiting:
                assert self.request.body is not None
                body = msgspec.json.decode(self.request.body)
                bodies = [
                    continuation(body, self.endpoint, self.plan, shared.prefix)
                    for shared in reading.waiting
                ]
                if None not in bodies:
                    pending = tuple(msgspec.json.encode(more) for more in bodies)
                    return Next(call=self._next(response, reading, pending))
            found = reading.result()
        except errors.ConfidenceError as exc:
            exc.response = response
            raise
        return msgspec.structs.replace(response, _probabilities=found)

    def _next(
        self, answer: Response[Any, Any], reading: Reading, pending: tuple[bytes, ...]
    ) -> Call:
        """The call that sends the first of the ``pending`` continuations of ``answer``."""
        request = msgspec.structs.replace(self.request, body=pending[0])
        return msgspec.structs.replace(
            self, request=request, answer=answer, reading=reading, pending=pending[1:]
        )

    def _continued(self, body: bytes) -> Response[Any, Any] | Next:
        """The answer with its probabilities, once the continuation ``body`` has split its
        first waiting prefix (`_confidence.split`), and the continuations' usage counted in
        its ``total_usage``; the `Next` continuation while another prefix waits."""
        answer, reading = self.answer, self.reading
        assert answer is not None and reading is not None
        tokens: list[TokenLogprob] | None = None
        if self.endpoint == "chat":
            chat: ChatCompletion = _CHAT(body)
            usage = chat.usage
            if chat.choices and chat.choices[0].logprobs is not None:
                tokens = chat.choices[0].logprobs.content
        else:
            completion: Completion = _COMPLETION(body)
            usage = completion.usage
            if completion.choices and completion.choices[0].logprobs is not None:
                tokens = completion.choices[0].logprobs.normalized()
        answer = msgspec.structs.replace(
            answer,
            total_usage=add_usage(answer.total_usage, usage),
            unmetered=answer.unmetered + (counted(usage) is None),
        )
        try:
            reading = split(reading, tokens)
            if reading.waiting:
                return Next(call=self._next(answer, reading, self.pending))
            found = reading.result()
        except errors.ConfidenceError as exc:
            exc.response = answer
            raise
        return msgspec.structs.replace(answer, _probabilities=found)

    def _validated(
        self,
        texts: list[str],
        reasons: list[str | None],
        usage: Usage | None,
        reasoning: str | None,
        refusal: str | None,
        tool_calls: list[WireToolCall] | None,
    ) -> tuple[list[Any], tuple[ToolCall[Any], ...]]:
        """Every choice's value, and the first choice's tool calls, validated."""
        if refusal:
            raise errors.RefusalError(refusal, text=texts[0], output_type=self._type)
        constrained = self.spec.kind != "text"
        values = []
        for text, reason in zip(texts, reasons, strict=True):
            if reason == "content_filter":
                raise errors.RefusalError(
                    "the server filtered the output (finish_reason 'content_filter')",
                    text=text,
                    output_type=self._type,
                )
            if reason == "abort":  # SGLang aborts a request it cannot finish
                raise errors.ServerError("the server aborted the generation", status_code=200)
            if reason == "repetition":  # vLLM's repetition_detection stopped a loop
                raise self.stopped_loop(text, usage)
            if self.turn is not None and (tool_calls or text.startswith(OPEN)):
                if reason == "length":  # calls cut: looping on one, or longer than max_tokens
                    if (found := find(text, _CUT)) is not None:
                        raise self.ran_away(found, text, by="max_tokens", usage=usage)
                    raise self.explained(
                        errors.TruncatedError(text=text, output_type=None, usage=usage)
                    )
                break  # the calls' branch: no value
            if reason == "length":
                if constrained and (ignored := self.unapplied(text)) is not None:
                    raise self.explained(ignored)
                # Was it still making progress? A value's end would have come; a loop's tail
                # shows (more readily than the watch stops one: the answer failed anyway), and
                # so does an answer of padding. A text is returned unless the watch's rule holds
                # (and runaway is not "off"); with tools, what the tool check says comes first.
                found = None
                if constrained and not self.tools:
                    found = find(text, _CUT) or padded(text)
                elif self.runaway is not None and not self.tools:
                    found = find(text, self.runaway)
                if found is not None:
                    raise self.ran_away(found, text, by="max_tokens", usage=usage)
                if constrained:
                    advise = self.spec.cut_advice
                    advice = advise(text) if advise is not None else None
                    raise self.explained(
                        errors.TruncatedError(
                            text=text,
                            output_type=self._type,
                            usage=usage,
                            advice=advice or "raise max_tokens",
                        )
                    )
            if not text and reasoning and constrained:  # (a cut answer was said above)
                raise errors.ConstraintIgnoredError(
                    text=reasoning,
                    output_type=self._type,
                    fields=list(self.plan.fields),
                    dialect=self.plan.dialect,
                    why=IN_REASONING,
                    advice=answer_in_reasoning(self.plan.dialect, self.plan.reasoned),
                )
            try:
                values.append(self.plan.decode(text))
            except errors.ValidationError as exc:
                error = self.unapplied(text) or exc
                if len(texts) > 1:
                    error.attempts = list(texts)
                raise self.explained(error) from None  # its message completed
        calls: tuple[ToolCall[Any], ...] = ()
        if self.tools:
            cut = reasons[0] == "length"
            try:
                if tool_calls:
                    calls = tuple(decode_calls(self.tools, tool_calls))
                elif self.turn is not None:  # the calls as the turn's grammar writes them
                    calls = tuple(calls_in_text(self.tools, texts[0]) or ())
                check_choice(self.tool_choice, calls, texts[0])
            except errors.ValidationError as exc:
                if not cut:
                    raise
                # The call, or its arguments, did not fit in max_tokens; with no call at all,
                # the server may as well have ignored the tools: both are said.
                truncated = errors.TruncatedError(text=exc.text, output_type=None, usage=usage)
                if not tool_calls:
                    truncated.args = (f"{truncated}; {exc.detail}",)
                raise truncated from None
        return values, calls

    def unapplied(self, text: str) -> errors.ConstraintIgnoredError | None:
        """The error for an answer that shows the constraint was never applied (`unapplied`),
        if ``text`` does: said instead of a cut or a decoding error, which would mislead."""
        if self.plan.reasoned:  # (a text before the reasoning's end marker is free)
            return None
        why = unapplied(self.spec, self.plan, text)
        if why is None:
            return None
        return errors.ConstraintIgnoredError(
            text=text,
            output_type=self._type,
            fields=list(self.plan.fields),
            dialect=self.plan.dialect,
            why=why,
        )

    def explained(self, exc: errors.ValidationError) -> errors.ValidationError:
        """``exc``, its message followed by the set-up's caveat, if any."""
        if self.caveat:
            exc.args = (f"{exc}; {self.caveat}",)
        return exc

    @property
    def _type(self) -> Any:
        return self.spec.output_type


def _after_reasoning(text: str, reasoning: str | None) -> tuple[str, str | None]:
    """The answer of a text written under lmclient's reasoning grammar, and the reasoning: the
    server's, else the block the text began with (`split_reasoning`: the server's reasoning
    parser is off, or does not know the markers)."""
    found = split_reasoning(text)
    if found is None:  # no block, or the server's parser took it: its space may be left
        return (past_space(text) if reasoning else text), reasoning
    return found[1], reasoning or found[0] or None


@final  # the clients tell it by ``type(x) is Next`` (isinstance asks a Struct's metaclass)
class Next(msgspec.Struct, frozen=True, kw_only=True):
    """What `Call.finish` returns where the answer asks for another request: ``call``, the
    re-ask of an invalid answer (``invalid``, the error that rejected it, which the re-ask's
    hook event reports) or a continuation of the answer for its probabilities (``invalid``
    None). A value, not an exception: the answer's outcome is decided in one place, and the
    clients' loop sends ``call`` as it sent the first."""

    call: Call
    invalid: errors.ValidationError | None = None


# Where the server stopped a loop (finish_reason "repetition"), the loop in its text: vLLM counts
# repeated tokens, which a text shows as a span repeated fewer times than lmclient's own watch
# needs to stop one.
_LOCATE = Runaway(repeats=3, min_chars=8, max_span=512)
# A constrained answer cut at max_tokens whose tail repeats a span 4 times over 12 characters
# (``1000000000000000``: a number that would not have ended) is said as a loop, not "raise
# max_tokens".
_CUT = Runaway(repeats=4, min_chars=12)

_encode = msgspec.json.Encoder().encode

# A response body decoded, or the `ProtocolError` carrying it: refused unread where it nests
# deeper than any answer (`lmclient._output.depth`).
_CHAT = body_decoder(ChatCompletion, "response")
_COMPLETION = body_decoder(Completion, "response")
