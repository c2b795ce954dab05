"""The ``lmclient`` logger, with a `logging.NullHandler`: a library is silent unless the
application configures logging (otherwise Python's last-resort handler would print each retry's
WARNING to stderr); with logging configured, its records propagate as any library's."""

from __future__ import annotations

import logging

__all__ = ["log"]

log = logging.getLogger("lmclient")
log.addHandler(logging.NullHandler())
