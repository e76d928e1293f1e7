"""The HyperJob API: Kubernetes-style manifests as strict, immutable msgspec structs.

Owns the shapes of HyperJob (both forms), Volcano Job, Queue, PodGroup and PriorityClass,
Kubeflow's MPIJob, PyTorchJob and TFJob (shapes in ``api.kubeflow_kinds``; decoded into the
Volcano Job that runs them by ``api.kubeflow``, torchrun's env by ``api.torchrun``), job plugin
flags (``api.plugins``), the HyperJob world a child carries (``api.world``), the Kubernetes
quantity notation (requests default to limits), and the validation that needs no running system.
Pure: no I/O beyond parsing text. Every rejection is a ``ManifestError`` whose ``path`` names the
field (a mapping's key included: ``mpiReplicaSpecs[Worker]``); a field written as null is unset,
as on a Kubernetes API server (``api.rawdoc``).
"""

from .base import (
    APPLIED_NAME_ANNOTATION,
    CLUSTER_SCOPED_KINDS,
    DEFAULT_NAMESPACE,
    ObjectMeta,
    RawDocument,
    fleet_key,
    fleet_name,
    object_key,
    split_key,
)
from .duration import DurationError, parse_duration
from .errors import ManifestError, UnexpectedKindError, expect_kind
from .flow import WORKFLOW_KINDS, HyperJobTemplate, JobFlow, JobTemplate
from .hyperjob import (
    ClusterAffinity,
    ClusterReplicas,
    ClusterTerm,
    Dispatch,
    HyperJob,
    HyperJobSpec,
    LabelSelector,
    LabelSelectorRequirement,
    PreferredClusterTerm,
    ReplicatedJob,
    SplitPolicy,
    SpreadConstraint,
    TemplatedHyperJob,
    normalize,
    template_replicas,
    user_path,
)
from .job import CronJob, Job, JobSpec, LifecyclePolicy, NetworkTopology, TaskSpec
from .kubeflow import applied_kind
from .kubeflow_kinds import CLEAN_POD_POLICY_ANNOTATION, KUBEFLOW_KIND_NAMES, SOURCE_KIND_ANNOTATION
from .manifest import (
    SERVER_SET_METADATA,
    SHORT_KINDS,
    Manifest,
    decode,
    decode_stored,
    encode,
    load,
    load_documents,
    without_server_fields,
)
from .names import with_generated_name
from .plugins import HYPERJOB_PLUGIN_FLAGS, JOB_PLUGIN_FLAGS, MPI_IMPLEMENTATIONS, plugin_flags
from .pod import Container, PodSpec, PodTemplateSpec, PullPolicy, Taint, Toleration, Volume, VolumeMount, pull_policy
from .quantity import QuantityError, ResourceList, parse_quantity, parse_resource_list
from .queue import DEFAULT_QUEUE, PodGroup, PriorityClass, Queue, QueueSpec
from .torchrun import processes_per_pod
from .validation import (
    SIM_DURATION,
    SIM_EXIT_CODE,
    accelerator_request,
    check_job_spec,
    check_plugins,
    check_queue_reference,
    check_references,
    check_sim_annotations,
)
from .world import WORLD_ANNOTATION, World, WorldChild, decode_world, encode_world

__all__ = [
    "ClusterAffinity",
    "ClusterTerm",
    "Dispatch",
    "PreferredClusterTerm",
    "SpreadConstraint",
    "LabelSelector",
    "LabelSelectorRequirement",
    "CLUSTER_SCOPED_KINDS",
    "DEFAULT_NAMESPACE",
    "RawDocument",
    "fleet_key",
    "fleet_name",
    "APPLIED_NAME_ANNOTATION",
    "object_key",
    "split_key",
    "WORKFLOW_KINDS",
    "CronJob",
    "JobFlow",
    "JobTemplate",
    "HyperJobTemplate",
    "HYPERJOB_PLUGIN_FLAGS",
    "JOB_PLUGIN_FLAGS",
    "MPI_IMPLEMENTATIONS",
    "WORLD_ANNOTATION",
    "World",
    "WorldChild",
    "decode_world",
    "encode_world",
    "plugin_flags",
    "DEFAULT_QUEUE",
    "SIM_DURATION",
    "SIM_EXIT_CODE",
    "ClusterReplicas",
    "Container",
    "DurationError",
    "HyperJob",
    "HyperJobSpec",
    "Job",
    "JobSpec",
    "LifecyclePolicy",
    "Manifest",
    "ManifestError",
    "NetworkTopology",
    "ObjectMeta",
    "PodGroup",
    "PodSpec",
    "PodTemplateSpec",
    "PriorityClass",
    "QuantityError",
    "Queue",
    "QueueSpec",
    "ReplicatedJob",
    "ResourceList",
    "SplitPolicy",
    "Taint",
    "TaskSpec",
    "TemplatedHyperJob",
    "Toleration",
    "UnexpectedKindError",
    "Volume",
    "VolumeMount",
    "PullPolicy",
    "pull_policy",
    "accelerator_request",
    "check_job_spec",
    "check_plugins",
    "check_queue_reference",
    "check_references",
    "check_sim_annotations",
    "decode",
    "KUBEFLOW_KIND_NAMES",
    "SOURCE_KIND_ANNOTATION",
    "CLEAN_POD_POLICY_ANNOTATION",
    "applied_kind",
    "decode_stored",
    "encode",
    "expect_kind",
    "load",
    "load_documents",
    "without_server_fields",
    "with_generated_name",
    "SERVER_SET_METADATA",
    "SHORT_KINDS",
    "normalize",
    "parse_duration",
    "processes_per_pod",
    "parse_quantity",
    "parse_resource_list",
    "template_replicas",
    "user_path",
]
