"""Exceptions of the fake: both become an HTTP 400 answer, as a real server would give."""

__all__ = ["ConstraintError", "UnsatisfiableError"]


class ConstraintError(ValueError):
    """A request carries a constraint field the fake cannot read (wrong type, bad JSON)."""


class UnsatisfiableError(ValueError):
    """The fake cannot produce text for a constraint; script a reply with ``FakeLLM.reply``."""
