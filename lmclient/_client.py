"""`Client`: the blocking shell around the sans-I/O core. `AsyncClient` mirrors it line for line."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import TYPE_CHECKING, Any, TypeVar, overload

import httpx

from . import errors
from ._call import Call, Lookup, Next, abort_failed
from ._core import DEFAULT_MAX_RESPONSE_BYTES, ClientCore, Reading
from ._dialects import Endpoint, ServerInfo, Whitespace
from ._embeddings import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_CONCURRENCY,
    EmbeddingJob,
    Embeddings,
    Vector,
    check_tokens,
    count_call,
    tokenize_call,
)
from ._hooks import Hook, Observer, Watch
from ._output.markers import Choice, Grammar, JsonSchema, Regex, Tagged
from ._params import NO_PROMPT, Prompt
from ._proxies import environment_proxy
from ._request import Timeouts
from ._response import Response
from ._runaway import RunawaySetting
from ._scoring_client import Scoring
from ._status import api_error
from ._stream import Opened, Stream
from ._stream_state import StreamState
from ._transports.sync import SyncTransport
from ._turn import Loop
from ._usage import Many, UsageTotal

if TYPE_CHECKING:
    from typing_extensions import Self, TypeForm, Unpack

    from ._output.tagged import TaggedText
    from ._params import CallParams, CreateParams, ToolCallParams, ToolCreateParams
    from ._tools import Tool

__all__ = ["Client"]

T = TypeVar("T")
W = TypeVar("W")  # the arguments of a call's tools: those of `create` and `stream`'s calls
_MODULES = sys.modules  # `Observer.key` is looked up here, once per call


class Client(Scoring):
    """A blocking client for one OpenAI-compatible server (README.md and docs/ show it in use)."""

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        *,
        api_key: str | None = None,
        dialect: str = "auto",
        timeout: float | httpx.Timeout | None = None,
        deadline: float | None = None,
        max_retries: int = 2,
        max_reasks: int = 0,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        headers: Mapping[str, str] | None = None,
        http_client: httpx.Client | None = None,
        uds: str | os.PathLike[str] | None = None,
        defaults: Mapping[str, Any] | None = None,
        whitespace: Whitespace = "compact",
        runaway: RunawaySetting = "on",
        hooks: Sequence[Hook] = (),
        hook_content: bool = False,
        tracing: bool | None = None,
    ) -> None:
        self._core = ClientCore(
            base_url,
            model,
            api_key=api_key,
            dialect=dialect,
            timeout=timeout,
            deadline=deadline,
            max_retries=max_retries,
            max_reasks=max_reasks,
            max_response_bytes=max_response_bytes,
            headers=headers,
            defaults=defaults,
            whitespace=whitespace,
            uds=uds,
            runaway=runaway,
        )
        direct = http_client is not None or self._core.uds is not None  # no environment proxy
        proxy = None if direct else environment_proxy(self._core.base_url)
        self._transport = SyncTransport(http_client, proxy, self._core.uds)
        self._setup_lock = threading.Lock()
        self._observer = Observer(hooks, content=hook_content, tracing=tracing)
        self._watched = self._observer.key  # in sys.modules: calls are reported (`_hooks`)

    def __repr__(self) -> str:
        return f"Client({self._core!r})"

    @property
    def model(self) -> str | None:
        return self._core.model

    @property
    def dialect(self) -> str:
        """The dialect in use: ``"auto"`` until the first call has probed the server."""
        return "auto" if self._core.dialect is None else self._core.dialect.name

    @property
    def server_info(self) -> ServerInfo | None:
        """What ``dialect="auto"`` learnt about the server (kind, version, models)."""
        return self._core.server_info

    # -- calls -------------------------------------------------------------------------------

    @overload
    def generate(self, prompt: Prompt, **params: Unpack[CallParams]) -> str: ...
    @overload
    def generate(
        self, prompt: Prompt, output_type: TypeForm[T], **params: Unpack[CallParams]
    ) -> T: ...
    @overload
    def generate(
        self, prompt: Prompt, output_type: Regex | Grammar | Choice, **params: Unpack[CallParams]
    ) -> str: ...
    @overload
    def generate(
        self, prompt: Prompt, output_type: Tagged[T], **params: Unpack[CallParams]
    ) -> TaggedText[T]: ...
    @overload
    def generate(
        self, prompt: Prompt, output_type: JsonSchema, **params: Unpack[CallParams]
    ) -> Any: ...
    def generate(self, prompt: Prompt = NO_PROMPT, output_type: Any = str, **params: Any) -> Any:
        """Chat completion of ``prompt``, returned as a validated ``output_type``."""
        return self._create("generate", prompt, output_type, "chat", params).values[0]

    @overload
    def complete(self, prompt: str, **params: Unpack[CallParams]) -> str: ...
    @overload
    def complete(
        self, prompt: str, output_type: TypeForm[T], **params: Unpack[CallParams]
    ) -> T: ...
    @overload
    def complete(
        self, prompt: str, output_type: Regex | Grammar | Choice, **params: Unpack[CallParams]
    ) -> str: ...
    @overload
    def complete(
        self, prompt: str, output_type: Tagged[T], **params: Unpack[CallParams]
    ) -> TaggedText[T]: ...
    @overload
    def complete(
        self, prompt: str, output_type: JsonSchema, **params: Unpack[CallParams]
    ) -> Any: ...
    def complete(self, prompt: str = NO_PROMPT, output_type: Any = str, **params: Any) -> Any:
        """Plain completion (``/v1/completions``) of ``prompt``, as a validated ``output_type``."""
        return self._create("complete", prompt, output_type, "completions", params).values[0]

    @overload  # tools need the chat endpoint: no endpoint=
    def create(
        self, prompt: Prompt, *, tools: Sequence[Tool[W]], **params: Unpack[ToolCreateParams]
    ) -> Response[str, W]: ...
    @overload  # a typed turn: the tools' calls, or the answer (`lmclient._turn`)
    def create(
        self,
        prompt: Prompt,
        output_type: TypeForm[T],
        *,
        tools: Sequence[Tool[W]],
        **params: Unpack[ToolCreateParams],
    ) -> Response[T, W]: ...
    @overload
    def create(
        self, prompt: Prompt, *, endpoint: Endpoint = ..., **params: Unpack[CreateParams]
    ) -> Response[str]: ...
    @overload
    def create(
        self,
        prompt: Prompt,
        output_type: TypeForm[T],
        *,
        endpoint: Endpoint = ...,
        **params: Unpack[CreateParams],
    ) -> Response[T]: ...
    @overload
    def create(
        self,
        prompt: Prompt,
        output_type: Regex | Grammar | Choice,
        *,
        endpoint: Endpoint = ...,
        **params: Unpack[CreateParams],
    ) -> Response[str]: ...
    @overload
    def create(
        self,
        prompt: Prompt,
        output_type: Tagged[T],
        *,
        endpoint: Endpoint = ...,
        **params: Unpack[CreateParams],
    ) -> Response[TaggedText[T]]: ...
    @overload
    def create(
        self,
        prompt: Prompt,
        output_type: JsonSchema,
        *,
        endpoint: Endpoint = ...,
        **params: Unpack[CreateParams],
    ) -> Response[Any]: ...
    def create(
        self,
        prompt: Prompt = NO_PROMPT,
        output_type: Any = str,
        *,
        endpoint: Endpoint = "chat",
        **params: Any,
    ) -> Response[Any, Any]:
        """The full `Response`: every choice's value and text, usage, finish reasons, raw body."""
        return self._create("create", prompt, output_type, endpoint, params)

    def run(
        self,
        prompt: Prompt,
        output_type: TypeForm[T],
        *,
        tools: Sequence[Tool[W]],
        max_turns: int = 8,
        **params: Unpack[ToolCallParams],
    ) -> Response[T, W]:
        """The agent loop in one call: a typed turn (`create` with ``output_type`` and
        ``tools``) after another, each call the model makes run (`ToolCall.run`: the tools are
        made by `Tool.from_function`) and its result sent back, until the model answers; the
        answer's `Response` (the conversation is ``messages`` of its last request). At most
        ``max_turns`` turns (`NoValueError` after), ``deadline`` and ``token_budget`` over them
        all."""
        loop = Loop("run", prompt, tools, max_turns, params)
        while True:
            given = loop.params(tools, params)
            response = self._create("run", loop.messages, output_type, "chat", given)
            calls = loop.answered(response)
            if calls is None:
                return response
            for call in calls:
                loop.ran(call, call.run())
            loop.replied(response)

    @overload  # tools need the chat endpoint: no endpoint=
    def stream(
        self, prompt: Prompt, *, tools: Sequence[Tool[W]], **params: Unpack[ToolCallParams]
    ) -> Stream[str, W]: ...
    @overload
    def stream(
        self,
        prompt: Prompt,
        output_type: TypeForm[T],
        *,
        tools: Sequence[Tool[W]],
        **params: Unpack[ToolCallParams],
    ) -> Stream[T, W]: ...
    @overload
    def stream(
        self,
        prompt: Prompt,
        *,
        endpoint: Endpoint = ...,
        **params: Unpack[CallParams],
    ) -> Stream[str]: ...
    @overload
    def stream(
        self,
        prompt: Prompt,
        output_type: TypeForm[T],
        *,
        endpoint: Endpoint = ...,
        **params: Unpack[CallParams],
    ) -> Stream[T]: ...
    @overload
    def stream(
        self,
        prompt: Prompt,
        output_type: Regex | Grammar | Choice,
        *,
        endpoint: Endpoint = ...,
        **params: Unpack[CallParams],
    ) -> Stream[str]: ...
    @overload
    def stream(
        self,
        prompt: Prompt,
        output_type: Tagged[T],
        *,
        endpoint: Endpoint = ...,
        **params: Unpack[CallParams],
    ) -> Stream[TaggedText[T]]: ...
    @overload
    def stream(
        self,
        prompt: Prompt,
        output_type: JsonSchema,
        *,
        endpoint: Endpoint = ...,
        **params: Unpack[CallParams],
    ) -> Stream[Any]: ...
    def stream(
        self,
        prompt: Prompt = NO_PROMPT,
        output_type: Any = str,
        *,
        endpoint: Endpoint = "chat",
        **params: Any,
    ) -> Stream[Any, Any]:
        """Stream the answer: iterate for text deltas, ``items()`` for array elements as they
        close, ``value`` for the validated whole. Nothing is sent before the stream
        is entered or iterated; bad input raises here."""
        self._core.validate("stream", prompt, output_type, endpoint, params)

        def opener() -> tuple[StreamState, Opened]:
            if self._watched in _MODULES:
                return self._open_watched(prompt, output_type, endpoint, params)
            call = self._prepare("stream", prompt, output_type, endpoint, params, reading="stream")
            return StreamState(call), self._open(call)

        return Stream(opener, self._abort)

    def generate_many(
        self,
        prompts: Iterable[Prompt | tuple[Prompt, Any]],
        output_type: Any = str,
        *,
        concurrency: int = 16,
        return_exceptions: bool = False,
        on_result: Callable[[int, Any], object] | None = None,
        usage: UsageTotal | None = None,
        **params: Unpack[CallParams],
    ) -> list[Any]:
        """Run many calls at once, at most ``concurrency`` in flight, and return their values in
        input order. An item is a prompt or a ``(prompt, output_type)`` pair. With
        ``return_exceptions=True`` a failed item is its `LMClientError` and the rest still run;
        otherwise the first failure cancels the rest and is raised. ``on_result(index, value)``
        is called in the caller's thread as each item finishes (a progress bar, for instance);
        ``usage`` (a `UsageTotal`) gets every finished item's usage added, failed ones too.
        ``token_budget`` is the batch's: no item starts, nor asks again, once it (or ``usage``'s
        budget) is spent; `TokenBudgetExceeded` then takes each such item's place, or is raised
        once the items in flight finish, carrying what completed."""
        return self._many(
            "generate",
            "chat",
            prompts,
            output_type,
            concurrency,
            return_exceptions,
            on_result,
            usage,
            params,
        )

    def complete_many(
        self,
        prompts: Iterable[str | tuple[str, Any]],
        output_type: Any = str,
        *,
        concurrency: int = 16,
        return_exceptions: bool = False,
        on_result: Callable[[int, Any], object] | None = None,
        usage: UsageTotal | None = None,
        **params: Unpack[CallParams],
    ) -> list[Any]:
        """`generate_many` for the completions endpoint."""
        return self._many(
            "complete",
            "completions",
            prompts,
            output_type,
            concurrency,
            return_exceptions,
            on_result,
            usage,
            params,
        )

    def probe(self) -> ServerInfo:
        """What the server is (kind, version, dialect, models), probed now if not yet (what
        ``dialect="auto"`` learns before a first call; a given dialect is kept); open only."""
        with self._setup_lock:
            self._transport.check_open()
            return self._core.server_info or self._probe_server()

    def models(self) -> list[str]:
        """The ids of the models the server serves (``GET /v1/models``)."""
        return self._run(self._core.models_call())

    def embed(
        self,
        texts: Sequence[str],
        *,
        model: str | None = None,
        dimensions: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        concurrency: int = DEFAULT_CONCURRENCY,
        timeout: float | httpx.Timeout | None = None,
        deadline: float | None = None,
        max_retries: int | None = None,
    ) -> list[Vector]:
        """The embedding of each text (``POST /v1/embeddings``), in the texts' order: float32
        arrays (``array.array("f")``: 4 bytes a value, a buffer ``numpy.frombuffer`` views
        without a copy), asked for as base64 where the server reads it and decoded without
        numpy. A single str is refused: pass ``[text]``. The texts go in requests of at most
        ``batch_size``, ``concurrency`` of them at once; ``deadline`` bounds the whole call,
        retries and timeouts apply to each request."""
        params = {"timeout": timeout, "deadline": deadline, "max_retries": max_retries}
        job = EmbeddingJob(
            self._core,
            "embed",
            texts,
            model=model,
            dimensions=dimensions,
            batch_size=batch_size,
            concurrency=concurrency,
            params=params,
        )
        return self._embeddings(job, concurrency).vectors

    def create_embeddings(
        self,
        texts: Sequence[str],
        *,
        model: str | None = None,
        dimensions: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        concurrency: int = DEFAULT_CONCURRENCY,
        timeout: float | httpx.Timeout | None = None,
        deadline: float | None = None,
        max_retries: int | None = None,
    ) -> Embeddings:
        """`embed`, with the usage summed over its requests and the model that answered."""
        params = {"timeout": timeout, "deadline": deadline, "max_retries": max_retries}
        job = EmbeddingJob(
            self._core,
            "create_embeddings",
            texts,
            model=model,
            dimensions=dimensions,
            batch_size=batch_size,
            concurrency=concurrency,
            params=params,
        )
        return self._embeddings(job, concurrency)

    def tokenize(
        self,
        text: str,
        *,
        model: str | None = None,
        add_special_tokens: bool = False,
        timeout: float | httpx.Timeout | None = None,
        deadline: float | None = None,
        max_retries: int | None = None,
    ) -> list[int]:
        """The token ids of ``text`` by the server's tokenizer (``POST /tokenize`` on vLLM,
        SGLang and llama.cpp; refused elsewhere). ``add_special_tokens`` (BOS, ...) is sent
        explicitly, as the servers' defaults differ; without them counts add up."""
        params = {"timeout": timeout, "deadline": deadline, "max_retries": max_retries}
        if not check_tokens(self._core, "tokenize", text, model, add_special_tokens):
            self._setup({"model": model})
        call = tokenize_call(
            self._core,
            "tokenize",
            text,
            model=model,
            add_special_tokens=add_special_tokens,
            params=params,
        )
        return self._run(call)

    def count_tokens(
        self,
        prompt: Prompt,
        *,
        model: str | None = None,
        add_special_tokens: bool = False,
        timeout: float | httpx.Timeout | None = None,
        deadline: float | None = None,
        max_retries: int | None = None,
    ) -> int:
        """How many tokens ``prompt`` is, by the server's tokenizer: a text's (see `tokenize`),
        or a list of messages' as the server renders them for a chat completion, its chat
        template and generation prompt included (vLLM and SGLang ``/tokenize``, llama.cpp
        ``/v1/chat/completions/input_tokens``)."""
        params = {"timeout": timeout, "deadline": deadline, "max_retries": max_retries}
        if not check_tokens(self._core, "count_tokens", prompt, model, add_special_tokens):
            self._setup({"model": model})
        call = count_call(
            self._core,
            "count_tokens",
            prompt,
            model=model,
            add_special_tokens=add_special_tokens,
            params=params,
        )
        return self._run(call)

    # -- plumbing ------------------------------------------------------------------------------

    def _many(
        self,
        where: str,
        endpoint: Endpoint,
        prompts: Iterable[Any],
        output_type: Any,
        concurrency: int,
        return_exceptions: bool,
        on_result: Callable[[int, Any], object] | None,
        usage: UsageTotal | None,
        params: Any,
        whole: bool = False,
    ) -> list[Any]:
        """`generate_many`'s work; ``whole``: each item's `Response`, not its value
        (`lmclient.ray` writes its usage too)."""
        many = Many(
            where, params, usage=usage, return_exceptions=return_exceptions, on_result=on_result
        )
        params = many.params  # without the batch's token_budget
        items = self._core.batch(where, prompts, output_type, endpoint, params, concurrency)
        many.results = [None] * len(items)
        many.whole = whole
        pool = ThreadPoolExecutor(max(1, min(concurrency, len(items))))  # threads share one pool
        try:
            futures = {
                pool.submit(many.run, self._create, where, prompt, tp, endpoint, params): index
                for index, (prompt, tp) in enumerate(items)
            }
            for future in as_completed(futures):
                failure = future.exception()
                many.finish(futures[future], future.result() if failure is None else failure)
        finally:  # on failure or interruption, what has not started never starts
            pool.shutdown(wait=True, cancel_futures=True)
        return many.end()

    def _create(
        self,
        where: str,
        prompt: Prompt,
        output_type: Any,
        endpoint: Endpoint,
        params: dict[str, Any],
        many: Many | None = None,
    ) -> Response[Any, Any]:
        if self._watched in _MODULES:  # hooks or spans: the same steps, reported (`_hooks.Watch`)
            with self._observer.watch(endpoint, stream=False) as watch:
                call = self._prepare(where, prompt, output_type, endpoint, params, many, watch)
                return self._run(call, watch)
        return self._run(self._prepare(where, prompt, output_type, endpoint, params, many))

    def _prepare(
        self,
        where: str,
        prompt: Prompt,
        output_type: Any,
        endpoint: Endpoint,
        params: dict[str, Any],
        many: Many | None = None,
        watch: Watch | None = None,
        *,
        reading: Reading = "call",
    ) -> Call:
        """The call's request; on first use, after the set-up requests (input checked first).
        With a `Watch`, its span starts once the set-up is done, and is current while the
        request is built (and, the watch entered, sent)."""
        core = self._core
        if not core.ready:
            core.validate(where, prompt, output_type, endpoint, params)
            self._setup(params)
        if params and params.get("probabilities"):
            self._list_options(where, prompt, output_type, endpoint, params)
        if watch is not None:
            params = watch.begin(core, params)
        return core.prepare(
            where, prompt, output_type, endpoint, params, reading=reading, many=many
        )

    @overload
    def _run(self, call: Call, watch: Watch | None = None) -> Response[Any, Any]: ...
    @overload
    def _run(self, call: Lookup[T], watch: None = None) -> T: ...
    def _run(self, call: Call | Lookup[Any], watch: Watch | None = None) -> Any:
        """The send loop of every request but a stream's: a call's (its re-asks and
        continuations in it: `Call.finish` returns them as `Next`) and the set-up's
        (`Lookup`s). An error goes to `backoff`, which gives the pause before the next attempt
        or raises it. ``watch`` hears each step (`_hooks.Watch`); without one, the hot path of
        every call pays one ``is not None`` per step."""
        while True:
            try:
                timeouts = call.start_attempt()  # raises once the deadline has passed: not sent
                if watch is not None:
                    watch.sending(call)
                if type(call) is Call and call.guard == "client":  # read as it is generated
                    outcome = self._read_watched(call, timeouts, watch)
                else:
                    status, headers, body = self._transport.send(
                        call.request, timeouts, call.settings.max_response_bytes, call.deadline_at
                    )
                    if watch is not None:
                        watch.received(status, headers)
                    outcome = call.finish(status, headers, body)
                if type(outcome) is not Next:
                    return outcome if watch is None else watch.finished(outcome)
                call = outcome.call
                if watch is not None and outcome.invalid is not None:
                    watch.reasked(call, outcome.invalid)
                continue
            except errors.LMClientError as exc:
                self._abort(call.aborting(exc))
                delay = call.backoff(exc)
                if watch is not None:
                    watch.retrying(delay, exc)
            except BaseException as exc:  # the program's own: a cancelled task, Ctrl-C, ...
                self._abort(call.aborting(exc))
                raise
            time.sleep(delay)

    def _read_watched(
        self, call: Call, timeouts: Timeouts, watch: Watch | None
    ) -> Response[Any, Any] | Next:
        """The answer of a call lmclient watches for runaways (`Call.guard`), read as a stream
        as the server generates it: at a runaway, `StreamState.feed` raises `RunawayError` and the
        connection is closed, which the server takes as an abort. An answer that is not the
        stream asked for (an error; one JSON body, from a respx mock) is read as a call's."""
        response = self._transport.stream(
            call.request, timeouts, call.settings.max_response_bytes, call.deadline_at
        )
        try:
            if watch is not None:
                watch.received(response.status, response.headers)
            if not call.streams(response.status, response.headers):
                return call.finish(response.status, response.headers, b"".join(response.chunks))
            state = StreamState(call)
            state.headers = response.headers
            for chunk in response.chunks:
                state.feed(chunk)
            state.end()
        finally:
            response.close()
        return call.finish_stream(state)

    def _abort(self, abort: Lookup[None] | None) -> None:
        """Send ``abort`` (`Call.aborting`), best-effort: one attempt within `ABORT_TIMEOUT`,
        its failure logged (`abort_failed`), never raised: the error that ended the call goes on
        unchanged once it is done. It is waited for here, in the thread interrupted or the task
        cancelled (a Ctrl-C, a `CancelledError`, waits that long at most), never a task of its
        own: ``asyncio.shield`` or ``create_task`` would leave one running on, unawaited, after
        the task ended. A task cancelled again meanwhile (or a second Ctrl-C) gives the abort
        up, and that interruption goes on: none is swallowed."""
        if abort is None:
            return
        try:
            self._run(abort)
        except Exception as exc:
            abort_failed(abort, exc)

    def _setup(self, params: dict[str, Any]) -> None:
        """Learn, once, what ``model=None`` and ``dialect="auto"`` leave open."""
        with self._setup_lock:
            if self._core.dialect is None:
                self._probe_server()
            self._core.refuse_unserved(params)
            if self._core.model is None and not self._core.names_model(params):
                names = self._model_list()
                self._core.adopt_models(names)

    def _list_options(
        self, where: str, prompt: Prompt, output_type: Any, endpoint: Endpoint, params: Any
    ) -> None:
        """The token ids of a choice's options, asked once per output type where the server
        reads ``logprob_token_ids`` (`ClientCore.unlisted_options`): set-up requests, before
        the call's."""
        unlisted = self._core.unlisted_options(where, prompt, output_type, endpoint, params)
        if unlisted is not None:
            unlisted.adopt([self._run(call) for call in unlisted.calls])

    def _model_list(self) -> list[str]:
        """The served models, for ``model=None``: the probes' list, else asked for now."""
        if self._core.listed is not None:
            return self._core.listed
        try:
            return self._run(self._core.models_call())
        except errors.LMClientError as exc:
            raise self._core.unlisted(exc) from exc

    def _probe_server(self) -> ServerInfo:
        """Detect the server (the set-up lock held). None recognised is ``generic``: a probe
        never fails a call, whatever it got (`ClientCore.adopt_probes`)."""
        answers = self._probe_round()
        if self._core.unreached(answers):  # wait for a server starting up, or fail as it does
            try:
                self._run(self._core.models_call())
            except errors.APIConnectionError as exc:
                raise self._core.unreachable(exc, "detected what server it is") from None
            answers = self._probe_round()  # once more, now that it answers
        return self._core.adopt_probes(answers, mocked=self._transport.mocked())

    def _probe_round(self) -> list[Any]:
        """Detection's requests: the model list, then the probes it leaves open, at once."""
        listing = self._probe(self._core.listing_call())
        calls = self._core.probe_calls(listing)
        with ThreadPoolExecutor(sum(c is not None for c in calls)) as pool:  # network waits
            return [*pool.map(self._probe, calls), listing]

    def _probe(self, call: Lookup[Any] | None) -> Any:
        if call is None:  # not asked
            return None
        try:
            return self._run(call)
        except errors.ClientClosedError:
            raise
        except Exception as exc:  # a probe that fails never fails the user's call (even a mock's)
            return exc

    def _embeddings(self, job: EmbeddingJob, concurrency: int) -> Embeddings:
        if not job.ready:
            self._setup({"model": job.model})
        return job.result(self._send_all(job.calls(), concurrency))

    def _send_all(self, calls: list[Lookup[T]], concurrency: int) -> list[T]:
        """Send every call, at most ``concurrency`` at once; the answers in the calls' order.
        A failure cancels the requests not started yet."""
        if len(calls) <= 1 or concurrency == 1:
            return [self._run(call) for call in calls]
        pool = ThreadPoolExecutor(min(concurrency, len(calls)))  # threads share one pool
        try:
            return list(pool.map(self._run, calls))
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _open_watched(
        self, prompt: Prompt, output_type: Any, endpoint: Endpoint, params: dict[str, Any]
    ) -> tuple[StreamState, Opened]:
        """`stream`'s opener with a `Watch`, which the stream reports its end to."""
        with self._observer.watch(endpoint, stream=True) as watch:
            call = self._prepare(
                "stream", prompt, output_type, endpoint, params, None, watch, reading="stream"
            )
            state = StreamState(call)
            state.watch = watch
            return state, self._open(call, watch)

    def _open(self, call: Call, watch: Watch | None = None) -> Opened:
        """Open a stream, retrying while nothing has been yielded yet."""
        while True:
            try:
                timeouts = call.start_attempt()
                if watch is not None:
                    watch.sending(call)
                response = self._transport.stream(
                    call.request, timeouts, call.settings.max_response_bytes, call.deadline_at
                )
                if watch is not None:
                    watch.received(response.status, response.headers)
                if response.status < 300:
                    return response
                try:
                    body = b"".join(response.chunks)
                finally:
                    response.close()
                raise api_error(response.status, response.headers, body)
            except errors.LMClientError as exc:
                self._abort(call.aborting(exc))
                delay = call.backoff(exc)
                if watch is not None:
                    watch.retrying(delay, exc)
            except BaseException as exc:  # the program's own (as in `_run`)
                self._abort(call.aborting(exc))
                raise
            time.sleep(delay)

    def close(self) -> None:
        """Close the connections lmclient opened (a user's ``http_client`` stays open). A
        closed client refuses every later call and stream (`ClientClosedError`), before any
        request: it never reopens a connection."""
        self._transport.close()
        self._transport = self._transport.closed()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
