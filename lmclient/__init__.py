"""lmclient: a small, fast, typed client for self-hosted LLM servers.

Pass a prompt and an output type; get back a validated value of that type.

The exceptions are imported at once; everything else on first use (PEP 562), so that
``import lmclient`` — and the ``lmclient`` command's ``--help`` — do not pay for httpx and
asyncio until a client is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .__version__ import __version__ as __version__
from ._lazy import lazy_attributes as _lazy_attributes
from .errors import (
    APIConnectionError,
    APIError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ClientClosedError,
    ConfidenceError,
    ConfigurationError,
    ConstraintIgnoredError,
    ContextLengthError,
    LMClientError,
    MediaError,
    NotFoundError,
    NoValueError,
    PermissionDeniedError,
    ProtocolError,
    RateLimitError,
    RefusalError,
    RunawayError,
    ServerError,
    TokenBudgetExceeded,
    TruncatedError,
    UnsupportedConstraintError,
    ValidationError,
)

if TYPE_CHECKING:
    from ._async_client import AsyncClient
    from ._client import Client
    from ._dialects import ServerInfo
    from ._embeddings import Embeddings
    from ._events import (
        CallFailed,
        CallFinished,
        Hook,
        HookEvent,
        Reasking,
        RequestSent,
        ResponseHead,
        Retrying,
        StreamFinished,
    )
    from ._headers import Headers
    from ._media import Audio, Image, Media, Video
    from ._output.markers import Choice, Grammar, JsonSchema, Regex, Tagged
    from ._output.tagged import TaggedRegion, TaggedText
    from ._params import CallParams, CreateParams, FileParams, ToolCallParams
    from ._progress import Progress
    from ._response import Response
    from ._runaway import Runaway
    from ._scoring import Classification, RerankResult
    from ._stream import AsyncStream, Stream
    from ._tools import Tool, ToolCall
    from ._usage import UsageTotal
    from ._wire.progressive import Partial
    from ._wire.protocol import (
        CompletionTokensDetails,
        LlamaCppTimings,
        PromptTokensDetails,
        TokenLogprob,
        TopLogprob,
        Usage,
        VllmMetrics,
    )


_LAZY = {
    "AsyncClient": "_async_client",
    "Client": "_client",
    "ServerInfo": "_dialects",
    "Embeddings": "_embeddings",
    "Headers": "_headers",
    "Audio": "_media",
    "Image": "_media",
    "Media": "_media",
    "Video": "_media",
    "CallFailed": "_events",
    "CallFinished": "_events",
    "Hook": "_events",
    "HookEvent": "_events",
    "Reasking": "_events",
    "RequestSent": "_events",
    "ResponseHead": "_events",
    "Retrying": "_events",
    "StreamFinished": "_events",
    "CallParams": "_params",
    "CreateParams": "_params",
    "FileParams": "_params",
    "ToolCallParams": "_params",
    "AsyncStream": "_stream",
    "Stream": "_stream",
    "Progress": "_progress",
    "Partial": "_wire.progressive",
    "TokenLogprob": "_wire.protocol",
    "TopLogprob": "_wire.protocol",
    "Usage": "_wire.protocol",
    "CompletionTokensDetails": "_wire.protocol",
    "LlamaCppTimings": "_wire.protocol",
    "PromptTokensDetails": "_wire.protocol",
    "VllmMetrics": "_wire.protocol",
    "UsageTotal": "_usage",
    "Response": "_response",
    "Runaway": "_runaway",
    "Classification": "_scoring",
    "RerankResult": "_scoring",
    "Choice": "_output.markers",
    "Grammar": "_output.markers",
    "JsonSchema": "_output.markers",
    "Regex": "_output.markers",
    "Tagged": "_output.markers",
    "TaggedRegion": "_output.tagged",
    "TaggedText": "_output.tagged",
    "Tool": "_tools",
    "ToolCall": "_tools",
}


__getattr__, __dir__ = _lazy_attributes(__name__, _LAZY, globals())

__all__ = [
    "APIConnectionError",
    "APIError",
    "APIStatusError",
    "APITimeoutError",
    "AsyncClient",
    "AsyncStream",
    "Audio",
    "AuthenticationError",
    "BadRequestError",
    "CallFailed",
    "CallFinished",
    "CallParams",
    "Choice",
    "Classification",
    "Client",
    "ClientClosedError",
    "CompletionTokensDetails",
    "ConfidenceError",
    "ConfigurationError",
    "ConstraintIgnoredError",
    "ContextLengthError",
    "CreateParams",
    "Embeddings",
    "FileParams",
    "Grammar",
    "Headers",
    "Hook",
    "HookEvent",
    "Image",
    "JsonSchema",
    "LMClientError",
    "LlamaCppTimings",
    "Media",
    "MediaError",
    "NoValueError",
    "NotFoundError",
    "Partial",
    "PermissionDeniedError",
    "Progress",
    "PromptTokensDetails",
    "ProtocolError",
    "RateLimitError",
    "Reasking",
    "RefusalError",
    "Regex",
    "RequestSent",
    "RerankResult",
    "Response",
    "ResponseHead",
    "Retrying",
    "Runaway",
    "RunawayError",
    "ServerError",
    "ServerInfo",
    "Stream",
    "StreamFinished",
    "Tagged",
    "TaggedRegion",
    "TaggedText",
    "TokenBudgetExceeded",
    "TokenLogprob",
    "Tool",
    "ToolCall",
    "ToolCallParams",
    "TopLogprob",
    "TruncatedError",
    "UnsupportedConstraintError",
    "Usage",
    "UsageTotal",
    "ValidationError",
    "Video",
    "VllmMetrics",
    "__version__",
]
