"""What the ``lmclient`` command's subcommands share: exit statuses, the usage error, the client
a command makes from its arguments, JSON on stdout.

Apart from `_cli` so that the command's modules (`_cli`, and `_cli_probe`, imported by `_cli`
only when ``probe`` runs) import it and not each other. Only the standard library at import
time: ``lmclient --help`` must stay cheap.
"""

from __future__ import annotations

import argparse
import sys
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._client import Client

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "UsageError",
    "make_client",
    "print_json",
    "server_url",
]

EXIT_OK, EXIT_FAILED = 0, 1  # usage errors exit 2, from argparse


class UsageError(Exception):
    """Bad input found after parsing (a file that cannot be read, a schema that is not JSON...):
    reported like an argparse error, with exit status 2."""


def make_client(args: argparse.Namespace, model: str | None, dialect: str) -> Client:
    from ._client import Client

    url = server_url(args.url, args.uds)
    if getattr(args, "whitespace", None) == "server":  # --whitespace: on the generating commands
        return Client(
            url, model, api_key=args.api_key, dialect=dialect, whitespace="server", uds=args.uds
        )
    return Client(url, model, api_key=args.api_key, dialect=dialect, uds=args.uds)


def server_url(given: str | None, uds: str | None = None) -> str:
    """The base URL: the one given, else with ``--uds`` the socket's default, else the
    environment's (as `Client` decides)."""
    from ._config import UDS_BASE_URL
    from ._params import env_base_url

    url = (given or UDS_BASE_URL) if uds is not None else env_base_url(given)
    if not url:
        raise UsageError("no server URL: give one on the command line, or set LMCLIENT_BASE_URL")
    return url


def print_json(value: Any, file: IO[str] | None = None) -> None:
    import msgspec

    out = sys.stdout if file is None else file
    out.write(msgspec.json.encode(value).decode() + "\n")
    out.flush()
