"""Semantic checks a schema cannot express, each failing with the field path.

``check_*`` functions look at one object alone (what any client can check before submitting);
``check_references`` looks at what the object names in the running system (clusters, queues).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from .base import DNS_LABEL_MAX, Quantity, fleet_name
from .duration import DurationError, parse_duration
from .errors import ManifestError
from .hyperjob import ClusterAffinity, HyperJob, LabelSelector, ReplicatedJob, template_replicas, user_path
from .job import JobSpec, LifecyclePolicy
from .plugins import HYPERJOB_PLUGIN_FLAGS, JOB_PLUGIN_FLAGS, MPI_IMPLEMENTATIONS, plugin_flags
from .pod import ResourceRequirements
from .quantity import QuantityError, parse_quantity, parse_resource_list
from .queue import Queue

# The simulated pod lifecycle (scenario-format.md): a pod succeeds after this duration, or fails
# with this exit code. Read by jobcore and the node-agent's simulated fleet; checked here once.
SIM_DURATION = "hyperjob.io/sim-duration"
SIM_EXIT_CODE = "hyperjob.io/sim-exit-code"

KNOWN_JOB_PLUGINS = frozenset(JOB_PLUGIN_FLAGS)
KNOWN_HYPERJOB_PLUGINS = frozenset(HYPERJOB_PLUGIN_FLAGS)


def check_job_spec(spec: JobSpec, path: str = "$.spec") -> None:
    """Volcano's admission checks on a Job spec (before defaults are applied)."""
    if not spec.tasks:
        raise ManifestError(f"{path}.tasks", "a job needs at least one task")
    seen: set[str] = set()
    for i, task in enumerate(spec.tasks):
        task_path = f"{path}.tasks[{i}]"
        name = task.name or f"default{i}"
        if name in seen:
            raise ManifestError(f"{task_path}.name", f"duplicate task name {name!r}")
        seen.add(name)
        if task.min_available is not None and task.min_available > task.replicas:
            raise ManifestError(
                f"{task_path}.minAvailable", f"{task.min_available} is more than the task's replicas ({task.replicas})"
            )
        if not task.template.spec.containers:
            raise ManifestError(f"{task_path}.template.spec.containers", "a task needs at least one container")
        check_sim_annotations(task.template.metadata.annotations, f"{task_path}.template.metadata")
        for c, container in enumerate(task.template.spec.containers):
            _check_resources(container.resources, f"{task_path}.template.spec.containers[{c}].resources")
        for c, container in enumerate(task.template.spec.init_containers):
            _check_resources(container.resources, f"{task_path}.template.spec.initContainers[{c}].resources")
        for p, policy in enumerate(task.policies):
            _check_policy(policy, f"{task_path}.policies[{p}]")
    total = template_replicas(spec)
    if spec.min_available > total:
        raise ManifestError(
            f"{path}.minAvailable", f"{spec.min_available} is more than the job's total replicas ({total})"
        )
    if spec.min_success is not None and spec.min_success > total:
        raise ManifestError(f"{path}.minSuccess", f"{spec.min_success} is more than the job's total replicas ({total})")
    for p, policy in enumerate(spec.policies):
        _check_policy(policy, f"{path}.policies[{p}]")
    for plugin in spec.plugins:
        if plugin not in KNOWN_JOB_PLUGINS:
            raise ManifestError(
                f"{path}.plugins.{plugin}", f"unknown job plugin (known: {', '.join(sorted(KNOWN_JOB_PLUGINS))})"
            )
    check_plugins(spec.plugins, {task.name or f"default{i}" for i, task in enumerate(spec.tasks)}, f"{path}.plugins")


def check_plugins(plugins: Mapping[str, list[str]], tasks: Collection[str], path: str, hyperjob: bool = False) -> None:
    """Each plugin's flags parse (``api.plugin_flags``), and the tasks that mpi and ray need exist.

    Volcano's webhook rejects an mpi job without its master task; a ray job without its head task
    is rejected here too, where Volcano would fail every pod creation.
    """
    known = HYPERJOB_PLUGIN_FLAGS if hyperjob else JOB_PLUGIN_FLAGS
    for plugin, args in plugins.items():
        flags = plugin_flags(plugin, args, f"{path}.{plugin}", known)
        required = {"mpi": "master", "ray": "head"}.get(plugin)
        if required is not None and flags[required] not in tasks:
            raise ManifestError(
                f"{path}.{plugin}",
                f"the {plugin} {required} task {flags[required]!r} was not found "
                f"(tasks: {', '.join(sorted(tasks))}; name it with --{required}=TASK)",
            )
        if plugin == "mpi":
            _check_mpi_extensions(flags, f"{path}.{plugin}")


