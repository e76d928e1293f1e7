"""HyperJob-level plugins: one MPI or TensorFlow world across every child, in every cluster.

A child Volcano Job of a HyperJob whose own ``plugins`` include ``mpi`` or ``tensorflow`` carries
the world (``api.World``, annotation ``hyperjob.io/world``, read at admission into
``JobRecord.world``). From it every pod of every child computes the same view:

* svc, world-wide: ``/etc/volcano/<task>.host``, ``VC_<TASK>_HOSTS`` and ``VC_<TASK>_NUM`` list the
  task's replicas in every child (``<child>-<task>-<i>.<child>``, children in world order), so a
  script written for one Volcano Job (``cat /etc/volcano/worker.host``) sees the whole world.
* ``mpi`` (flags as the job plugin's): ``MPI_HOST`` on the master's pods lists every worker of
  every child; ``--hostfile=PATH`` writes them there with ``--slots-per-worker`` each.
* ``tensorflow``: one ``TF_CONFIG`` cluster spec of every child; a pod's ``task.index`` is its
  replica number in the world (replicas of its task in the earlier children, plus its own index).

These apply after the child's own job plugins (which the splitter strips of ``mpi`` and
``tensorflow``), so the world's values win.
"""

from __future__ import annotations

from hyperjob import api

from .frameworks import Flags, hostfile, tf_config
from .model import JobRecord
from .naming import PodPatch, svc_entries, svc_patch


def world_patch(record: JobRecord, task: api.TaskSpec, index: int) -> PodPatch:
    """What the HyperJob-level plugins give pod ``index`` of ``task`` (nothing outside a world)."""
    world = record.world
    if world is None or not {"mpi", "tensorflow"} & set(world.plugins):
        return PodPatch()
    patch = _world_svc(record, world)
    if "mpi" in world.plugins:
        patch.merge(_world_mpi(world, task, _flags(world, "mpi")))
    if "tensorflow" in world.plugins:
        patch.merge(_world_tensorflow(world, record.name, task, index, _flags(world, "tensorflow")))
    return patch


def _flags(world: api.World, plugin: str) -> Flags:
    return api.plugin_flags(plugin, world.plugins[plugin], f"$.spec.plugins.{plugin}", api.HYPERJOB_PLUGIN_FLAGS)


def _world_svc(record: JobRecord, world: api.World) -> PodPatch:
    svc = record.spec.plugins.get("svc")
    inject = svc is None or api.plugin_flags("svc", svc, "$.spec.plugins.svc")["inject-hosts-env"] == "true"
    return svc_patch(svc_entries({task: world.hosts(task) for task in world.task_names()}), inject)


def _world_mpi(world: api.World, task: api.TaskSpec, flags: Flags) -> PodPatch:
    patch = PodPatch(ports={"mpijob-port": int(flags["port"])})
    if task.name != flags["master"]:
        return patch
    hosts = world.hosts(flags["worker"])
    patch.env["MPI_HOST"] = ",".join(hosts)
    if flags["hostfile"]:
        patch.files[flags["hostfile"]] = hostfile(hosts, int(flags["slots-per-worker"]), flags["mpi-implementation"])
    return patch


def _world_tensorflow(world: api.World, child: str, task: api.TaskSpec, index: int, flags: Flags) -> PodPatch:
    if world.replicas() == 1:  # stand-alone, as the job plugin
        return PodPatch()
    hosts = {name: [f"{host}:{flags['port']}" for host in world.hosts(name)] for name in world.task_names()}
    return PodPatch(env={"TF_CONFIG": tf_config(hosts, flags, task.name, world.task_offset(child, task.name) + index)})
