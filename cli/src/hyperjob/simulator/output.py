"""The result object of docs/scenario-format.md ("Output") and its deterministic JSON.

Key order is fixed by construction (dict insertion order), lists are sorted here (by name, then
cluster; events keep their order of occurrence, which is also time order because virtual time
never goes back), and numbers are normalised so the same run always prints the same bytes:
times are floats, ``cpu`` is a float (cores), every other quantity is an int when integral.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TypedDict, TypeVar

EVENT_TYPES = (
    "PodBound",
    "PodEvicted",
    "PodSucceeded",
    "PodFailed",
    "JobPhaseChanged",
    "PodGroupPhaseChanged",
    "HyperJobPhaseChanged",
    "NodeDown",
    "NodeUp",
    "ClusterDown",
    "ClusterUp",
    "Rejected",
)
HIDDEN_RESOURCES = frozenset({"pods"})  # every pod requests one slot; printing it adds noise, not facts

Resources = dict[str, float | int]

# The result's objects, one TypedDict each, with the contract's (camelCase) keys in its order.


class EventRow(TypedDict):
    time: float | None
    type: str
    object: str
    cluster: str | None
    node: str | None
    reason: str
    phase: str


class PodRow(TypedDict):
    name: str
    job: str
    task: str
    index: int
    cluster: str
    node: str | None
    phase: str
    startedAt: float | None
    finishedAt: float | None
    restarts: int


class PodGroupRow(TypedDict):
    name: str
    cluster: str
    queue: str
    phase: str
    minMember: int
    minResources: Resources


class JobRow(TypedDict):
    name: str
    hyperJob: str | None
    cluster: str | None
    phase: str
    retryCount: int


class Condition(TypedDict):
    type: str | None  # None: the status's condition left it out
    status: str | None
    reason: str


class HyperJobRow(TypedDict):
    name: str
    phase: str
    splitCount: int
    placement: dict[str, int]  # cluster -> children placed there
    conditions: list[Condition]


class QueueRow(TypedDict):
    name: str
    cluster: str
    state: str
    allocated: Resources
    deserved: Resources


class Result(TypedDict):
    scenario: str
    time: float | None
    pods: list[PodRow]
    podGroups: list[PodGroupRow]
    jobs: list[JobRow]
    hyperJobs: list[HyperJobRow]
    queues: list[QueueRow]
    events: list[EventRow]


Row = TypeVar("Row", PodRow, PodGroupRow, JobRow, HyperJobRow, QueueRow)


def number(name: str, amount: float) -> float | int:
    """A quantity in base units as printed: cpu in (fractional) cores, the rest integral when whole."""
    amount = float(amount)
    if amount == 0:
        amount = 0.0  # no "-0.0" in the output
    if name == "cpu":
        return round(amount, 9)
    if amount.is_integer() and abs(amount) < 2**63:
        return int(amount)
    return round(amount, 9)


def resources(values: Mapping[str, float] | None, always: tuple[str, ...] = ("cpu",)) -> Resources:
    """A resource map for output: sorted keys, ``always`` keys present, zero entries and pods dropped."""
    values = values or {}
    keys = sorted({*always, *(k for k, v in values.items() if v and k not in HIDDEN_RESOURCES)})
    return {k: number(k, values.get(k, 0.0)) for k in keys}


def seconds(value: float | None) -> float | None:
    return None if value is None else float(round(value, 9))


def event(
    time: float,
    type_: str,
    obj: str,
    *,
    cluster: str | None = None,
    node: str | None = None,
    reason: str = "",
    phase: str = "",
) -> EventRow:
    """One timeline entry; ``phase`` is the new phase for ``*PhaseChanged``, "" otherwise."""
    assert type_ in EVENT_TYPES, type_
    return {
        "time": seconds(time),
        "type": type_,
        "object": obj,
        "cluster": cluster,
        "node": node,
        "reason": reason,
        "phase": phase,
    }


def result(
    name: str,
    time: float,
    *,
    pods: list[PodRow],
    pod_groups: list[PodGroupRow],
    jobs: list[JobRow],
    hyperjobs: list[HyperJobRow],
    queues: list[QueueRow],
    events: list[EventRow],
) -> Result:
    """The whole result in the contract's key order, every list sorted as the contract says."""
    return {
        "scenario": name,
        "time": seconds(time),
        "pods": _by_name(pods),
        "podGroups": _by_name(pod_groups),
        "jobs": _by_name(jobs),
        "hyperJobs": _by_name(hyperjobs),
        "queues": _by_name(queues),
        "events": list(events),
    }


def _by_name(items: list[Row]) -> list[Row]:
    return sorted(items, key=lambda i: (i["name"], i.get("cluster") or ""))


def to_json(result_: Result) -> str:
    """Deterministic JSON text of a result (2-space indent, keys in the contract's order)."""
    return json.dumps(result_, indent=2, ensure_ascii=False, allow_nan=False)