def _check_mpi_extensions(flags: Mapping[str, str], path: str) -> None:
    if int(flags["slots-per-worker"]) < 1:
        raise ManifestError(path, f"--slots-per-worker={flags['slots-per-worker']}: must be at least 1")
    if flags["mpi-implementation"] not in MPI_IMPLEMENTATIONS:
        raise ManifestError(
            path, f"--mpi-implementation={flags['mpi-implementation']}: not one of {', '.join(MPI_IMPLEMENTATIONS)}"
        )


def _check_policy(policy: LifecyclePolicy, path: str) -> None:
    if policy.event is None and not policy.events and policy.exit_code is None:
        raise ManifestError(path, "a policy needs event, events or exitCode")
    if policy.exit_code is not None and (policy.event is not None or policy.events):
        raise ManifestError(f"{path}.exitCode", "exitCode and event(s) are mutually exclusive")
    if policy.exit_code == 0:
        raise ManifestError(f"{path}.exitCode", "0 is not a failure exit code")
    if policy.timeout is not None:
        try:
            parse_duration(policy.timeout)
        except DurationError as exc:
            raise ManifestError(f"{path}.timeout", str(exc)) from None


def check_sim_annotations(annotations: Mapping[str, str], metadata_path: str) -> None:
    """The simulation annotations must parse, or no pod carrying them could be run."""
    if SIM_DURATION in annotations:
        try:
            parse_duration(annotations[SIM_DURATION])
        except DurationError as exc:
            raise ManifestError(f"{metadata_path}.annotations.{SIM_DURATION}", str(exc)) from None
    code = annotations.get(SIM_EXIT_CODE, "0")
    if not code.lstrip("-").isdigit():
        raise ManifestError(f"{metadata_path}.annotations.{SIM_EXIT_CODE}", f"{code!r} is not an integer exit code")


def _check_resources(resources: ResourceRequirements, path: str) -> None:
    """Quantities parse, an extended resource's are whole, and no request exceeds its limit
    (Kubernetes' rules)."""
    for field, raw in (("limits", resources.limits), ("requests", resources.requests)):
        _check_quantities(raw, f"{path}.{field}")
        for name, value in raw.items():
            if _is_extended(name) and not float(parse_quantity(value)).is_integer():
                raise ManifestError(f"{path}.{field}.{name}", f"{value!r} must be an integer (an extended resource)")
    for name, limit in resources.limits.items():
        request = resources.requests.get(name)
        if request is not None and parse_quantity(request) > parse_quantity(limit):
            raise ManifestError(f"{path}.requests.{name}", f"{request} is more than its limit {limit}")


def _is_extended(name: str) -> bool:
    """Kubernetes' ``IsExtendedResourceName``: a domain-prefixed name outside ``kubernetes.io``
    (``nvidia.com/gpu``), which a device plugin hands out whole."""
    domain, slash, _ = name.partition("/")
    return (
        bool(slash)
        and not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))
        and not (name.startswith("requests."))
    )


def _check_quantities(raw: Mapping[str, Quantity], path: str) -> None:
    for name, value in raw.items():
        try:
            amount = parse_quantity(value)
        except QuantityError as exc:
            raise ManifestError(f"{path}.{name}", str(exc)) from None
        if amount < 0:
            raise ManifestError(f"{path}.{name}", f"{value!r} is negative")


def check_queue(queue: Queue) -> None:
    for field, raw in (
        ("capability", queue.spec.capability),
        ("deserved", queue.spec.deserved),
        ("guarantee.resource", queue.spec.guarantee.resource),
    ):
        _check_quantities(raw, f"$.spec.{field}")
    if queue.metadata.name == "root" and queue.spec.parent:
        raise ManifestError("$.spec.parent", "the root queue has no parent")
    if queue.spec.parent == queue.metadata.name:
        raise ManifestError("$.spec.parent", "a queue cannot be its own parent")


def check_hyperjob(hyperjob: HyperJob) -> None:
    """Structural checks on the normalized (upstream) form; paths name the form the user wrote."""
    try:
        _check_hyperjob(hyperjob)
    except ManifestError as exc:
        raise ManifestError(user_path(hyperjob, exc.path), exc.message) from None


def _check_child_name_length(hyperjob: str, rj: ReplicatedJob, path: str) -> None:
    """Each child is a Volcano Job named ``<fleet name>-<replicated job>-<index>`` (the fleet name has
    the namespace in front outside ``default``), and a Job's name is
    a DNS label: the longest child name must fit in 63 characters (at most one child per pod)."""
    longest = f"{hyperjob}-{rj.name}-{max(rj.replicas * template_replicas(rj.template_spec) - 1, 0)}"
    if len(longest) > DNS_LABEL_MAX:
        raise ManifestError(
            f"{path}.name",
            f"child job names such as {longest!r} would be {len(longest)} characters; a Job name is a DNS label "
            f"(at most {DNS_LABEL_MAX}): shorten the HyperJob's, its namespace's or the replicated job's name",
        )


