"""The transports' one error map (`io_error`) and their one resend predicate (`may_resend`),
each shared by both transports: what a failure becomes, and which failures send a request again.
The transports' own tests (`test_lost_connections.py`, `test_hostile_responses.py`) hold them
on real sockets; these hold the table."""

from __future__ import annotations

import pytest

from lmclient import errors
from lmclient._transports.common import Limiter, StaleConnection, io_error, may_resend


@pytest.mark.parametrize(
    ("exc", "answered", "kind", "message"),
    [
        (
            ConnectionResetError("reset"),
            False,
            StaleConnection,
            "ConnectionResetError doing: reset",
        ),
        (ConnectionResetError("reset"), True, errors.APIConnectionError, "ConnectionResetError"),
        (TimeoutError(), False, errors.APITimeoutError, "timed out doing"),
        (errors.APITimeoutError("given"), True, errors.APITimeoutError, "given"),
    ],
)
def test_io_error_maps_a_socket_error_by_whether_the_answer_had_begun(
    exc: BaseException, answered: bool, kind: type[errors.LMClientError], message: str
) -> None:
    error = io_error(exc, "doing", answered=answered)
    assert type(error) is kind
    assert message in str(error)


def test_lmclient_errors_pass_the_map_as_they_are() -> None:
    given = errors.APIConnectionError("the server closed the connection in the response head")
    assert io_error(given, "reading the response") is given


@pytest.mark.parametrize(
    ("exc", "pooled", "resent"),
    [
        (StaleConnection("closed without answering"), True, True),  # idle-closed: once more
        (StaleConnection("closed without answering"), False, False),  # a fresh one: it stands
        (errors.APITimeoutError("timed out"), True, False),  # the request may have run
        (errors.APIConnectionError("closed in the response head"), True, False),  # answered
        (KeyboardInterrupt(), True, False),  # the call's own end
    ],
)
def test_only_a_pooled_connection_lost_before_any_answer_is_resent(
    exc: BaseException, pooled: bool, resent: bool
) -> None:
    assert may_resend(exc, pooled) is resent


def test_the_limiter_maps_an_undecodable_body_itself() -> None:
    """Its callers (both transports, and the httpx paths) need not map what it raises."""
    limiter = Limiter(1 << 20, None)
    limiter.head({"content-encoding": "gzip"}, None)
    with pytest.raises(errors.ProtocolError, match="invalid HTTP response: undecodable gzip"):
        limiter.take(b"not gzip at all")
    with pytest.raises(errors.ProtocolError, match="unsupported content-encoding"):
        Limiter(1 << 20, None).head({"content-encoding": "br"}, None)
