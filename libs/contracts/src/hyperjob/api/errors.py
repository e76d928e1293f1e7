"""The error of manifest loading and validation, and of a manifest of a kind its reader never holds."""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")


class ManifestError(ValueError):
    """A manifest that cannot be admitted; ``path`` names the offending field (``$.spec.x``)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


class UnexpectedKindError(TypeError):
    """A manifest of a kind its reader never holds there (a stored HyperJob that decodes as a
    Queue): the service's own state or routing is broken, a bug, never a user's error (what came
    in was validated then)."""


def expect_kind(manifest: object, kind: type[K]) -> K:
    """``manifest`` as the ``kind`` its reader holds, or ``UnexpectedKindError`` (an ``assert
    isinstance`` would be gone under ``python -O``)."""
    if not isinstance(manifest, kind):
        raise UnexpectedKindError(f"a {type(manifest).__name__} where only a {kind.__name__} is kept")
    return manifest
