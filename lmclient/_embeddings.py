"""Embeddings and token counts: every decision of `embed` and `tokenize`, none of their I/O.

Which server has which endpoint, and which of their fields it reads, is one table
(`ENDPOINTS`, keyed by dialect name), read from each server's source:

* vLLM (`entrypoints/pooling/embed`, `pooling/base/protocol.py`): ``/v1/embeddings`` reads
  ``encoding_format`` ("base64": float32 in the host's order, little-endian on the platforms
  vLLM runs on) and ``dimensions`` (400 for a model without Matryoshka support); ``POST
  /tokenize`` at the root takes ``{model, prompt, add_special_tokens}`` and answers
  ``{count, max_model_len, tokens}``.
* SGLang 0.5.23 (`serving_embedding.py`, `serving_tokenize.py`): the same fields, base64 packed
  little-endian explicitly; ``/tokenize`` (also ``/v1/tokenize``) in vLLM's shape. Older
  releases ignore ``encoding_format`` and answer floats, which are read as well.
* llama.cpp (`server-context.cpp`, started with ``--embeddings``): ``encoding_format`` read,
  ``dimensions`` not (refused here); ``POST /tokenize`` takes ``{content, add_special}`` and
  answers ``{tokens}``.
* Ollama (`openai/openai.go`): ``encoding_format`` and ``dimensions`` read; no tokenizer
  endpoint. TGI has no embeddings endpoint (that is TEI, another server): refused.
* OpenAI: ``encoding_format`` and ``dimensions``; no tokenizer endpoint. LM Studio (closed
  source) and unknown servers are asked for JSON floats, the format every one answers.

A server may answer floats where base64 was asked (an older release that ignores the field):
both shapes are decoded, since each is self-describing. A server that ignores ``dimensions``
cannot go unnoticed either: every vector's length is checked against it.
"""

from __future__ import annotations

import array
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple

import msgspec

from . import errors
from ._call import Lookup
from ._media import content_media, prompt_messages, wire_messages
from ._output.depth import body_decoder
from ._params import Prompt, check_params
from ._request import PreparedRequest
from ._wire.protocol import Usage

if TYPE_CHECKING:
    from typing import TypeAlias

    from ._core import ClientCore

    Vector: TypeAlias = array.array[float]
else:
    Vector = array.array  # subscriptable from Python 3.12 only

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_CONCURRENCY",
    "ENDPOINTS",
    "Decoded",
    "EmbeddingJob",
    "Embeddings",
    "Endpoints",
    "Vector",
    "attempt_params",
    "check_tokens",
    "count_call",
    "decode_embeddings",
    "tokenize_call",
]

# Texts per request: large enough that the per-request cost (a round trip, the server's
# scheduling) is spread thin, small enough that one answer stays far below max_response_bytes
# (128 vectors of 4,096 floats are 2.8 MB of base64) and that several requests can keep a
# server's parallel slots busy. OpenAI's own limit is 2,048 inputs per request.
DEFAULT_BATCH_SIZE = 128
# Requests in flight at once for one embed call with several batches: a few keep a server's
# batcher fed without taking the whole connection pool.
DEFAULT_CONCURRENCY = 4

_LITTLE = sys.byteorder == "little"


class Endpoints(NamedTuple):
    """What one dialect's server answers besides generation."""

    embeddings: bool  # POST /v1/embeddings
    base64: bool  # reads encoding_format "base64" (else: asked for floats)
    dimensions: bool  # reads dimensions, or refuses a model that cannot (never ignores it)
    tokenize: str | None  # the shape of POST /tokenize: "vllm", "llamacpp"; None: none


ENDPOINTS: dict[str, Endpoints] = {
    "vllm": Endpoints(True, True, True, "vllm"),
    "vllm-guided": Endpoints(True, True, True, "vllm"),
    "sglang": Endpoints(True, True, True, "vllm"),
    "llamacpp": Endpoints(True, True, False, "llamacpp"),
    "tgi": Endpoints(False, False, False, None),
    "ollama": Endpoints(True, True, True, None),
    "lmstudio": Endpoints(True, False, True, None),
    "sglang-gateway": Endpoints(False, False, False, None),  # 501 with --backend openai
    "openai": Endpoints(True, True, True, None),
    "generic": Endpoints(True, False, True, None),
}


