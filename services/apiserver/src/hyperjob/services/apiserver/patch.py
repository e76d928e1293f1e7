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


def fill_omitted(stored: Any, written: Any) -> Any:
    """``stored`` with what ``written`` has and it lacks: the values the services omit because they
    are defaults (a Queue's ``weight: 1``) shown as the user wrote them. Stored values win; lists of
    the same length are filled item by item, others are stored's (JSON values: ``Any``)."""
    if isinstance(stored, dict) and isinstance(written, dict):
        filled = {k: fill_omitted(v, written[k]) if k in written else v for k, v in stored.items()}
        return {**{k: v for k, v in written.items() if k not in stored}, **filled}
    if isinstance(stored, list) and isinstance(written, list) and len(stored) == len(written):
        return [fill_omitted(s, w) for s, w in zip(stored, written, strict=True)]
    return stored
