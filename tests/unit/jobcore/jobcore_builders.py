"""Builders for jobcore tests: manifests as dicts (decoded strictly by api), and a tiny driver."""

from __future__ import annotations

from typing import Any

from hyperjob import api
from hyperjob import jobcore as jc

QUEUES = {"default": "Open", "weight": "Open", "closed": "Closed"}


def task(name: str, replicas: int = 1, cpu: str = "1", memory: str = "1Gi", **extra: Any) -> dict[str, Any]:
    """A task dict; ``extra`` keys go to the task (minAvailable, policies, maxRetry) or, with a
    ``template_`` prefix, to the pod spec (template_restartPolicy="Never")."""
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]
    }
    meta: dict[str, Any] = {}
    out: dict[str, Any] = {"name": name, "replicas": replicas}
    for key, value in extra.items():
        if key.startswith("template_"):
            spec[key.removeprefix("template_")] = value
        elif key == "annotations":
            meta["annotations"] = value
        else:
            out[key] = value
    out["template"] = {"metadata": meta, "spec": spec} if meta else {"spec": spec}
    return out


def job(*tasks: dict[str, Any], name: str = "job1", annotations: dict[str, str] | None = None, **spec: Any) -> api.Job:
    metadata: dict[str, Any] = {"name": name}
    if annotations:
        metadata["annotations"] = annotations
    doc = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {"tasks": list(tasks) or [task("worker", 2)], **spec},
    }
    decoded = api.decode(doc)
    assert isinstance(decoded, api.Job)
    return decoded


def admitted(*tasks: dict[str, Any], now: float = 0.0, **spec: Any) -> jc.JobRecord:
    return jc.admit(job(*tasks, **spec), QUEUES, now)


class Driver:
    """Feeds events into ``decide`` and keeps every effect, like a minimal simulator would."""

    def __init__(self, record: jc.JobRecord, now: float = 0.0) -> None:
        self.record = record
        self.now = now
        self.effects: list[Any] = []

    def send(self, event: Any, now: float | None = None) -> list[Any]:
        if now is not None:
            self.now = now
        self.record, effects = jc.decide(self.record, event, self.now)
        self.effects += effects
        return effects

    def pod(self, name: str) -> jc.PodRecord:
        return self.record.pods[name]

    def version_of(self, name: str) -> int:
        return self.record.pods[name].version

    def start(self) -> list[Any]:
        return self.send(jc.PodGroupAdmitted(job_version=self.record.version))

    def run(self, name: str, node: str = "n1") -> None:
        v = self.version_of(name)
        self.send(jc.PodBound(pod=name, node=node, job_version=v))
        self.send(jc.PodRunning(pod=name, job_version=v))

    def run_all(self) -> None:
        for name in sorted(self.record.pods):
            if self.record.pods[name].phase == "Pending":
                self.run(name)

    def succeed(self, name: str) -> list[Any]:
        return self.send(jc.PodSucceeded(pod=name, job_version=self.version_of(name)))

    def fail(self, name: str, exit_code: int = 1) -> list[Any]:
        return self.send(jc.PodFailed(pod=name, exit_code=exit_code, job_version=self.version_of(name)))

    def evict(self, name: str, reason: str = "nodeDown") -> list[Any]:
        return self.send(jc.PodEvicted(pod=name, reason=reason, job_version=self.version_of(name)))

    def delete_terminating(self) -> None:
        """Report every Terminating pod gone, as a driver does after DeletePods."""
        for name in sorted(self.record.pods):
            pod = self.record.pods.get(name)
            if pod is not None and pod.phase == "Terminating":
                self.send(jc.PodDeleted(pod=name, job_version=pod.version))

    def phases(self) -> list[str]:
        return [e.new for e in self.effects if isinstance(e, jc.JobPhaseChanged)]


def of_type(effects: list[Any], kind: type) -> list[Any]:
    return [e for e in effects if isinstance(e, kind)]


def record_in(
    phase: str, pods: dict[int, str] | None = None, replicas: int = 4, retry: int = 0, **spec: Any
) -> jc.JobRecord:
    """A job of one task ``worker`` in ``phase``, its pods (index → pod phase) as given; podgroup admitted."""
    import msgspec

    pods = {i: "Running" for i in range(replicas)} if pods is None else pods
    d = Driver(admitted(task("worker", replicas, template_restartPolicy="Never"), **spec))
    d.start()
    new_pods = {}
    for name, pod in d.record.pods.items():
        if pod.index in pods:
            status = msgspec.structs.replace(
                pod.status, phase=pods[pod.index], node=None if pods[pod.index] == "Pending" else "n1"
            )
            new_pods[name] = msgspec.structs.replace(pod, status=status)
    return msgspec.structs.replace(d.record, phase=phase, pods=new_pods, retry_count=retry)


def phase_changes(effects: list[Any]) -> list[str]:
    return [e.new for e in effects if isinstance(e, jc.JobPhaseChanged)]


def deleted(effects: list[Any]) -> list[str]:
    return sorted(name for e in effects if isinstance(e, jc.DeletePods) for name in e.names)
