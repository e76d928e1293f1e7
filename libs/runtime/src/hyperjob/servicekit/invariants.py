"""What a service's own code or state guarantees, checked as a check (an ``assert`` is gone under
``python -O``): a failure is a bug, reported by name; the handler fails, so its message is
retried and then dead-lettered, as any other unexpected error."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


class InvariantError(RuntimeError):
    """Something the service's own code or state guarantees does not hold."""


def present(value: T | None, what: str) -> T:
    """``value``, which the service's own state guarantees is there (``what`` names it)."""
    if value is None:
        raise InvariantError(f"{what} is missing")
    return value