class Embeddings(msgspec.Struct, frozen=True):
    """The answer of `Client.create_embeddings`: one vector per text, in the texts' order.

    Each vector is an ``array.array("f")``: the float32 values the server computed, 4 bytes
    each (a ``list[float]`` takes 32 per value), indexable and iterable like a list, and a
    buffer, so ``numpy.frombuffer(vector, dtype=numpy.float32)`` views it without a copy.
    ``usage`` sums every request's token counts (``None`` where some request reported none);
    ``model`` is the model the server named in its first answer."""

    vectors: list[Vector]
    usage: Usage | None = None
    model: str | None = None


class _Item(msgspec.Struct, gc=False):
    # bytes: msgspec decodes a base64 string itself (in C); a list: the JSON floats
    embedding: bytes | list[float]
    index: int


class _Batch(msgspec.Struct, gc=False):
    data: list[_Item]
    model: str | None = None
    usage: Usage | None = None


class Decoded(NamedTuple):
    """One request's answer: its vectors in input order, the model named, the usage."""

    vectors: list[Vector]
    model: str | None
    usage: Usage | None


class _Tokens(msgspec.Struct, gc=False):
    tokens: list[int]
    count: int | None = None


class _InputTokens(msgspec.Struct):
    input_tokens: Annotated[int, msgspec.Meta(ge=0)]


_BATCH = body_decoder(_Batch, "embeddings")
_INPUT_TOKENS = body_decoder(_InputTokens, "token count")
_TOKENS = body_decoder(_Tokens, "tokenize")
_encode = msgspec.json.Encoder().encode


def decode_embeddings(body: bytes, expected: int, dimensions: int | None = None) -> Decoded:
    """One answer of ``/v1/embeddings`` for ``expected`` texts, its vectors in input order
    (by ``index``) as float32 arrays; a `ProtocolError` carrying the body for anything else:
    bad JSON or base64, a byte length that is not whole float32s, a missing, repeated or
    extra index, vectors of different lengths, or not of the ``dimensions`` asked."""
    batch = _BATCH(body)
    items = batch.data
    if len(items) != expected:
        raise errors.ProtocolError(f"{len(items)} embeddings for {expected} inputs", body=body)
    vectors: list[Any] = [None] * expected
    for item in items:
        index = item.index
        if not 0 <= index < expected or vectors[index] is not None:
            raise errors.ProtocolError(f"embedding index {index} is out of place", body=body)
        raw = item.embedding
        if isinstance(raw, bytes):
            if len(raw) % 4:
                raise errors.ProtocolError(
                    f"a base64 embedding of {len(raw)} bytes is not whole float32 values",
                    body=body,
                )
            vector = array.array("f")
            vector.frombytes(raw)
            if not _LITTLE:
                vector.byteswap()  # every server sends little-endian float32
        else:
            vector = array.array("f", raw)
        vectors[index] = vector
    size = dimensions if dimensions is not None else len(vectors[0]) if vectors else 0
    for index, vector in enumerate(vectors):
        if len(vector) != size:
            why = (
                f"not the {size} asked: the server may ignore dimensions"
                if dimensions is not None
                else f"embedding 0 has {size}"
            )
            raise errors.ProtocolError(
                f"embedding {index} has {len(vector)} dimensions, {why}", body=body
            )
    return Decoded(vectors, batch.model, batch.usage)


