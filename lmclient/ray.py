"""Typed, validated generation as a Ray Data stage: ``pip install 'lmclient[ray]'``.

`Generate` is a callable class for `ray.data.Dataset.map_batches` with an actor pool: each actor
holds one `AsyncClient` and runs each batch through `AsyncClient.generate_many`'s own machinery
(the same checks before any request, bounded concurrency, retries, deadlines, each call's
token budget), so a row costs what it costs in one process. A prompt column becomes the output
type's columns (one per field of a record type, else ``value``), plus ``prompt_tokens``,
``completion_tokens``, ``error_type`` and ``error_message`` (`lmclient._rows`), beside the input
columns. Every input row gives exactly one output row, in the batch's order: a failed row
carries its error, unless ``on_error="raise"``, where the first failure fails the job.
`generate` wires it up::

    import ray, lmclient.ray

    ds = ray.data.read_parquet("prompts.parquet")
    people = lmclient.ray.generate(ds, "http://router:8000/v1", Person, actors=8, concurrency=64)
    people.write_parquet("people/")

This module imports Ray and pyarrow; ``import lmclient`` never imports it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import Any, Literal

try:
    import pyarrow as pa
    import ray.data
except ImportError as exc:  # the extra is not installed: say which one
    raise ImportError(
        f"lmclient.ray needs Ray Data ({exc.name} is missing): pip install 'lmclient[ray]'"
    ) from exc

import msgspec

from ._async_client import AsyncClient
from ._output.types import compile_output
from ._rows import Columns

__all__ = ["Generate", "OnError", "generate"]

OnError = Literal["row", "raise"]
_CLOSE_TIMEOUT = 5.0  # bound on closing the connections when the actor exits


class Generate:
    """A Ray Data stage (a callable class for ``map_batches``, ``batch_format="pyarrow"``).

    ``base_url``, ``model`` and ``client`` (any other `AsyncClient` argument: ``dialect``,
    ``api_key``, ``max_retries``, ``deadline``, ...) make the actor's one client;
    ``prompt_column`` holds each row's prompt (a str, or a list of messages); ``concurrency``
    bounds the actor's requests in flight; ``params`` are `generate_many`'s per-call parameters
    (``max_tokens``, ``temperature``, ``deadline``, ...), but no ``token_budget``: a budget
    here would be each batch's (docs/scaling.md says why that is refused). Everything is
    checked here, in the driver's process when `generate` builds the stage, before any actor
    starts.

    One batch runs at a time per actor (the rest wait their turn), so ``concurrency`` is the
    actor's bound, not a batch's: pick batches several times ``concurrency`` long, so that the
    few calls still running at a batch's end leave the pool idle for little of its time.
    """

    def __init__(
        self,
        base_url: str | None,
        output_type: Any = str,
        *,
        model: str | None = None,
        prompt_column: str = "prompt",
        concurrency: int = 16,
        on_error: OnError = "row",
        client: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None  # Ray's, where the connections live
        self._loop_thread: int | None = None
        if on_error not in ("row", "raise"):
            raise ValueError(f'on_error must be "row" or "raise", not {on_error!r}')
        if "token_budget" in params:
            raise ValueError(
                "lmclient.ray takes no token_budget: it would be each batch's, as each batch is "
                "a generate_many in some actor with no count shared, so the job's spend would "
                "grow with its batches and which rows it stopped would depend on how Ray split "
                'them. Bound each row instead: max_tokens, max_reasks, client={"defaults": '
                '{"token_budget": N}} (each call\'s re-asks)'
            )
        self._columns = Columns(output_type)
        if prompt_column in self._columns.names:
            raise ValueError(
                f"prompt_column {prompt_column!r} is also an output column: name it otherwise"
            )
        self._client = AsyncClient(base_url, model, **dict(client or {}))
        # generate_many's own checks (parameters, the type, concurrency) on a stand-in prompt:
        # a mistake stops the job before its first batch, not in every actor.
        self._client._core.batch("generate", ["?"], output_type, "chat", params, concurrency)
        self._output_type = output_type
        self._prompt_column = prompt_column
        self._concurrency = concurrency
        self._row_errors = on_error == "row"
        self._params = params
        self._turn = asyncio.Lock()  # one batch at a time: `concurrency` bounds the actor

    async def __call__(self, batch: pa.Table) -> pa.Table:
        """The batch with the output columns appended, one row for each of its rows."""
        clash = set(batch.column_names) & set(self._columns.names)
        if clash:
            raise ValueError(
                f"the input already has column(s) {sorted(clash)}, which this stage writes: "
                "rename or drop them first"
            )
        self._loop, self._loop_thread = asyncio.get_running_loop(), threading.get_ident()
        prompts = batch.column(self._prompt_column).to_pylist()
        async with self._turn:
            outcomes = await self._client._many(
                "generate",
                "chat",
                prompts,
                self._output_type,
                self._concurrency,
                self._row_errors,
                None,
                None,
                self._params,
                whole=True,
            )
        columns = self._columns.split(outcomes)
        for name in self._columns.names:
            batch = batch.append_column(name, pa.array(columns[name]))
        return batch

    def close(self) -> None:
        """Close the client's connections, on the event loop they were made in: Ray Data calls
        ``__del__`` when an actor exits gracefully, from another thread than its loop's."""
        loop, self._loop = self._loop, None
        if loop is None or loop.is_closed() or not loop.is_running():
            return  # no batch ran, or the loop is gone and its sockets with it
        done = asyncio.run_coroutine_threadsafe(self._client.aclose(), loop)
        if threading.get_ident() != self._loop_thread:  # waiting on the loop's own thread hangs
            done.result(_CLOSE_TIMEOUT)

    def __del__(self) -> None:
        self.close()


