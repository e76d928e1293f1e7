"""Pod records: requests, naming, annotations and what to run, built from a task template.

A pod's request is Kubernetes' effective request (Σ containers, or the largest init container
where that is more), with a limit standing in for a missing request, plus ``pods: 1``.
"""

from __future__ import annotations

from decimal import Decimal

from hyperjob import api
from hyperjob.events import PodMount

from .model import JobRecord, PodRecord, PodRun, PodScheduling
from .naming import pod_name
from .plugins import pod_patch

SIM_DURATION = api.SIM_DURATION
SIM_EXIT_CODE = api.SIM_EXIT_CODE
TASK_PRIORITY = "volcano.sh/task-priority"
PREEMPTABLE = "volcano.sh/preemptable"


def container_request(container: api.Container) -> dict[str, Decimal]:
    """Requests of one container; a resource with only a limit requests its limit (API defaulting)."""
    raw = {**container.resources.limits, **container.resources.requests}
    return {name: _exact(api.parse_quantity(value)) for name, value in raw.items()}


def pod_request_exact(spec: api.PodSpec) -> dict[str, Decimal]:
    """Effective request of a pod without ``pods``, kept exact (``Decimal``) so sums don't drift."""
    total: dict[str, Decimal] = {}
    for container in spec.containers:
        for name, amount in container_request(container).items():
            total[name] = total.get(name, Decimal(0)) + amount
    for container in spec.init_containers:
        for name, amount in container_request(container).items():
            total[name] = max(total.get(name, Decimal(0)), amount)
    return total


def pod_request(spec: api.PodSpec) -> api.ResourceList:
    """The request a scheduler sees: container requests in base units plus ``pods: 1``."""
    request = {name: float(amount) for name, amount in pod_request_exact(spec).items()}
    request["pods"] = 1.0
    return request


def task_priority(record: JobRecord, task: api.TaskSpec) -> int:
    """Task priority as Volcano's scheduler reads it: annotation, then pod priority, then 1."""
    template = task.template
    annotation = template.metadata.annotations.get(TASK_PRIORITY)
    if annotation is not None and annotation.lstrip("-").isdigit():
        return int(annotation)
    if template.spec.priority is not None:
        return template.spec.priority
    class_name = template.spec.priority_class_name or record.spec.priority_class_name
    return record.priority_classes.get(class_name, 1) if class_name else 1


def build_pod(record: JobRecord, task: api.TaskSpec, index: int, now: float) -> PodRecord:
    """The pod ``<job>-<task>-<index>`` of the record's current version."""
    name = pod_name(record.name, task.name, index)
    incarnation = record.incarnations.get(name, 0)
    template = task.template
    annotations = {**template.metadata.annotations, **_volcano_annotations(record, task, index)}
    labels = {
        **template.metadata.labels,
        "volcano.sh/task-index": str(index),
        "volcano.sh/job-name": record.name,
        "volcano.sh/job-namespace": record.namespace,
        "volcano.sh/task-spec": task.name,
        "volcano.sh/queue-name": record.spec.queue,
    }
    svc = "svc" in record.spec.plugins
    return PodRecord(
        name=name,
        job=record.name,
        namespace=record.namespace,
        task=task.name,
        index=index,
        version=record.version,
        incarnation=incarnation,
        uid=f"{record.uid}/{name}/v{record.version}/i{incarnation}",
        annotations=annotations,
        labels=labels,
        hostname=template.spec.hostname or (name if svc else ""),
        subdomain=template.spec.subdomain or (record.name if svc else ""),
        scheduling=_scheduling(record, task),
        run=_run(record, task, name),
    )


def _volcano_annotations(record: JobRecord, task: api.TaskSpec, index: int) -> dict[str, str]:
    return {
        "volcano.sh/task-spec": task.name,
        "volcano.sh/task-index": str(index),
        "volcano.sh/job-name": record.name,
        "volcano.sh/queue-name": record.spec.queue,
        "volcano.sh/job-version": str(record.version),
        "volcano.sh/job-retry-count": str(record.retry_count),
        "scheduling.k8s.io/group-name": record.name,
    }


