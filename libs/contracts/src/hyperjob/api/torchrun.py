"""What a PyTorchJob's pods get for torchrun, as training-operator (release-1.9,
``pkg/controller.v1/pytorch/envvar.go``, ``elastic.go``, ``pytorch_defaults.go``) gives it.

* ``nprocPerNode`` (default ``auto``): ``PET_NPROC_PER_NODE`` on every pod, and ``WORLD_SIZE`` =
  pods × processes when it is a number (the pytorch plugin's ``--nproc-per-node``); ``PET_NODE_RANK``
  is the pod's ``RANK``; ``PET_NNODES`` the number of pods.
* ``elasticPolicy``: the job is an elastic gang. Workers run between ``minReplicas`` and
  ``maxReplicas`` (one given stands for both; neither: the Worker replicas): the Volcano Job has
  ``maxReplicas`` workers and ``minAvailable`` = the master (if any) + ``minReplicas``, so it starts
  once room for ``minReplicas`` workers exists and the rest start as room appears, as any Volcano
  Job with ``minAvailable`` below its replicas does. The rendezvous env torchrun reads:
  ``PET_RDZV_ENDPOINT`` (``rdzvHost``, default worker 0, ``:rdzvPort``, default the worker's
  ``pytorchjob-port``), ``PET_RDZV_BACKEND`` (default ``c10d``), ``PET_NNODES`` = ``min:max``,
  ``PET_MAX_RESTARTS``, ``PET_NPROC_PER_NODE`` (``nProcPerNode``), ``PET_RDZV_ID``,
  ``PET_RDZV_CONF``, ``PET_STANDALONE``. Without a master the job succeeds once any worker has
  (the operator's rule for an elastic job): ``minSuccess: 1``. ``metrics`` (the operator's
  HorizontalPodAutoscaler targets) are accepted and not used: here the job grows when the cluster
  has room, not when a metric crosses a target.
* As a HyperJob's template (``check_in_hyperjob``) neither is taken: the HyperJob's world counts
  the pods of every child, and its children are fixed gangs.
"""

from __future__ import annotations

from typing import Literal

from .base import NonNegative, Opaque, Positive, Spec
from .errors import ManifestError
from .pod import EnvVar

DEFAULT_NPROC_PER_NODE = "auto"


class RendezvousConf(Spec, frozen=True, kw_only=True):
    key: str = ""
    value: str = ""


class ElasticPolicy(Spec, frozen=True, kw_only=True):
    min_replicas: Positive | None = None
    max_replicas: Positive | None = None
    rdzv_backend: Literal["c10d", "etcd", "etcd-v2"] | None = None
    rdzv_port: Positive | None = None
    rdzv_host: str | None = None
    rdzv_id: str | None = None
    rdzv_conf: list[RendezvousConf] = []
    standalone: bool | None = None
    n_proc_per_node: Positive | None = None
    max_restarts: NonNegative | None = None
    metrics: list[Opaque] = []


def elastic_bounds(policy: ElasticPolicy, workers: int) -> tuple[int, int]:
    """(minReplicas, maxReplicas) as the operator defaults them; ``ManifestError`` if min > max."""
    low = policy.min_replicas or policy.max_replicas or workers
    high = policy.max_replicas or policy.min_replicas or workers
    if low > high:
        raise ManifestError("$.spec.elasticPolicy.minReplicas", f"{low} is more than maxReplicas ({high})")
    return low, high


def processes_per_pod(nproc_per_node: str) -> int:
    """The number in ``nprocPerNode``, or 1 for ``auto``/``cpu``/``gpu`` (the operator's rule: the
    processes are counted by torchrun then, and ``WORLD_SIZE`` counts pods)."""
    return int(nproc_per_node) if nproc_per_node.isdigit() and int(nproc_per_node) > 0 else 1


def check_nproc_per_node(value: str) -> None:
    if value not in ("auto", "cpu", "gpu") and not (value.isdigit() and int(value) > 0):
        raise ManifestError("$.spec.nprocPerNode", f"{value!r}: a positive number, auto, cpu or gpu")


def check_in_hyperjob(policy: ElasticPolicy | None, nproc_per_node: str | None) -> None:
    """What a PyTorchJob may not ask for as a HyperJob's template, where the HyperJob's world (one
    ``WORLD_SIZE`` and rank order over every child's pods) replaces the job's own."""
    if policy is not None:
        raise ManifestError(
            "$.spec.template.spec.elasticPolicy",
            "not supported in a HyperJob: its children are fixed gangs split across clusters "
            "(apply the PyTorchJob itself to run it elastic)",
        )
    if processes_per_pod(nproc_per_node or DEFAULT_NPROC_PER_NODE) > 1:
        raise ManifestError(
            "$.spec.template.spec.nprocPerNode",
            "a number is not supported in a HyperJob, whose WORLD_SIZE counts the pods of every child "
            "(auto, cpu or gpu: torchrun counts the processes; or apply the PyTorchJob itself)",
        )


def torchrun_env(
    job: str, nproc_per_node: str, pods: int, policy: ElasticPolicy | None, bounds: tuple[int, int], port: int
) -> list[EnvVar]:
    """The ``PET_*`` variables every pod of the job gets (``WORLD_SIZE``/``RANK``/``PET_NODE_RANK``
    are per pod: the pytorch plugin's)."""
    if policy is None:
        return [EnvVar(name="PET_NPROC_PER_NODE", value=nproc_per_node), EnvVar(name="PET_NNODES", value=str(pods))]
    host = policy.rdzv_host or f"{job}-worker-0.{job}"
    env = {
        "PET_RDZV_ENDPOINT": f"{host}:{policy.rdzv_port or port}",
        "PET_RDZV_BACKEND": policy.rdzv_backend or "c10d",
        "PET_NNODES": f"{bounds[0]}:{bounds[1]}",
    }
    if policy.max_restarts is not None:
        env["PET_MAX_RESTARTS"] = str(policy.max_restarts)
    env["PET_NPROC_PER_NODE"] = str(policy.n_proc_per_node) if policy.n_proc_per_node else nproc_per_node
    if policy.rdzv_id is not None:
        env["PET_RDZV_ID"] = policy.rdzv_id
    if policy.rdzv_conf:
        env["PET_RDZV_CONF"] = ",".join(f"{conf.key}={conf.value}" for conf in policy.rdzv_conf)
    if policy.standalone:
        env["PET_STANDALONE"] = ""
    return [EnvVar(name=name, value=value) for name, value in env.items()]