def _check_label_selector(selector: LabelSelector, path: str) -> None:
    """Kubernetes' rule: ``In``/``NotIn`` name values, ``Exists``/``DoesNotExist`` name none."""
    for i, expr in enumerate(selector.match_expressions):
        wants_values = expr.operator in ("In", "NotIn")
        if wants_values != bool(expr.values):
            need = "needs at least one value" if wants_values else "takes no values"
            raise ManifestError(f"{path}.matchExpressions[{i}].values", f"operator {expr.operator} {need}")


def _check_cluster_affinity(affinity: ClusterAffinity, path: str) -> None:
    """The selectors as Kubernetes checks them; a preferred weight in 1-100 (Kubernetes' range);
    a spread constraint over exactly one label or field, with 1 <= minGroups <= maxGroups."""
    if affinity.label_selector is not None:
        _check_label_selector(affinity.label_selector, f"{path}.labelSelector")
    for i, term in enumerate(affinity.preferred):
        if not 1 <= term.weight <= 100:
            raise ManifestError(f"{path}.preferred[{i}].weight", f"must be between 1 and 100, not {term.weight}")
        if term.preference.label_selector is not None:
            _check_label_selector(term.preference.label_selector, f"{path}.preferred[{i}].preference.labelSelector")
    for i, spread in enumerate(affinity.spread_constraints):
        where = f"{path}.spreadConstraints[{i}]"
        if (spread.spread_by_field is None) == (not spread.spread_by_label):
            raise ManifestError(f"{where}.spreadByLabel", "give exactly one of spreadByLabel and spreadByField")
        if spread.min_groups < 1:
            raise ManifestError(f"{where}.minGroups", f"must be at least 1, not {spread.min_groups}")
        if spread.max_groups is not None and spread.max_groups < spread.min_groups:
            raise ManifestError(f"{where}.maxGroups", f"{spread.max_groups} is less than minGroups {spread.min_groups}")


def _check_widen_after(raw: str, path: str) -> None:
    try:
        seconds = parse_duration(raw)
    except DurationError as exc:
        raise ManifestError(path, str(exc)) from None
    if seconds <= 0:
        raise ManifestError(path, f"{raw!r} must be longer than 0 s (Incremental widens after it)")


def _check_data_sets(data_sets: list[str], path: str) -> None:
    for i, name in enumerate(data_sets):
        if not name:
            raise ManifestError(f"{path}[{i}]", "a data set needs a name")
        if name in data_sets[:i]:
            raise ManifestError(f"{path}[{i}]", f"data set {name!r} is listed twice")


def _check_hyperjob(hyperjob: HyperJob, path_prefix: str = "$.spec") -> None:
    spec = hyperjob.spec
    if not spec.replicated_jobs:
        raise ManifestError(f"{path_prefix}.replicatedJobs", "a HyperJob needs at least one replicated job")
    names: set[str] = set()
    for i, rj in enumerate(spec.replicated_jobs):
        path = f"{path_prefix}.replicatedJobs[{i}]"
        _check_child_name_length(fleet_name(hyperjob.metadata), rj, path)
        if rj.name in names:
            raise ManifestError(f"{path}.name", f"duplicate replicated job name {rj.name!r}")
        names.add(rj.name)
        check_job_spec(rj.template_spec, f"{path}.templateSpec")
        if rj.template_metadata is not None:
            check_sim_annotations(rj.template_metadata.annotations, f"{path}.templateMetadata")
        _check_split(rj, path)
        if rj.cluster_affinity is not None:
            _check_cluster_affinity(rj.cluster_affinity, f"{path}.clusterAffinity")
    _check_data_sets(spec.data_sets, f"{path_prefix}.dataSets")
    _check_widen_after(spec.dispatch.widen_after, f"{path_prefix}.dispatch.widenAfter")
    for plugin in spec.plugins:
        if plugin not in KNOWN_HYPERJOB_PLUGINS:
            raise ManifestError(
                f"{path_prefix}.plugins.{plugin}",
                f"unknown HyperJob plugin (known: {', '.join(sorted(KNOWN_HYPERJOB_PLUGINS))})",
            )
    tasks = {task.name for rj in spec.replicated_jobs for task in rj.template_spec.tasks}
    check_plugins(spec.plugins, tasks, f"{path_prefix}.plugins", hyperjob=True)
    if {"mpi", "tensorflow"} & set(spec.plugins):
        _check_world_hostnames(hyperjob, path_prefix)


