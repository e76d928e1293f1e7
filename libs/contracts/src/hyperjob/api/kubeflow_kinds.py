"""The shapes of Kubeflow's job kinds as their operators define them (mpi-operator v2beta1,
training-operator release-1.9 ``kubeflow.org/v1``): strict structs, decoded by ``api.decode``;
``api.kubeflow`` turns each into the Volcano Job that runs it."""

from __future__ import annotations

from typing import Final, Literal

from .base import NonNegative, ObjectMeta, Positive, QuantityMap, Spec
from .pod import PodTemplateSpec
from .torchrun import ElasticPolicy

MPI_API_VERSION: Final = "kubeflow.org/v2beta1"
TRAINING_API_VERSION: Final = "kubeflow.org/v1"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
SOURCE_KIND_ANNOTATION = "hyperjob.io/source-kind"
# runPolicy.cleanPodPolicy, carried to the job-controller, which cleans a finished job's pods so.
CLEAN_POD_POLICY_ANNOTATION = "hyperjob.io/clean-pod-policy"
MPI_CONFIG_DIR = "/etc/mpi"


class SchedulingPolicy(Spec, frozen=True, kw_only=True):
    min_available: NonNegative | None = None
    queue: str = ""
    min_resources: QuantityMap | None = None
    priority_class: str = ""
    schedule_timeout_seconds: int | None = None


class RunPolicy(Spec, frozen=True, kw_only=True):
    clean_pod_policy: Literal["All", "Running", "None"] | None = None
    ttl_seconds_after_finished: NonNegative | None = None
    active_deadline_seconds: int | None = None
    backoff_limit: int | None = None
    scheduling_policy: SchedulingPolicy | None = None
    suspend: bool | None = None
    managed_by: str | None = None


class ReplicaSpec(Spec, frozen=True, kw_only=True):
    replicas: NonNegative | None = None
    template: PodTemplateSpec
    restart_policy: Literal["Always", "OnFailure", "Never", "ExitCode"] | None = None


class MPIJobSpec(Spec, frozen=True, kw_only=True):
    mpi_replica_specs: dict[Literal["Launcher", "Worker"], ReplicaSpec]
    slots_per_worker: Positive | None = None
    run_launcher_as_worker: bool | None = None
    run_policy: RunPolicy = RunPolicy()
    ssh_auth_mount_path: str = ""
    launcher_creation_policy: Literal["AtStartup", "WaitForWorkersReady"] | None = None
    mpi_implementation: Literal["OpenMPI", "Intel", "MPICH"] | None = None


class MPIJob(Spec, frozen=True, kw_only=True):
    api_version: Literal["kubeflow.org/v2beta1"] = MPI_API_VERSION
    kind: Literal["MPIJob"] = "MPIJob"
    metadata: ObjectMeta
    spec: MPIJobSpec


class MPIJobV1Spec(Spec, frozen=True, kw_only=True):
    """training-operator's ``kubeflow.org/v1`` MPIJob: v2beta1's fields less the MPI implementation
    and the ssh mount, plus a top-level ``cleanPodPolicy`` and ``mainContainer``."""

    mpi_replica_specs: dict[Literal["Launcher", "Worker"], ReplicaSpec]
    slots_per_worker: Positive | None = None
    clean_pod_policy: Literal["All", "Running", "None"] | None = None
    main_container: str = ""
    run_policy: RunPolicy = RunPolicy()


class MPIJobV1(Spec, frozen=True, kw_only=True):
    api_version: Literal["kubeflow.org/v1"] = TRAINING_API_VERSION
    kind: Literal["MPIJob"] = "MPIJob"
    metadata: ObjectMeta
    spec: MPIJobV1Spec


class PyTorchJobSpec(Spec, frozen=True, kw_only=True):
    pytorch_replica_specs: dict[Literal["Master", "Worker"], ReplicaSpec]
    run_policy: RunPolicy = RunPolicy()
    elastic_policy: ElasticPolicy | None = None
    nproc_per_node: str | None = None


class PyTorchJob(Spec, frozen=True, kw_only=True):
    api_version: Literal["kubeflow.org/v1"] = TRAINING_API_VERSION
    kind: Literal["PyTorchJob"] = "PyTorchJob"
    metadata: ObjectMeta
    spec: PyTorchJobSpec


class TFJobSpec(Spec, frozen=True, kw_only=True):
    tf_replica_specs: dict[Literal["Chief", "Master", "PS", "Worker", "Evaluator"], ReplicaSpec]
    run_policy: RunPolicy = RunPolicy()
    success_policy: Literal["", "AllWorkers"] = ""
    enable_dynamic_worker: bool = False


class TFJob(Spec, frozen=True, kw_only=True):
    api_version: Literal["kubeflow.org/v1"] = TRAINING_API_VERSION
    kind: Literal["TFJob"] = "TFJob"
    metadata: ObjectMeta
    spec: TFJobSpec


KubeflowJob = MPIJob | MPIJobV1 | PyTorchJob | TFJob
KUBEFLOW_KINDS: dict[tuple[str, str], type[KubeflowJob]] = {
    (MPI_API_VERSION, "MPIJob"): MPIJob,
    (TRAINING_API_VERSION, "MPIJob"): MPIJobV1,
    (TRAINING_API_VERSION, "PyTorchJob"): PyTorchJob,
    (TRAINING_API_VERSION, "TFJob"): TFJob,
}
KUBEFLOW_KIND_NAMES = ("MPIJob", "PyTorchJob", "TFJob")
