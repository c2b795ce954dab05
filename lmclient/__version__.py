"""The version, stated once: the build backend reads it (``[tool.hatch.version]``), ``lmclient``
exports it, and every request's User-Agent carries it."""

__version__ = "0.1.0"
