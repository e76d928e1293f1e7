"""A manifest as YAML wrote it, before it is typed: nulls as Kubernetes reads them, and error paths
that name the mapping key at fault.

* ``without_nulls``: a field written with no value (``command:``, ``runPolicy:``; YAML null) is
  unset, as a Kubernetes API server decodes it (Go's JSON decoding leaves a field that is null at
  its zero value), so the manifest means what it would on a cluster. Items of a list stay: a null
  item is an error there too.
* ``name_map_keys``: msgspec writes ``[...]`` for "some value of this mapping"
  (``$.spec.mpiReplicaSpecs[...].template``); the key is found by decoding the mapping one entry at
  a time (only on the error path), so the path says ``mpiReplicaSpecs[Worker]``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import msgspec

_UNNAMED = "[...]"
_SEGMENT = re.compile(r"\.([^.\[]+)|\[([^\]]*)\]")


def without_nulls(value: Any) -> Any:
    """``value`` with every mapping entry whose value is null dropped, at any depth."""
    if isinstance(value, dict):
        return {key: without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [without_nulls(item) for item in value]
    return value


def name_map_keys(document: Any, path: str, decode: Callable[[Any], object]) -> str:
    """``path`` (of the error ``decode(document)`` raised) with each ``[...]`` replaced by the key of
    the mapping entry that fails alone; unchanged where no single entry does."""
    try:
        decode(document)
    except msgspec.ValidationError as exc:
        failure = str(exc)
    else:
        return path
    shown = path
    while _UNNAMED in shown:
        prefix, _, rest = shown.partition(_UNNAMED)
        mapping = _at(document, prefix)
        if not isinstance(mapping, dict):
            return shown
        key = next((k for k in mapping if _fails_alone(document, prefix, k, decode, failure)), None)
        if key is None:
            return shown
        document = _replaced(document, _segments(prefix), {key: mapping[key]})
        shown = f"{prefix}[{key}]{rest}"
    return shown


def _fails_alone(document: Any, prefix: str, key: object, decode: Callable[[Any], object], failure: str) -> bool:
    """Whether the mapping at ``prefix`` cut down to ``key`` alone still fails with ``failure``."""
    mapping = _at(document, prefix)
    assert isinstance(mapping, dict)
    try:
        decode(_replaced(document, _segments(prefix), {key: mapping[key]}))
    except msgspec.ValidationError as exc:
        return str(exc) == failure
    return False


def _segments(path: str) -> list[str | int]:
    """``$.a[0].b[Worker]`` → ``["a", 0, "b", "Worker"]``."""
    found: list[str | int] = []
    for field, bracketed in _SEGMENT.findall(path.removeprefix("$")):
        found.append(field if field else int(bracketed) if bracketed.isdigit() else bracketed)
    return found


def _at(document: Any, path: str) -> Any:
    value = document
    for segment in _segments(path):
        if isinstance(value, dict) and segment in value:
            value = value[segment]
        elif isinstance(value, dict) and str(segment) in value:
            value = value[str(segment)]
        elif isinstance(value, list) and isinstance(segment, int) and segment < len(value):
            value = value[segment]
        else:
            return None
    return value


def _replaced(document: Any, segments: list[str | int], new: Any) -> Any:
    """A copy of ``document`` with the value at ``segments`` replaced by ``new`` (the rest shared)."""
    if not segments:
        return new
    head, rest = segments[0], segments[1:]
    if isinstance(document, list) and isinstance(head, int):
        return [_replaced(item, rest, new) if i == head else item for i, item in enumerate(document)]
    if isinstance(document, dict):
        key = head if head in document else str(head)
        return {k: _replaced(v, rest, new) if k == key else v for k, v in document.items()}
    return document
