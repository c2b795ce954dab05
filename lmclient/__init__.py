"""lmclient: a small, fast, typed client for self-hosted LLM servers.

Pass a prompt and an output type; get back a validated value of that type.
"""

from .async_client import AsyncClient
from .client import Client
from .errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    LMClientError,
    NotFoundError,
    PermissionDeniedError,
    ProtocolError,
    RateLimitError,
    RefusalError,
    ServerError,
    TruncatedError,
    UnsupportedConstraintError,
    ValidationError,
)
from .progress import Progress
from .protocol import TokenLogprob, TopLogprob, Usage
from .response import Response
from .types import Choice, Grammar, JsonSchema, Regex

__version__ = "0.1.0"

__all__ = [
    "APIConnectionError",
    "APIError",
    "APITimeoutError",
    "AsyncClient",
    "AuthenticationError",
    "BadRequestError",
    "Choice",
    "Client",
    "Grammar",
    "JsonSchema",
    "LMClientError",
    "NotFoundError",
    "PermissionDeniedError",
    "Progress",
    "ProtocolError",
    "RateLimitError",
    "RefusalError",
    "Regex",
    "Response",
    "ServerError",
    "TokenLogprob",
    "TopLogprob",
    "TruncatedError",
    "UnsupportedConstraintError",
    "Usage",
    "ValidationError",
]
