"""Volcano's distributed-framework job plugins: pytorch, mpi, tensorflow and ray.

Each is a pure function of (job record, task, pod index, flags) → ``PodPatch``, following
``pkg/controllers/job/plugins/distributed-framework/<name>/<name>.go``:

* ``pytorch``: ``MASTER_ADDR`` (master pod 0), ``MASTER_PORT``, ``WORLD_SIZE`` (master + worker
  replicas) and ``RANK`` on every pod; port ``pytorchjob-port``. Without the master task: nothing.
  Extension ``--nproc-per-node`` (a PyTorchJob's ``nprocPerNode``): ``WORLD_SIZE`` = pods x that
  number (pods alone for ``auto``/``cpu``/``gpu``) and ``PET_NODE_RANK`` = ``RANK``.
* ``mpi``: ``MPI_HOST`` (every worker host, comma-joined; one host when the worker template sets
  ``hostname``; ``""`` with no worker replicas) on the master's pods only; port ``mpijob-port``
  (the ssh port) on every pod. Admission adds ``svc`` and ``ssh`` and rejects a job without the
  master task. Extension: ``--hostfile=PATH`` also writes the workers with their slots
  (``--slots-per-worker``) to PATH on the master, in ``--mpi-implementation``'s format.
* ``tensorflow``: ``TF_CONFIG`` = ``{"cluster": {ps, worker, chief, evaluator}, "task": {type,
  index}}`` (compact JSON, Go's key order, empty roles omitted; hosts ``<domain>:<port>``) on every
  pod, except for a stand-alone job (one task of one replica). A task outside the four roles gets
  its own name as ``type`` and is not in the cluster.
* ``ray``: the head container (``--headContainer`` on a ``--head`` pod) runs ``sh -c "ray start
  --head --block --dashboard-host=0.0.0.0 --port=P --dashboard-port=D --ray-client-server-port=C"``
  and opens ports gcs/dashboard/client-server; a worker container (``--workerContainer`` on a
  ``--worker`` pod) runs ``sh -c "ray start --block --address=<head pod 0>:P"``. Only the pod's main
  container is run here, so the name must match it. Admission rejects a job without the head task
  (Volcano would fail every pod creation).

Differs from Volcano on purpose: pytorch ranks masters ``0..m-1`` and workers ``m + i`` (Volcano
gives every master rank 0, only right with one master); ``record.rank`` shifts ranks and overrides
``WORLD_SIZE`` for a HyperJob child whose pytorch world spans clusters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from hyperjob import api

from .model import JobRecord
from .naming import PodPatch, domain_name, find_task, task_hosts

Flags = Mapping[str, str]
TF_ROLES = ("ps", "worker", "chief", "evaluator")


def pytorch_plugin(record: JobRecord, task: api.TaskSpec, index: int, flags: Flags) -> PodPatch:
    master_name, worker_name, port = flags["master"], flags["worker"], flags["port"]
    master = find_task(record, master_name)
    if master is None:  # Volcano logs and leaves the pod alone
        return PodPatch()
    world = sum(t.replicas for t in record.spec.tasks if t.name in (master_name, worker_name))
    pods = record.rank.world_size if record.rank.world_size is not None else world
    nproc = flags.get("nproc-per-node", "")
    env = {
        "MASTER_ADDR": domain_name(record, master, 0),
        "MASTER_PORT": port,
        "WORLD_SIZE": str(pods * api.processes_per_pod(nproc) if nproc else pods),
    }
    if task.name == master_name:
        env["RANK"] = str(record.rank.rank_offset + index)
    elif task.name == worker_name:
        env["RANK"] = str(record.rank.rank_offset + master.replicas + index)
    if nproc and "RANK" in env:  # torchrun's --node_rank, as training-operator sets it
        env["PET_NODE_RANK"] = env["RANK"]
    return PodPatch(env=env, ports={"pytorchjob-port": int(port)})


def mpi_plugin(record: JobRecord, task: api.TaskSpec, index: int, flags: Flags) -> PodPatch:
    patch = PodPatch(ports={"mpijob-port": int(flags["port"])})
    worker = find_task(record, flags["worker"])
    if task.name != flags["master"] or worker is None:
        return patch
    hosts = task_hosts(record, worker) if worker.replicas else []
    patch.env["MPI_HOST"] = ",".join(hosts)
    if flags["hostfile"]:
        patch.files[flags["hostfile"]] = hostfile(hosts, int(flags["slots-per-worker"]), flags["mpi-implementation"])
    return patch


def hostfile(hosts: Sequence[str], slots: int, implementation: str) -> str:
    """An MPI hostfile, one host per line with its slots: ``host slots=N`` (Open MPI) or ``host:N``
    (MPICH, Intel MPI), as Kubeflow's mpi-operator writes ``/etc/mpi/hostfile``."""
    line = "{} slots={}" if implementation == "OpenMPI" else "{}:{}"
    return "".join(line.format(host, slots) + "\n" for host in hosts)


def tensorflow_plugin(record: JobRecord, task: api.TaskSpec, index: int, flags: Flags) -> PodPatch:
    tasks = record.spec.tasks
    if len(tasks) == 1 and tasks[0].replicas == 1:  # stand-alone: no cluster to describe
        return PodPatch()
    port = flags["port"]
    hosts = {t.name: [f"{domain_name(record, t, i)}:{port}" for i in range(t.replicas)] for t in tasks}
    return PodPatch(env={"TF_CONFIG": tf_config(hosts, flags, task.name, index)})


def tf_config(hosts: Mapping[str, list[str]], flags: Flags, task: str, index: int) -> str:
    """``TF_CONFIG`` for replica ``index`` of ``task``; ``hosts`` maps task name → ``host:port`` list."""
    cluster = {role: hosts[flags[role]] for role in TF_ROLES if hosts.get(flags[role])}
    role = next((r for r in TF_ROLES if flags[r] == task), task)
    return json.dumps({"cluster": cluster, "task": {"type": role, "index": index}}, separators=(",", ":"))


def ray_plugin(record: JobRecord, task: api.TaskSpec, index: int, flags: Flags) -> PodPatch:
    head = find_task(record, flags["head"])
    if head is None:  # admission rejects this; Volcano fails the pod creation
        return PodPatch()
    container = task.template.spec.containers[0].name
    port = flags["port"]
    if task.name == flags["head"] and container == flags["headContainer"]:
        script = (
            f"ray start --head --block --dashboard-host=0.0.0.0 --port={port} "
            f"--dashboard-port={flags['dashboardPort']} --ray-client-server-port={flags['clientPort']}"
        )
        return PodPatch(
            command=["sh", "-c", script],
            ports={
                "gcs": int(port),
                "dashboard": int(flags["dashboardPort"]),
                "client-server": int(flags["clientPort"]),
            },
        )
    if task.name == flags["worker"] and container == flags["workerContainer"]:
        return PodPatch(command=["sh", "-c", f"ray start --block --address={domain_name(record, head, 0)}:{port}"])
    return PodPatch()
