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


# A strategic merge patch's directives (``k8s.io/apimachinery/pkg/util/strategicpatch``).
DIRECTIVE = "$patch"
RETAIN_KEYS = "$retainKeys"
ELEMENT_ORDER = "$setElementOrder/"
DELETE_FROM_LIST = "$deleteFromPrimitiveList/"


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """A strategic merge patch of a kind whose fields declare no patch strategy (PriorityClass, the
    only built-in kind written here): a merge patch, with the directives kubectl may send honoured
    (``$patch: replace|delete`` on a map, ``$retainKeys``; ``$setElementOrder`` is only an order,
    these kinds have no lists merged by key). ValueError for a directive it cannot be: a
    ``$deleteFromPrimitiveList`` (no list here merges), an unknown ``$patch``."""
    if not isinstance(patch, dict):
        return patch
    directive = patch.get(DIRECTIVE)
    if directive == "delete":
        return None
    if directive == "replace":
        return {k: v for k, v in _plain(patch).items() if v is not None}
    if directive not in (None, "merge"):
        raise ValueError(f"unknown patch type: {directive}")
    merged = dict(target) if isinstance(target, dict) else {}
    retained = patch.get(RETAIN_KEYS)
    if retained is not None:
        if not isinstance(retained, list):
            raise ValueError(f"{RETAIN_KEYS}: must be a list of field names")
        merged = {k: v for k, v in merged.items() if k in retained}
    for key, value in patch.items():
        if key.startswith(DELETE_FROM_LIST):
            raise ValueError(f"{key}: no list of this kind merges its items")
        if key in (DIRECTIVE, RETAIN_KEYS) or key.startswith(ELEMENT_ORDER):
            continue
        result = strategic_merge_patch(merged.get(key), value) if value is not None else None
        if result is None:
            merged.pop(key, None)
        else:
            merged[key] = result
    return merged


def _plain(patch: dict[str, Any]) -> dict[str, Any]:
    """A map replaced as a whole: the patch without its directives."""
    return {k: v for k, v in patch.items() if not k.startswith("$")}