def _check_count(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, not {value!r}")


def attempt_params(where: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """``timeout``, ``deadline``, ``max_retries`` as a call's, checked; the ones not given
    (``None``) left to the client's settings."""
    given = {name: value for name, value in params.items() if value is not None}
    check_params(where, given)
    return given


class EmbeddingJob:
    """One `embed` call: its texts checked and cut into batches, one `Lookup` per batch, and
    their answers joined in input order."""

    __slots__ = ("batch_size", "core", "dimensions", "model", "params", "texts")

    def __init__(
        self,
        core: ClientCore,
        where: str,
        texts: Sequence[str],
        *,
        model: str | None,
        dimensions: int | None,
        batch_size: int,
        concurrency: int,
        params: Mapping[str, Any],
    ) -> None:
        """Every check that needs no server, before any request."""
        if isinstance(texts, (str, bytes)):
            raise TypeError(f"{where}() takes a sequence of str, not a single str: pass [text]")
        if not isinstance(texts, Sequence):
            raise TypeError(f"{where}() takes a sequence of str, not {type(texts).__name__}")
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"{where}(): each text must be a str, not {type(text).__name__}")
        if model is not None and not isinstance(model, str):
            raise TypeError(f"{where}(): model must be a str, not {type(model).__name__}")
        if dimensions is not None:
            _check_count(f"{where}(): dimensions", dimensions)
        _check_count(f"{where}(): batch_size", batch_size)
        _check_count(f"{where}(): concurrency", concurrency)
        self.core = core
        self.texts = list(texts)
        self.model = model
        self.dimensions = dimensions
        self.batch_size = batch_size
        self.params = attempt_params(where, params)
        dialect = core.dialect or core.forced
        if dialect is not None:
            self.refusals(dialect.name)

    @property
    def ready(self) -> bool:
        """The dialect and the model are known: no set-up request is needed first."""
        if not self.texts:
            return True  # nothing to send: nothing to learn first
        return self.core.dialect is not None and (self.model or self.core.model) is not None

    def refusals(self, dialect: str) -> Endpoints:
        """The dialect's endpoints, or `UnsupportedConstraintError` for what it cannot do."""
        endpoints = ENDPOINTS[dialect]
        if not endpoints.embeddings:
            raise errors.UnsupportedConstraintError(
                f"{dialect} servers have no embeddings endpoint; serve the model with an "
                "embedding server (vLLM, llama.cpp --embeddings, SGLang, TEI behind another "
                "dialect)"
            )
        if self.dimensions is not None and not endpoints.dimensions:
            raise errors.UnsupportedConstraintError(
                f"{dialect} servers ignore dimensions on /v1/embeddings (the vectors would "
                "keep the model's size); truncate and normalise them yourself"
            )
        return endpoints

    def calls(self) -> list[Lookup[Decoded]]:
        """One request per batch of at most ``batch_size`` texts (none for no texts); their
        deadline, if any, runs from now for all of them: it bounds the whole call."""
        core = self.core
        if not self.texts:
            return []
        assert core.dialect is not None, "set-up (dialect) must come first"
        endpoints = self.refusals(core.dialect.name)
        model = self.model or core.model
        head: dict[str, Any] = {"model": model}
        if endpoints.base64:
            head["encoding_format"] = "base64"
        if self.dimensions is not None:
            head["dimensions"] = self.dimensions
        url = core.base_url + "/embeddings"
        headers = core.post_headers
        calls = []
        texts = self.texts
        for start in range(0, len(texts), self.batch_size):
            chunk = texts[start : start + self.batch_size]
            body = _encode({**head, "input": chunk})
            request = PreparedRequest("POST", url, headers, body)
            calls.append(Lookup.new(core.settings, request, self._decoder(len(chunk)), self.params))
        return calls

    def _decoder(self, expected: int) -> Callable[[bytes], Decoded]:
        dimensions = self.dimensions
        return lambda body: decode_embeddings(body, expected, dimensions)

    @staticmethod
    def result(batches: Sequence[Decoded]) -> Embeddings:
        """The batches' answers, in order, as one."""
        vectors: list[Vector] = []
        for batch in batches:
            vectors += batch.vectors
        size = {len(v) for v in vectors}
        if len(size) > 1:
            raise errors.ProtocolError(
                f"the batches' embeddings differ in size: {sorted(size)} dimensions"
            )
        reported = [b.usage for b in batches if b.usage is not None]
        usage = None
        if batches and len(reported) == len(batches):
            usage = Usage(
                prompt_tokens=_sum([u.prompt_tokens for u in reported]),
                total_tokens=_sum([u.total_tokens for u in reported]),
            )
        return Embeddings(vectors, usage, batches[0].model if batches else None)


def _sum(counts: list[int | None]) -> int | None:
    """The sum of token counts, ``None`` if some request did not report its count."""
    return None if None in counts else sum(c for c in counts if c is not None)


def tokenize_call(
    core: ClientCore,
    where: str,
    text: str,
    *,
    model: str | None,
    add_special_tokens: bool,
    params: Mapping[str, Any],
) -> Lookup[list[int]]:
    """The request for ``text``'s token ids (the dialect known); refused where the server has
    no tokenizer endpoint. ``add_special_tokens`` is always sent, as the servers' defaults
    differ (vLLM and SGLang add them, llama.cpp does not)."""
    ready = check_tokens(core, where, text, model, add_special_tokens)
    assert ready and core.dialect is not None, "set-up (dialect, model) must come first"
    request = _text_request(core, core.dialect.name, text, model, add_special_tokens)
    return Lookup.new(core.settings, request, _token_ids, attempt_params(where, params))


def _text_messages(prompt: Any) -> list[Any]:
    """A prompt given as messages of text, checked (for a token count: the servers' tokenizer
    endpoints take no media)."""
    messages, parts = prompt_messages(prompt)
    if parts and content_media(messages):
        raise TypeError("a token count takes messages of text, without media")
    return messages if not parts else wire_messages(messages, "generic")


def count_call(
    core: ClientCore,
    where: str,
    prompt: Prompt,
    *,
    model: str | None,
    add_special_tokens: bool,
    params: Mapping[str, Any],
) -> Lookup[int]:
    """The request for the number of tokens of ``prompt``: a text's, as `tokenize_call`; a
    list of messages', as the server renders them for a chat completion (its chat template and
    generation prompt included): vLLM's and SGLang's ``/tokenize`` with ``messages`` (their
    defaults are that rendering), llama.cpp's ``/v1/chat/completions/input_tokens``."""
    ready = check_tokens(core, where, prompt, model, add_special_tokens)
    assert ready and core.dialect is not None, "set-up (dialect, model) must come first"
    dialect = core.dialect.name
    if isinstance(prompt, str):
        request = _text_request(core, dialect, prompt, model, add_special_tokens)
        return Lookup.new(core.settings, request, _token_count, attempt_params(where, params))
    body = _encode({"model": model or core.model, "messages": _text_messages(prompt)})
    if ENDPOINTS[dialect].tokenize == "llamacpp":
        url = core.base_url + "/chat/completions/input_tokens"
        request = PreparedRequest("POST", url, core.post_headers, body)
        return Lookup.new(core.settings, request, _input_tokens, attempt_params(where, params))
    request = PreparedRequest("POST", core.root_url + "/tokenize", core.post_headers, body)
    return Lookup.new(core.settings, request, _token_count, attempt_params(where, params))


def _text_request(
    core: ClientCore, dialect: str, text: str, model: str | None, add_special_tokens: bool
) -> PreparedRequest:
    body: dict[str, Any] = {"model": model or core.model}
    if ENDPOINTS[dialect].tokenize == "llamacpp":
        body.update(content=text, add_special=add_special_tokens)
    else:
        body.update(prompt=text, add_special_tokens=add_special_tokens)
    return PreparedRequest("POST", core.root_url + "/tokenize", core.post_headers, _encode(body))


def check_tokens(
    core: ClientCore, where: str, prompt: Any, model: Any, add_special_tokens: Any
) -> bool:
    """The checks of a `tokenize` or `count_tokens` call's input (a str; for `count_tokens`,
    or messages), and the dialect's refusal once it is known (given, or probed); whether the
    call is ready (dialect and model known)."""
    if not isinstance(add_special_tokens, bool):
        raise TypeError(f"{where}(): add_special_tokens must be a bool")
    if not isinstance(prompt, str):
        if where != "count_tokens":
            raise TypeError(f"{where}() takes a str, not {type(prompt).__name__}")
        _text_messages(prompt)
        if add_special_tokens:
            raise ValueError(
                f"{where}(): add_special_tokens applies to a text; the chat template adds "
                "the special tokens of messages"
            )
    if model is not None and not isinstance(model, str):
        raise TypeError(f"{where}(): model must be a str, not {type(model).__name__}")
    known = core.dialect or core.forced
    if known is not None and ENDPOINTS[known.name].tokenize is None:
        able = sorted(name for name, e in ENDPOINTS.items() if e.tokenize)
        raise errors.UnsupportedConstraintError(
            f"{known.name} servers have no tokenizer endpoint; {where}() works with the "
            f"dialects {', '.join(able)}"
        )
    return core.dialect is not None and (model or core.model) is not None


def _token_ids(body: bytes) -> list[int]:
    answer = _TOKENS(body)
    if answer.count is not None and answer.count != len(answer.tokens):
        raise errors.ProtocolError(
            f"the tokenize answer counts {answer.count} tokens but lists {len(answer.tokens)}",
            body=body,
        )
    return answer.tokens


def _token_count(body: bytes) -> int:
    return len(_token_ids(body))


def _input_tokens(body: bytes) -> int:
    return _INPUT_TOKENS(body).input_tokens