def _check_world_hostnames(hyperjob: HyperJob, path_prefix: str) -> None:
    """A world's hosts are ``<child>-<task>-<i>.<child>``: a template may not name its own."""
    for i, rj in enumerate(hyperjob.spec.replicated_jobs):
        for t, task in enumerate(rj.template_spec.tasks):
            spec = task.template.spec
            for field, value in (("hostname", spec.hostname), ("subdomain", spec.subdomain)):
                if value:
                    raise ManifestError(
                        f"{path_prefix}.replicatedJobs[{i}].templateSpec.tasks[{t}].template.spec.{field}",
                        "not supported with the HyperJob's mpi or tensorflow plugin, whose world "
                        "names every pod <child>-<task>-<i>.<child>",
                    )


def _check_split(rj: ReplicatedJob, path: str) -> None:
    split = rj.split_policy
    if split is None:
        return
    if rj.replicas > 1:
        raise ManifestError(
            f"{path}.replicas", "must be 1 or absent when splitPolicy is set (the split decides the children)"
        )
    if split.prefer == "cost" and split.mode != "auto":
        raise ManifestError(f"{path}.splitPolicy.prefer", "cost chooses among the plans of mode auto; set mode: auto")
    total = template_replicas(rj.template_spec)
    if split.clusters and not any(c.replicas for c in split.clusters):
        raise ManifestError(f"{path}.splitPolicy.clusters", "every cluster's replicas are 0: the split makes no child")
    if split.weights and not any(split.weights.values()):
        raise ManifestError(f"{path}.splitPolicy.weights", "every weight is 0: no cluster would get a replica")
    if split.clusters:
        names = [c.name for c in split.clusters]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ManifestError(f"{path}.splitPolicy.clusters", f"cluster {duplicates[0]!r} is listed twice")
        counted = sum(c.replicas for c in split.clusters)
        if counted != total:
            raise ManifestError(
                f"{path}.splitPolicy.clusters", f"replicas add up to {counted}, but the template has {total}"
            )
        if split.mode == "auto":
            raise ManifestError(f"{path}.splitPolicy.mode", "explicit clusters and mode auto are mutually exclusive")
    if split.accelerators is not None:
        if not split.accelerator_type:
            raise ManifestError(f"{path}.splitPolicy.acceleratorType", "required when accelerators is set")
        requested = accelerator_request(rj.template_spec, split.accelerator_type)
        if requested != split.accelerators:
            raise ManifestError(
                f"{path}.splitPolicy.accelerators",
                f"{split.accelerators} does not match the template's total {split.accelerator_type} "
                f"request ({requested:g})",
            )
    if total % split.granularity:
        raise ManifestError(
            f"{path}.splitPolicy.granularity", f"{total} replicas cannot be divided in units of {split.granularity}"
        )


def accelerator_request(spec: JobSpec, resource: str) -> float:
    """The whole job's request of one resource (all replicas of all tasks)."""
    amount = 0.0
    for task in spec.tasks:
        per_pod = sum(
            parse_resource_list(c.resources.requests).get(resource, 0.0) for c in task.template.spec.containers
        )
        amount += per_pod * task.replicas
    return amount


def check_references(hyperjob: HyperJob, clusters: Collection[str], queues: Mapping[str, str]) -> None:
    """Check what the HyperJob names against the system: clusters exist, queues exist and are Open.

    ``queues`` maps a queue name to its state.
    """
    try:
        _check_references(hyperjob, clusters, queues)
    except ManifestError as exc:
        raise ManifestError(user_path(hyperjob, exc.path), exc.message) from None


def _check_references(hyperjob: HyperJob, clusters: Collection[str], queues: Mapping[str, str]) -> None:
    for i, rj in enumerate(hyperjob.spec.replicated_jobs):
        path = f"$.spec.replicatedJobs[{i}]"
        split = rj.split_policy
        # The split's own entries first: for the conceptual form they are what the user wrote.
        for j, entry in enumerate(split.clusters if split else []):
            if entry.name not in clusters:
                raise ManifestError(f"{path}.splitPolicy.clusters[{j}].name", f"cluster {entry.name!r} does not exist")
        for j, name in enumerate(rj.cluster_names):
            if name not in clusters:
                raise ManifestError(f"{path}.clusterNames[{j}]", f"cluster {name!r} does not exist")
        for name in split.weights if split else {}:
            if name not in clusters:
                raise ManifestError(f"{path}.splitPolicy.weights.{name}", f"cluster {name!r} does not exist")
        check_queue_reference(rj.template_spec.queue, queues, f"{path}.templateSpec.queue")


def check_queue_reference(queue: str, queues: Mapping[str, str], path: str) -> None:
    name = queue or "default"
    if name not in queues:
        raise ManifestError(path, f"queue {name!r} does not exist")
    if queues[name] != "Open":
        raise ManifestError(path, f"queue {name!r} is {queues[name]}, not Open")