def generate(
    dataset: ray.data.Dataset,
    base_url: str | None,
    output_type: Any = str,
    *,
    actors: int = 1,
    batch_size: int | None = None,
    num_cpus: float = 1.0,
    model: str | None = None,
    prompt_column: str = "prompt",
    concurrency: int = 16,
    on_error: OnError = "row",
    client: Mapping[str, Any] | None = None,
    **params: Any,
) -> ray.data.Dataset:
    """``dataset`` with `Generate`'s columns, from a fixed pool of ``actors`` actors of
    ``num_cpus`` each, in batches of ``batch_size`` rows (default: 16 × ``concurrency``).
    Lazy, like every Ray Data transform: the requests start when the result is consumed. The
    arguments are checked here, before any actor starts; the rest are `Generate`'s."""
    kwargs: dict[str, Any] = {
        "model": model,
        "prompt_column": prompt_column,
        "concurrency": concurrency,
        "on_error": on_error,
        "client": client,
        **params,
    }
    Generate(base_url, output_type, **kwargs).close()  # every check, in this process
    return dataset.map_batches(
        Generate,
        fn_constructor_args=(base_url, _Shipped(output_type)),
        fn_constructor_kwargs=kwargs,
        compute=ray.data.ActorPoolStrategy(size=actors),
        batch_size=16 * concurrency if batch_size is None else batch_size,
        batch_format="pyarrow",
        num_cpus=num_cpus,
    )


def _fingerprint(output_type: Any) -> bytes:
    """What lmclient makes of a type (its constraint), as bytes to compare across processes."""
    spec = compile_output(output_type)
    return msgspec.json.encode([spec.kind, spec.schema, spec.pattern, spec.options, spec.grammar])


class _Shipped:
    """An output type on its way to the actors, checked when it arrives (`_arrived`).

    Ray pickles a class defined in ``__main__`` (a script's) by value, with cloudpickle, which
    rebuilds a ``msgspec.Struct`` without its fields: ``Person`` arrives as a struct of none, and
    decodes every answer to ``Person()``. Shipped with its fingerprint, such a type fails the
    actor's start, saying so, instead of filling the dataset with empty values."""

    __slots__ = ("output_type",)

    def __init__(self, output_type: Any) -> None:
        self.output_type = output_type

    def __reduce__(self) -> tuple[Any, tuple[Any, bytes]]:
        return _arrived, (self.output_type, _fingerprint(self.output_type))


def _arrived(output_type: Any, fingerprint: bytes) -> Any:
    if _fingerprint(output_type) != fingerprint:
        raise TypeError(
            f"the output type {output_type!r} did not survive the trip to a Ray worker: its "
            f"constraint is {_fingerprint(output_type).decode()} there, "
            f"{fingerprint.decode()} in the driver (cloudpickle rebuilds a msgspec.Struct "
            "defined in __main__ without its fields). Define it in a module the workers import."
        )
    return output_type
