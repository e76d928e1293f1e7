"""The one error type of manifest loading and validation."""

from __future__ import annotations


class ManifestError(ValueError):
    """A manifest that cannot be admitted; ``path`` names the offending field (``$.spec.x``)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message