def _scheduling(record: JobRecord, task: api.TaskSpec) -> PodScheduling:
    spec = task.template.spec
    preemptable = task.template.metadata.annotations.get(PREEMPTABLE) or task.template.metadata.labels.get(
        PREEMPTABLE, "true"
    )
    return PodScheduling(
        request=pod_request(spec),
        priority=task_priority(record, task),
        priority_class_name=spec.priority_class_name or record.spec.priority_class_name,
        preemption_policy=spec.preemption_policy or "",
        preemptable=preemptable != "false",
        node_selector=dict(spec.node_selector),
        tolerations=list(spec.tolerations),
        affinity=spec.affinity,
        scheduler_name=spec.scheduler_name or record.spec.scheduler_name,
        node_name=spec.node_name,
        topology_policy=task.topology_policy if task.topology_policy != "none" and guaranteed(spec) else "",
    )


def guaranteed(spec: api.PodSpec) -> bool:
    """Kubernetes' Guaranteed QoS: every container limits cpu and memory and requests exactly that.

    Only such pods get exclusive CPUs from the kubelet, so only they are NUMA-placed.
    """
    for container in [*spec.containers, *spec.init_containers]:
        limits, requests = container.resources.limits, container.resources.requests
        for name in ("cpu", "memory"):
            if name not in limits:
                return False
            if api.parse_quantity(requests.get(name, limits[name])) != api.parse_quantity(limits[name]):
                return False
    return True


def _run(record: JobRecord, task: api.TaskSpec, name: str) -> PodRun:
    spec = task.template.spec
    main = spec.containers[0]
    patch = pod_patch(record, name)
    env = {var.name: var.value for var in main.env if var.value_from is None}
    env.update(patch.env)
    ports = {port.name or str(port.container_port): port.container_port for port in main.ports}
    ports.update({n: p for n, p in patch.ports.items() if p not in ports.values()})
    annotations = {**record.job.metadata.annotations, **task.template.metadata.annotations}
    duration = annotations.get(SIM_DURATION)
    exit_code = annotations.get(SIM_EXIT_CODE, "0")
    return PodRun(
        image=main.image,
        image_pull_policy=api.pull_policy(main.image, main.image_pull_policy),
        command=list(patch.command if patch.command is not None else main.command),
        args=list(main.args),
        env=env,
        files=patch.files,
        ports=ports,
        restart_policy=spec.restart_policy,
        sim_duration=api.parse_duration(duration) if duration is not None else None,
        sim_exit_code=int(exit_code) if exit_code.lstrip("-").isdigit() else 1,
        working_dir=main.working_dir,
        limits=dict(main.resources.limits),
        grace_period=spec.termination_grace_period_seconds,
        mounts=pod_mounts(spec, main),
        requests=dict(main.resources.requests),
    )


def pod_mounts(spec: api.PodSpec, container: api.Container) -> list[PodMount]:
    """``container``'s volumeMounts, each joined with its volume (the API checked that it exists)."""
    volumes = {volume.name: volume for volume in spec.volumes}
    mounts = []
    for mount in container.volume_mounts:
        volume = volumes[mount.name]
        mounts.append(
            PodMount(
                volume=mount.name,
                mount_path=mount.mount_path,
                source=volume.source(),
                host_path=volume.host_path.path if volume.host_path is not None else "",
                read_only=mount.read_only,
                sub_path=mount.sub_path,
            )
        )
    return mounts


def _exact(value: float) -> Decimal:
    # repr() of the float parse_quantity returned is the shortest decimal that round-trips, i.e. the
    # number the user wrote ("100m" → 0.1), so summing these Decimals is exact where floats drift.
    return Decimal(repr(value))
