"""`Client`: the blocking shell around the sans-I/O core. `AsyncClient` mirrors it line for line."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import TYPE_CHECKING, Any, TypeVar, overload

import httpx

from . import errors
from ._core import DEFAULT_MAX_RESPONSE_BYTES, Call, ClientCore, Lookup
from ._dialects import Endpoint, ServerInfo, Whitespace
from ._markers import Choice, Grammar, Regex
from ._params import Prompt
from ._proxies import environment_proxy
from ._response import Response
from ._status import api_error
from ._stream import Opened, Stream
from ._stream_state import StreamState
from ._transports.sync import SyncTransport
from ._usage import UsageTotal

if TYPE_CHECKING:
    from typing_extensions import Self, Unpack

    from ._params import CallParams, CreateParams

__all__ = ["Client"]

T = TypeVar("T")


class Client:
    """A blocking client for one OpenAI-compatible server.

    >>> client = Client("http://127.0.0.1:8000/v1", model="Qwen/Qwen3-0.6B")
    >>> client.generate("Positive?", Literal["yes", "no"])
    'yes'
    """

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
        defaults: Mapping[str, Any] | None = None,
        whitespace: Whitespace = "compact",
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
        )
        proxy = None if http_client is not None else environment_proxy(self._core.base_url)
        self._transport = SyncTransport(http_client, proxy)
        self._setup_lock = threading.Lock()

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
    def generate(self, prompt: Prompt, output_type: type[T], **params: Unpack[CallParams]) -> T: ...
    @overload
    def generate(
        self, prompt: Prompt, output_type: Regex | Grammar | Choice, **params: Unpack[CallParams]
    ) -> str: ...
    @overload
    def generate(self, prompt: Prompt, output_type: Any, **params: Unpack[CallParams]) -> Any: ...
    def generate(self, prompt: Prompt, output_type: Any = str, **params: Any) -> Any:
        """Chat completion of ``prompt``, returned as a validated ``output_type``."""
        return self._create("generate", prompt, output_type, "chat", params).values[0]

    @overload
    def complete(self, prompt: str, **params: Unpack[CallParams]) -> str: ...
    @overload
    def complete(self, prompt: str, output_type: type[T], **params: Unpack[CallParams]) -> T: ...
    @overload
    def complete(
        self, prompt: str, output_type: Regex | Grammar | Choice, **params: Unpack[CallParams]
    ) -> str: ...
    @overload
    def complete(self, prompt: str, output_type: Any, **params: Unpack[CallParams]) -> Any: ...
    def complete(self, prompt: str, output_type: Any = str, **params: Any) -> Any:
        """Plain completion (``/v1/completions``) of ``prompt``, as a validated ``output_type``."""
        return self._create("complete", prompt, output_type, "completions", params).values[0]

    @overload
    def create(
        self, prompt: Prompt, *, endpoint: Endpoint = ..., **params: Unpack[CreateParams]
    ) -> Response[str]: ...
    @overload
    def create(
        self,
        prompt: Prompt,
        output_type: type[T],
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
        output_type: Any,
        *,
        endpoint: Endpoint = ...,
        **params: Unpack[CreateParams],
    ) -> Response[Any]: ...
    def create(
        self, prompt: Prompt, output_type: Any = str, *, endpoint: Endpoint = "chat", **params: Any
    ) -> Response[Any]:
        """The full `Response`: every choice's value and text, usage, finish reasons, raw body."""
        return self._create("create", prompt, output_type, endpoint, params)

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
        output_type: type[T],
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
        output_type: Any,
        *,
        endpoint: Endpoint = ...,
        **params: Unpack[CallParams],
    ) -> Stream[Any]: ...
    def stream(
        self, prompt: Prompt, output_type: Any = str, *, endpoint: Endpoint = "chat", **params: Any
    ) -> Stream[Any]:
        """Stream the answer: iterate for text deltas, ``items()`` for array elements as they
        close, ``value`` for the validated whole. Nothing is sent before the stream
        is entered or iterated; bad input raises here."""
        self._core.validate("stream", prompt, output_type, endpoint, params)

        def opener() -> tuple[StreamState, Opened]:
            call = self._prepare("stream", prompt, output_type, endpoint, params, stream=True)
            return StreamState(call), self._open(call)

        return Stream(opener)

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
        ``usage`` (a `UsageTotal`) gets every finished item's usage added, failed ones too."""
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
        """Probe the server now and say what it is (kind, version, dialect, models): what
        ``dialect="auto"`` learns before the first call. A dialect given explicitly is kept."""
        with self._setup_lock:
            return self._core.server_info or self._probe_server()

    def models(self) -> list[str]:
        """The ids of the models the server serves (``GET /v1/models``)."""
        return self._send(self._core.models_call())

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
    ) -> list[Any]:
        items = self._core.batch(where, prompts, output_type, endpoint, params, concurrency)
        results: list[Any] = [None] * len(items)
        pool = ThreadPoolExecutor(max(1, min(concurrency, len(items))))  # threads share one pool
        try:
            futures = {
                pool.submit(self._create, where, prompt, tp, endpoint, params): index
                for index, (prompt, tp) in enumerate(items)
            }
            for future in as_completed(futures):
                index = futures[future]
                failure = future.exception()
                if usage is not None:
                    usage.add(future.result() if failure is None else failure)
                if failure is None:
                    results[index] = future.result().values[0]
                elif return_exceptions and isinstance(failure, errors.LMClientError):
                    results[index] = failure
                else:
                    raise failure
                if on_result is not None:
                    on_result(index, results[index])
        finally:  # on failure or interruption, what has not started never starts
            pool.shutdown(wait=True, cancel_futures=True)
        return results

    def _create(
        self,
        where: str,
        prompt: Prompt,
        output_type: Any,
        endpoint: Endpoint,
        params: dict[str, Any],
    ) -> Response[Any]:
        core = self._core
        if core.model is None or core.dialect is None:  # not `core.ready` (a call, every time)
            core.validate(where, prompt, output_type, endpoint, params)
            self._setup()
        call = core.prepare(where, prompt, output_type, endpoint, params)
        # `_send`'s loop, with the re-asks (max_reasks) in it too: the hot path of every call.
        while True:
            try:
                raw = self._transport.send(
                    call.request, call.timeouts(), call.max_response_bytes, call.deadline_at
                )
                return call.finish(raw.status, raw.headers, raw.body)
            except errors.ValidationError as exc:
                call = call.reask(exc)
                continue
            except errors.LMClientError as exc:
                delay = call.backoff(exc)
            time.sleep(delay)

    def _prepare(
        self,
        where: str,
        prompt: Prompt,
        output_type: Any,
        endpoint: Endpoint,
        params: dict[str, Any],
        *,
        stream: bool = False,
    ) -> Call:
        """The call's request; on first use, after the set-up requests (input checked first)."""
        if not self._core.ready:
            self._core.validate(where, prompt, output_type, endpoint, params)
            self._setup()
        return self._core.prepare(where, prompt, output_type, endpoint, params, stream=stream)

    def _setup(self) -> None:
        """Learn, once, what ``model=None`` and ``dialect="auto"`` leave open."""
        with self._setup_lock:
            if self._core.dialect is None:
                self._probe_server(advisory=self._core.forced is not None)
            if self._core.model is None:
                self._core.adopt_models(self._send(self._core.models_call()))

    def _probe_server(self, *, advisory: bool = False) -> ServerInfo:
        """All probes at once (the set-up lock held). ``advisory``: a forced dialect only asks
        for the server's release, so a server that answers no probe is not an error here (the
        call itself will say what is wrong)."""
        calls = self._core.probe_calls()
        with ThreadPoolExecutor(len(calls)) as pool:  # probes wait on the network only
            answers = list(pool.map(self._probe, calls))
        if not advisory and all(a is None for a in answers):  # report why, learn nothing
            answers[-1] = self._send(self._core.models_call())
        return self._core.adopt_probes(answers)

    def _probe(self, call: Lookup[Any]) -> Any:
        try:
            return self._send(call)
        except Exception:  # a probe that fails never fails the user's call (even a mock's)
            return None

    def _send(self, call: Lookup[T]) -> T:
        while True:
            try:
                raw = self._transport.send(
                    call.request, call.timeouts(), call.max_response_bytes, call.deadline_at
                )
                return call.finish(raw.status, raw.headers, raw.body)
            except errors.LMClientError as exc:
                delay = call.backoff(exc)
            time.sleep(delay)

    def _open(self, call: Call) -> Opened:
        """Open a stream, retrying while nothing has been yielded yet."""
        while True:
            try:
                response = self._transport.stream(
                    call.request, call.timeouts(), call.max_response_bytes, call.deadline_at
                )
                if response.status < 300:
                    return response
                try:
                    body = b"".join(response.chunks)
                finally:
                    response.close()
                raise api_error(response.status, response.headers, body)
            except errors.LMClientError as exc:
                delay = call.backoff(exc)
            time.sleep(delay)

    def close(self) -> None:
        """Close the connections lmclient opened (a user's ``http_client`` stays open)."""
        self._transport.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
