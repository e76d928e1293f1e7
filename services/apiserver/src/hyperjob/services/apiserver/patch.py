"""JSON merge patch (RFC 7386): what kubectl sends to update an object of a custom kind."""

from __future__ import annotations

from typing import Any


def merge_patch(target: Any, patch: Any) -> Any:
    """``target`` with ``patch`` merged in: objects merge key by key, ``null`` removes a key, any
    other value (lists included) replaces. Neither argument is changed (JSON values: ``Any``)."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged
