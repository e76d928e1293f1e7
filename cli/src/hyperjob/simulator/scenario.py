"""Loading a scenario file: YAML text → a validated ``Scenario`` or a ``ScenarioError`` (exit 2).

Everything that is wrong with the file itself is found here, before virtual time starts, so a bad
file never prints a partial result: YAML syntax, unknown fields and event types, durations,
quantities, duplicate or undeclared clusters and nodes, the queue and priority-class manifests of
``spec``, the scheduler conf and command actions.
"""

from __future__ import annotations

from typing import Any

import msgspec
import yaml

from hyperjob import api, schedcore
from hyperjob.api.quantity import QuantityError, parse_quantity
from hyperjob.schedcore.plugins import numaaware

from .errors import ScenarioError
from .schema import (
    EVENT_FIELDS,
    ClusterEntry,
    DurationText,
    EventEntry,
    NumaEntry,
    QuantityValue,
    ScenarioFile,
    ScenarioSpec,
)

DEFAULT_PODS = 110.0
COMMAND_ACTIONS = {
    "HyperJob": ("suspend", "resume", "abort", "restart"),
    "Job": ("abort", "resume", "restart", "terminate", "complete"),
    "Queue": ("open", "close"),
}
DELETE_KINDS = (
    "Job",
    "HyperJob",
    "Queue",
    "PodGroup",
    "PriorityClass",
    "CronJob",
    "JobFlow",
    "JobTemplate",
    "HyperJobTemplate",
)


class NodeSpec(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    allocatable: api.ResourceList
    labels: dict[str, str]
    taints: list[api.Taint]


class ClusterSpec(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    labels: dict[str, str]
    nodes: list[NodeSpec]
    prices: dict[str, float] = {}
    data_sets: list[str] = []
    data_links: dict[str, float] = {}


class TimedEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One scenario event: ``kind`` is the YAML key (``create``, ``nodeDown``...), ``body`` its value."""

    at: float
    seq: int
    kind: str
    body: Any  # the YAML key's entry: a manifest as written or one of ``schema``'s structs


class Scenario(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    scheduler_conf: str | None
    period: float
    clusters: list[ClusterSpec]
    queues: list[api.Queue]
    priority_classes: list[api.PriorityClass]
    events: list[TimedEvent]
    until: float | None


def load(text: str) -> Scenario:
    """Parse and validate a scenario; raise ``ScenarioError`` naming the first bad place."""
    document = _yaml(text)
    try:
        raw = msgspec.convert(document, ScenarioFile, strict=True)
    except msgspec.ValidationError as exc:
        raise _from_msgspec(exc) from None
    spec = raw.spec
    period = _duration(spec.schedule_period, "spec.schedulePeriod")
    if period <= 0:
        raise ScenarioError("spec.schedulePeriod", "must be more than 0")
    clusters = [_cluster(c, f"spec.clusters[{i}]") for i, c in enumerate(spec.clusters)]
    _unique([c.name for c in clusters], "spec.clusters", "cluster")
    nodes = {c.name: {n.name for n in c.nodes} for c in clusters}
    events = [_event(e, i, nodes) for i, e in enumerate(spec.events)]
    until = None if spec.until is None else _duration(spec.until, "spec.until")
    if spec.scheduler_conf:
        try:
            schedcore.parse_conf(spec.scheduler_conf)
        except schedcore.ConfError as exc:
            raise ScenarioError("spec.schedulerConf", str(exc)) from None
    return Scenario(
        name=raw.metadata.name,
        scheduler_conf=spec.scheduler_conf,
        period=period,
        clusters=clusters,
        queues=_queues(spec.queues),
        priority_classes=_priority_classes(spec),
        events=sorted(events, key=lambda e: (e.at, e.seq)),
        until=until,
    )


def _yaml(text: str) -> Any:  # YAML as parsed, before ``ScenarioFile`` checks it
    try:
        # libyaml's loader when present: same safe subset, ten times faster on trace-sized files.
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        documents = [d for d in yaml.load_all(text, Loader=loader) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise ScenarioError("$", f"not valid YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    if len(documents) != 1:
        raise ScenarioError("$", f"a scenario file holds exactly one document, found {len(documents)}")
    if not isinstance(documents[0], dict):
        raise ScenarioError("$", "a scenario must be a mapping with apiVersion, kind, metadata and spec")
    return documents[0]


def _from_msgspec(exc: msgspec.ValidationError) -> ScenarioError:
    # msgspec says "Object contains unknown field `x` - at `$.spec.events[3]`": path first, no "$.".
    message, sep, where = str(exc).rpartition(" - at `")
    path = where.rstrip("`") if sep else "$"
    if not sep:
        message = str(exc)
    if message.startswith("Object contains unknown field"):
        field = message.split("`")[1]
        if path.endswith("]") and ".events[" in path:
            return ScenarioError(_plain(path), f"unknown event type {field!r}")
        return ScenarioError(_plain(f"{path}.{field}"), "unknown field")
    if message.startswith("Object missing required field"):
        field = message.split("`")[1]
        return ScenarioError(_plain(f"{path}.{field}"), "required")
    if message.startswith("Invalid enum value") and path in ("$.kind", "$.apiVersion"):
        want = "Scenario" if path == "$.kind" else "hyperjob.io/v1alpha1"
        return ScenarioError(_plain(path), f"must be {want}, not {message.split(' ', 3)[-1]}")
    if path.endswith(".at") or path.endswith(".until") or path.endswith(".schedulePeriod"):
        return ScenarioError(_plain(path), "not a duration")
    return ScenarioError(_plain(path), message)


def _plain(path: str) -> str:
    return path[2:] if path.startswith("$.") else path


def _duration(value: DurationText, path: str) -> float:
    try:
        return api.parse_duration(value)
    except api.DurationError:
        raise ScenarioError(path, f"not a duration ({value!r}; expected e.g. 30, 500ms, 10s, 5m, 2h)") from None


def _resources(raw: dict[str, QuantityValue], path: str) -> api.ResourceList:
    result: api.ResourceList = {}
    for name, value in raw.items():
        try:
            amount = parse_quantity(value)
        except QuantityError as exc:
            raise ScenarioError(f"{path}.{name}", str(exc)) from None
        if amount < 0:
            raise ScenarioError(f"{path}.{name}", f"{value!r} is negative")
        result[name] = amount
    result.setdefault("pods", DEFAULT_PODS)
    return result


def _cluster(entry: ClusterEntry, path: str) -> ClusterSpec:
    nodes: list[NodeSpec] = []
    for i, node in enumerate(entry.nodes):
        node_path = f"{path}.nodes[{i}]"
        if node.count is not None and node.count < 1:
            raise ScenarioError(f"{node_path}.count", f"{node.count} is less than 1")
        allocatable = _resources(node.allocatable, f"{node_path}.allocatable")
        count = node.count or 1
        names = [f"{node.name}-{k}" for k in range(count)] if count > 1 else [node.name]
        # Every node carries the kubelet's well-known labels; labels the scenario declares win.
        # A NUMA layout travels as labels too, as the scheduler's numa-aware plugin reads it.
        numa = _numa_labels(node.numa) if node.numa is not None else {}
        nodes.extend(
            NodeSpec(
                name=n,
                allocatable=dict(allocatable),
                labels={**api.pod.well_known_node_labels(n), **numa, **node.labels},
                taints=list(node.taints),
            )
            for n in names
        )
    _unique([n.name for n in nodes], f"{path}.nodes", "node")
    return ClusterSpec(
        name=entry.name,
        labels=dict(entry.labels),
        nodes=nodes,
        prices=dict(entry.prices),
        data_sets=list(entry.data_sets),
        data_links=dict(entry.data_links),
    )


def _numa_labels(numa: NumaEntry) -> dict[str, str]:
    return {
        numaaware.CPUS_LABEL: ",".join(str(c) for c in numa.cpus),
        numaaware.TOPOLOGY_POLICY_LABEL: numa.topology_manager_policy,
        numaaware.CPU_MANAGER_LABEL: numa.cpu_manager_policy,
    }


def _unique(names: list[str], path: str, what: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ScenarioError(path, f"{what} {name!r} is declared twice")
        seen.add(name)


def _event(entry: EventEntry, index: int, nodes: dict[str, set[str]]) -> TimedEvent:
    path = f"spec.events[{index}]"
    at = _duration(entry.at, f"{path}.at")
    present = [f for f in EVENT_FIELDS if getattr(entry, f) is not None]
    if len(present) != 1:
        found = ", ".join(_camel(f) for f in present) or "none"
        kinds = ", ".join(map(_camel, EVENT_FIELDS))
        raise ScenarioError(path, f"an event needs exactly one of {kinds} (found {found})")
    field = present[0]
    body = getattr(entry, field)
    _check_event(field, body, f"{path}.{_camel(field)}", nodes)
    return TimedEvent(at=at, seq=index, kind=_camel(field), body=body)


def _check_event(field: str, body: Any, path: str, nodes: dict[str, set[str]]) -> None:
    if field in ("node_down", "node_up", "cluster_down", "cluster_up", "control_plane_hang", "control_plane_resume"):
        if body.cluster not in nodes:
            raise ScenarioError(f"{path}.cluster", f"cluster {body.cluster!r} is not declared")
        if field in ("node_down", "node_up") and body.node not in nodes[body.cluster]:
            raise ScenarioError(f"{path}.node", f"node {body.node!r} is not declared in cluster {body.cluster!r}")
    elif field == "command":
        actions = COMMAND_ACTIONS.get(body.kind)
        if actions is None:
            raise ScenarioError(f"{path}.kind", f"commands apply to {', '.join(COMMAND_ACTIONS)}, not {body.kind!r}")
        if body.action not in actions:
            raise ScenarioError(f"{path}.action", f"a {body.kind} takes {' | '.join(actions)}, not {body.action!r}")
    elif field == "delete" and body.kind not in DELETE_KINDS:
        raise ScenarioError(f"{path}.kind", f"one of {', '.join(DELETE_KINDS)}, not {body.kind!r}")


def _camel(field: str) -> str:
    head, *rest = field.split("_")
    return head + "".join(p.capitalize() for p in rest)


def _queue(document: api.RawDocument, path: str) -> api.Queue:
    try:
        manifest = api.decode(document)
    except api.ManifestError as exc:
        where = _plain(exc.path)
        raise ScenarioError(path if where == "$" else f"{path}.{where}", exc.message) from None
    if not isinstance(manifest, api.Queue):
        raise ScenarioError(f"{path}.kind", "spec.queues holds Queue manifests only")
    return manifest


def _queues(documents: list[api.RawDocument]) -> list[api.Queue]:
    queues = [_queue(q, f"spec.queues[{i}]") for i, q in enumerate(documents)]
    names = [q.metadata.name for q in queues]
    _unique(names, "spec.queues", "queue")
    for i, queue in enumerate(queues):
        parent = queue.spec.parent
        if parent and parent != "root" and parent not in names:
            raise ScenarioError(f"spec.queues[{i}].spec.parent", f"queue {parent!r} is not declared")
    return queues


def _priority_classes(spec: ScenarioSpec) -> list[api.PriorityClass]:
    classes = []
    for i, p in enumerate(spec.priority_classes):
        try:
            classes.append(
                api.PriorityClass(
                    metadata=api.ObjectMeta(name=p.name),
                    value=p.value,
                    global_default=p.global_default,
                    preemption_policy=p.preemption_policy,
                    description=p.description,
                )
            )
        except ValueError as exc:  # Kubernetes' value range (api.queue.check_priority_value)
            field, _, message = str(exc).partition(": ")
            raise ScenarioError(f"spec.priorityClasses[{i}].{field}", message) from None
    return classes
