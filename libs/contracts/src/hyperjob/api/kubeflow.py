"""Kubeflow's job kinds — MPIJob (``kubeflow.org/v2beta1``, mpi-operator's, and ``kubeflow.org/v1``,
training-operator's), PyTorchJob and TFJob (``kubeflow.org/v1``) — accepted as their users write them
and run as the Volcano Job their operator would gang-schedule.

``to_volcano_job(manifest)`` gives the Volcano Job: one task per replica type (``launcher``/``worker``;
``master``/``worker``; ``chief``/``master``/``ps``/``worker``/``evaluator``, in that order, so a
HyperJob split gives contiguous ranks), the framework's job plugin, and the gang the operators
create with ``--gang-scheduling=volcano``: ``minAvailable`` = every replica unless
``runPolicy.schedulingPolicy.minAvailable`` says otherwise (or the PyTorchJob is elastic); queue from
``schedulingPolicy.queue``, else the ``scheduling.volcano.sh/queue-name`` annotation; priority class
from ``schedulingPolicy.priorityClass``, else the first replica template's. The
``hyperjob.io/source-kind`` annotation keeps the kind applied (``kubeflow.org/v1/PyTorchJob``).

What each operator gives its pods, and how it is given here:

* MPIJob (mpi-operator v2): pods ``<job>-launcher-0`` / ``<job>-worker-<i>`` (the operator names the
  launcher ``<job>-launcher``); plugins ``mpi`` (``--master=launcher --worker=worker``, hostfile
  ``/etc/mpi/hostfile`` with ``slotsPerWorker`` slots in ``mpiImplementation``'s format), ``ssh``
  (keys under ``sshAuthMountPath``) and ``svc``; the launcher's env as the operator sets it
  (``K_MPI_JOB_ROLE``, ``OMPI_MCA_orte_default_hostfile`` … or ``HYDRA_HOST_FILE`` / ``I_MPI_*``,
  ``NVIDIA_VISIBLE_DEVICES=""``); workers without a command run ``/usr/sbin/sshd -De``. The job
  completes when the launcher does and is terminated when a launcher pod fails.
* MPIJob ``kubeflow.org/v1`` (training-operator): run as the v2beta1 MPIJob with the same replicas,
  ``slotsPerWorker`` and ``runPolicy`` (its top-level ``cleanPodPolicy`` is ``runPolicy``'s): the
  launcher reaches the workers over ssh, not v1's ``kubectl exec``, so a worker without a command
  runs sshd rather than ``sleep``. ``mainContainer`` must name the Worker's first container.
* PyTorchJob: plugin ``pytorch`` (``MASTER_ADDR``/``MASTER_PORT``/``WORLD_SIZE``/``RANK``, the port of
  the ``pytorch`` container's ``pytorchjob-port``, default 23456) and ``PYTHONUNBUFFERED=1``; the job
  completes with the master (without one, with every worker). ``nprocPerNode`` and
  ``elasticPolicy`` as ``api.torchrun`` describes (``WORLD_SIZE`` = pods × processes; an elastic
  gang of ``minReplicas`` workers growing to ``maxReplicas``).
* TFJob: plugin ``tensorflow`` (``TF_CONFIG`` in Volcano's form; ``Master`` is the chief role), the
  port of the ``tensorflow`` container's ``tfjob-port``, default 2222; the job completes with the
  chief (without one, with every worker).

``runPolicy.cleanPodPolicy`` is carried in the ``hyperjob.io/clean-pod-policy`` annotation and
honoured when the job finishes (``jobcore.machine.clean_finished``): ``Running`` stops the running
pods and keeps the finished ones for ``get pods`` and ``logs``, ``All`` deletes every pod, ``None``
leaves every pod as it is (running ones run on). Unset, the job is handled as a Volcano Job is,
which is ``Running``'s rule (the operators' default is ``None``: write it to keep the pods).

Fields the translation cannot honour are rejected by name, never ignored: ``runPolicy``'s
``activeDeadlineSeconds``, ``backoffLimit``, ``suspend: true``, ``managedBy``, ``schedulingPolicy``'s
``minResources`` and ``scheduleTimeoutSeconds``; replica ``restartPolicy: ExitCode``; MPIJob
``runLauncherAsWorker: true`` and ``launcherCreationPolicy: WaitForWorkersReady``; TFJob
``enableDynamicWorker: true``; in a HyperJob's template, PyTorchJob ``elasticPolicy`` and a number as
``nprocPerNode`` (``torchrun.check_in_hyperjob``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import msgspec

from .base import ObjectMeta
from .errors import ManifestError
from .job import Job, JobSpec, LifecyclePolicy, TaskSpec
from .kubeflow_kinds import (
    CLEAN_POD_POLICY_ANNOTATION,
    KUBEFLOW_KIND_NAMES,
    MPI_CONFIG_DIR,
    QUEUE_ANNOTATION,
    SOURCE_KIND_ANNOTATION,
    KubeflowJob,
    MPIJob,
    MPIJobSpec,
    MPIJobV1,
    PyTorchJob,
    ReplicaSpec,
    RunPolicy,
    SchedulingPolicy,
    TFJob,
)
from .pod import EnvVar, PodTemplateSpec
from .torchrun import DEFAULT_NPROC_PER_NODE, check_nproc_per_node, elastic_bounds, torchrun_env

# Replica types in task order (the order of global ranks when a HyperJob splits the job).
_ORDER: dict[str, tuple[str, ...]] = {
    "MPIJob": ("Launcher", "Worker"),
    "PyTorchJob": ("Master", "Worker"),
    "TFJob": ("Chief", "Master", "PS", "Worker", "Evaluator"),
}
_REPLICAS_FIELD = {"MPIJob": "mpiReplicaSpecs", "PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs"}


def to_volcano_job(manifest: KubeflowJob) -> Job:
    """The Volcano Job that runs ``manifest`` (see the module docstring); ``ManifestError`` names
    the field the translation cannot honour."""
    source = f"{manifest.api_version}/{manifest.kind}"
    if isinstance(manifest, MPIJobV1):
        manifest = _as_v2beta1(manifest)
    _check_run_policy(manifest.spec.run_policy)
    if isinstance(manifest, MPIJob):
        tasks, plugins = _mpi_tasks(manifest)
    elif isinstance(manifest, PyTorchJob):
        tasks, plugins = _pytorch_tasks(manifest)
    else:
        tasks, plugins = _tf_tasks(manifest)
    spec = _elastic_gang(manifest, _job_spec(manifest, tasks, plugins))
    return Job(metadata=_metadata(manifest, source), spec=spec)


def applied_kind(annotations: Mapping[str, str], kind: str) -> str:
    """The kind a user applied: ``MPIJob``/``PyTorchJob``/``TFJob`` for the Volcano Job that runs one
    (its ``hyperjob.io/source-kind`` annotation), else ``kind``; answers and listings name it so."""
    source = annotations.get(SOURCE_KIND_ANNOTATION, "").rpartition("/")[2]
    return source if source in KUBEFLOW_KIND_NAMES else kind


def user_path(manifest: KubeflowJob, path: str) -> str:
    """Map a path in the translated Volcano Job back to the Kubeflow field (``$.spec.tasks[1].template``
    → ``$.spec.mpiReplicaSpecs[Worker].template``, the form msgspec's own paths take)."""
    if not path.startswith("$.spec.tasks["):
        return path
    index, _, rest = path.removeprefix("$.spec.tasks[").partition("]")
    types = list(_replicas(manifest))
    if not index.isdigit() or int(index) >= len(types):
        return path
    return f"$.spec.{_REPLICAS_FIELD[manifest.kind]}[{types[int(index)]}]{rest}"


# ------------------------------------------------------------------------------------------ common
def _check_run_policy(policy: RunPolicy) -> None:
    path = "$.spec.runPolicy"
    unsupported = {
        "activeDeadlineSeconds": policy.active_deadline_seconds,
        "backoffLimit": policy.backoff_limit,
        "managedBy": policy.managed_by,
    }
    for field, value in unsupported.items():
        if value is not None:
            raise ManifestError(
                f"{path}.{field}", "not supported: the Volcano Job that runs this job has no equivalent"
            )
    if policy.suspend:
        raise ManifestError(f"{path}.suspend", "not supported: submit the job when it should run")
    scheduling = policy.scheduling_policy or SchedulingPolicy()
    if scheduling.min_resources is not None:
        raise ManifestError(
            f"{path}.schedulingPolicy.minResources",
            "not supported: the gang's minimum resources are those of its first minAvailable pods",
        )
    if scheduling.schedule_timeout_seconds is not None:
        raise ManifestError(
            f"{path}.schedulingPolicy.scheduleTimeoutSeconds", "not supported: the gang waits until it fits"
        )


def _replicas(manifest: KubeflowJob) -> dict[str, ReplicaSpec]:
    specs: Mapping[str, ReplicaSpec]  # each kind keys its replicas by its own literals, as _ORDER does
    if isinstance(manifest, (MPIJob, MPIJobV1)):
        specs = cast(Mapping[str, ReplicaSpec], manifest.spec.mpi_replica_specs)
    elif isinstance(manifest, PyTorchJob):
        specs = cast(Mapping[str, ReplicaSpec], manifest.spec.pytorch_replica_specs)
    else:
        specs = cast(Mapping[str, ReplicaSpec], manifest.spec.tf_replica_specs)
    return {rtype: specs[rtype] for rtype in _ORDER[manifest.kind] if rtype in specs}


def _task(
    manifest: KubeflowJob,
    rtype: str,
    replica: ReplicaSpec,
    default_replicas: int,
    default_restart: str,
    env: list[EnvVar],
    policies: list[LifecyclePolicy],
    command: list[str] | None = None,
) -> TaskSpec:
    path = f"$.spec.{_REPLICAS_FIELD[manifest.kind]}[{rtype}]"
    if replica.restart_policy == "ExitCode":
        raise ManifestError(f"{path}.restartPolicy", "ExitCode is not supported (Always, OnFailure or Never)")
    template = replica.template
    if not template.spec.containers:
        raise ManifestError(f"{path}.template.spec.containers", "a replica needs at least one container")
    main = template.spec.containers[0]
    main = msgspec.structs.replace(
        main,
        env=[*main.env, *env],
        command=command if command is not None and not main.command and not main.args else main.command,
    )
    labels = {
        **template.metadata.labels,
        "training.kubeflow.org/job-name": manifest.metadata.name,
        "training.kubeflow.org/replica-type": rtype.lower(),
    }
    # The operators set the pod's restart policy from the replica spec (its default, not the template's).
    spec = msgspec.structs.replace(
        template.spec,
        containers=[main, *template.spec.containers[1:]],
        restart_policy=replica.restart_policy or default_restart,
    )
    return TaskSpec(
        name=rtype.lower(),
        replicas=default_replicas if replica.replicas is None else replica.replicas,
        template=PodTemplateSpec(metadata=msgspec.structs.replace(template.metadata, labels=labels), spec=spec),
        policies=policies,
    )


def _metadata(manifest: KubeflowJob, source: str) -> ObjectMeta:
    annotations = {**manifest.metadata.annotations, SOURCE_KIND_ANNOTATION: source}
    clean = manifest.spec.run_policy.clean_pod_policy
    if clean is not None:  # unset: a Volcano Job's own rule, which is Running's (see the module docstring)
        annotations[CLEAN_POD_POLICY_ANNOTATION] = clean
    return msgspec.structs.replace(manifest.metadata, annotations=annotations)


def _job_spec(manifest: KubeflowJob, tasks: list[TaskSpec], plugins: dict[str, list[str]]) -> JobSpec:
    policy = manifest.spec.run_policy
    scheduling = policy.scheduling_policy or SchedulingPolicy()
    total = sum(task.replicas for task in tasks)
    if scheduling.min_available is not None and scheduling.min_available > total:
        raise ManifestError(
            "$.spec.runPolicy.schedulingPolicy.minAvailable",
            f"{scheduling.min_available} is more than the job's replicas ({total})",
        )
    priority_class = scheduling.priority_class or next(
        (t.template.spec.priority_class_name for t in tasks if t.template.spec.priority_class_name), ""
    )
    return JobSpec(
        tasks=tasks,
        min_available=total if scheduling.min_available is None else scheduling.min_available,
        queue=scheduling.queue or manifest.metadata.annotations.get(QUEUE_ANNOTATION, ""),
        priority_class_name=priority_class,
        plugins=plugins,
        ttl_seconds_after_finished=policy.ttl_seconds_after_finished,
    )


def _container_port(replica: ReplicaSpec | None, container: str, port_name: str, default: int) -> int:
    for c in replica.template.spec.containers if replica else []:
        if c.name == container:
            for port in c.ports:
                if port.name == port_name:
                    return port.container_port
    return default


COMPLETE_WITH_TASK = [LifecyclePolicy(event="TaskCompleted", action="CompleteJob")]


# --------------------------------------------------------------------------------------------- MPI
def _as_v2beta1(job: MPIJobV1) -> MPIJob:
    """A v1 MPIJob as the v2beta1 one it runs as (the launcher reaches the workers over ssh, as in v2,
    not v1's ``kubectl exec``); the top-level ``cleanPodPolicy`` is ``runPolicy``'s."""
    spec = job.spec
    worker = spec.mpi_replica_specs.get("Worker")
    containers = worker.template.spec.containers if worker else []
    if spec.main_container and containers and containers[0].name != spec.main_container:
        raise ManifestError(
            "$.spec.mainContainer",
            f"{spec.main_container!r} is not the Worker's first container ({containers[0].name!r}): "
            "MPI runs in a replica's first container",
        )
    policy = spec.run_policy
    if policy.clean_pod_policy is None:
        policy = msgspec.structs.replace(policy, clean_pod_policy=spec.clean_pod_policy)
    v2 = MPIJobSpec(mpi_replica_specs=spec.mpi_replica_specs, slots_per_worker=spec.slots_per_worker, run_policy=policy)
    return MPIJob(metadata=job.metadata, spec=v2)


def _mpi_env(spec: MPIJobSpec) -> list[EnvVar]:
    hostfile, slots = f"{MPI_CONFIG_DIR}/hostfile", str(spec.slots_per_worker or 1)
    env = {"K_MPI_JOB_ROLE": "launcher"}
    implementation = spec.mpi_implementation or "OpenMPI"
    if implementation == "OpenMPI":
        env |= {
            "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
            "OMPI_MCA_orte_default_hostfile": hostfile,
            "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
            "OMPI_MCA_orte_set_default_slots": slots,
        }
    elif implementation == "Intel":
        env |= {
            "I_MPI_HYDRA_HOST_FILE": hostfile,
            "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS": "-o ConnectionAttempts=10",
            "I_MPI_PERHOST": slots,
        }
    else:
        env |= {"HYDRA_HOST_FILE": hostfile, "HYDRA_LAUNCH_EXTRA_ARGS": "-o ConnectionAttempts=10"}
    # The operator blanks these so that a launcher never grabs GPUs by mistake.
    env |= {"NVIDIA_VISIBLE_DEVICES": "", "NVIDIA_DRIVER_CAPABILITIES": ""}
    return [EnvVar(name=name, value=value) for name, value in env.items()]


def _mpi_tasks(job: MPIJob) -> tuple[list[TaskSpec], dict[str, list[str]]]:
    spec, path = job.spec, "$.spec"
    if spec.run_launcher_as_worker:
        raise ManifestError(f"{path}.runLauncherAsWorker", "not supported: the launcher only launches")
    if spec.launcher_creation_policy == "WaitForWorkersReady":
        raise ManifestError(f"{path}.launcherCreationPolicy", "only AtStartup is supported: the gang starts together")
    replicas = _replicas(job)
    launcher = replicas.get("Launcher")
    if launcher is None:
        raise ManifestError(f"{path}.mpiReplicaSpecs[Launcher]", "required")
    if launcher.replicas not in (None, 1):
        raise ManifestError(f"{path}.mpiReplicaSpecs[Launcher].replicas", f"must be 1, not {launcher.replicas}")
    tasks = [
        _task(
            job,
            "Launcher",
            launcher,
            1,
            "OnFailure",
            _mpi_env(spec),
            [*COMPLETE_WITH_TASK, LifecyclePolicy(event="PodFailed", action="TerminateJob")],
        )
    ]
    if "Worker" in replicas:
        tasks.append(
            _task(
                job,
                "Worker",
                replicas["Worker"],
                0,
                "Never",
                [EnvVar(name="K_MPI_JOB_ROLE", value="worker")],
                [],
                command=["/usr/sbin/sshd", "-De"],
            )
        )
    mpi = [
        "--master=launcher",
        "--worker=worker",
        f"--hostfile={MPI_CONFIG_DIR}/hostfile",
        f"--slots-per-worker={spec.slots_per_worker or 1}",
        f"--mpi-implementation={spec.mpi_implementation or 'OpenMPI'}",
    ]
    ssh = [f"--ssh-key-file-path={spec.ssh_auth_mount_path or '/root/.ssh'}"]
    return tasks, {"mpi": mpi, "ssh": ssh, "svc": []}


# ----------------------------------------------------------------------------------------- PyTorch
def _pytorch_tasks(job: PyTorchJob) -> tuple[list[TaskSpec], dict[str, list[str]]]:
    spec, path = job.spec, "$.spec"
    nproc = spec.nproc_per_node or DEFAULT_NPROC_PER_NODE
    check_nproc_per_node(nproc)
    replicas = _pytorch_replicas(job)
    master = replicas.get("Master")
    if master is not None and master.replicas not in (None, 1):
        raise ManifestError(f"{path}.pytorchReplicaSpecs[Master].replicas", f"must be 1, not {master.replicas}")
    port = _container_port(master or replicas.get("Worker"), "pytorch", "pytorchjob-port", 23456)
    rendezvous_port = _container_port(replicas.get("Worker"), "pytorch", "pytorchjob-port", 23456)
    pods = sum(1 if r.replicas is None and rtype == "Master" else r.replicas or 0 for rtype, r in replicas.items())
    env = [
        EnvVar(name="PYTHONUNBUFFERED", value="1"),
        *torchrun_env(job.metadata.name, nproc, pods, spec.elastic_policy, _elastic_range(job), rendezvous_port),
    ]
    completing = "Master" if master is not None else "Worker"
    tasks = [
        _task(
            job,
            rtype,
            replica,
            1 if rtype == "Master" else 0,
            "OnFailure",
            env,
            COMPLETE_WITH_TASK if rtype == completing else [],
        )
        for rtype, replica in replicas.items()
    ]
    flags = ["--master=master", "--worker=worker", f"--port={port}", f"--nproc-per-node={nproc}"]
    return tasks, {"pytorch": flags, "svc": []}


def _elastic_range(job: PyTorchJob) -> tuple[int, int]:
    """(minReplicas, maxReplicas) of an elastic job's workers; (0, 0) for a job that is not elastic."""
    if job.spec.elastic_policy is None:
        return 0, 0
    worker = job.spec.pytorch_replica_specs.get("Worker")
    if worker is None:
        raise ManifestError("$.spec.pytorchReplicaSpecs[Worker]", "required with elasticPolicy (the elastic workers)")
    return elastic_bounds(job.spec.elastic_policy, 0 if worker.replicas is None else worker.replicas)


def _pytorch_replicas(job: PyTorchJob) -> dict[str, ReplicaSpec]:
    """The replica specs, an elastic job's workers at ``maxReplicas`` (the most that may run)."""
    replicas = _replicas(job)
    if job.spec.elastic_policy is not None:
        replicas["Worker"] = msgspec.structs.replace(replicas["Worker"], replicas=_elastic_range(job)[1])
    return replicas


def _elastic_gang(job: KubeflowJob, spec: JobSpec) -> JobSpec:
    """An elastic PyTorchJob's gang: the master and ``minReplicas`` workers; the others start as room
    appears. Without a master the job succeeds once a worker has (the operator's rule)."""
    if not isinstance(job, PyTorchJob) or job.spec.elastic_policy is None:
        return spec
    masters = sum(task.replicas for task in spec.tasks if task.name == "master")
    scheduling = job.spec.run_policy.scheduling_policy or SchedulingPolicy()
    gang = scheduling.min_available if scheduling.min_available is not None else masters + _elastic_range(job)[0]
    return msgspec.structs.replace(spec, min_available=gang, min_success=None if masters else 1)


# -------------------------------------------------------------------------------------- TensorFlow
def _tf_tasks(job: TFJob) -> tuple[list[TaskSpec], dict[str, list[str]]]:
    spec, path = job.spec, "$.spec"
    if spec.enable_dynamic_worker:
        raise ManifestError(f"{path}.enableDynamicWorker", "not supported: TF_CONFIG lists the whole cluster")
    replicas = _replicas(job)
    if "Chief" in replicas and "Master" in replicas:
        raise ManifestError(f"{path}.tfReplicaSpecs[Master]", "Chief and Master are the same role: give one of them")
    chief = "Chief" if "Chief" in replicas else "Master" if "Master" in replicas else None
    completing = chief or "Worker"
    tasks = [
        _task(job, rtype, replica, 1, "Never", [], COMPLETE_WITH_TASK if rtype == completing else [])
        for rtype, replica in replicas.items()
    ]
    port = next(
        (
            _container_port(r, "tensorflow", "tfjob-port", 0)
            for r in replicas.values()
            if _container_port(r, "tensorflow", "tfjob-port", 0)
        ),
        2222,
    )
    args = [f"--port={port}"] + (["--chief=master"] if chief == "Master" else [])
    return tasks, {"tensorflow": args, "svc": []}
