"""schedcore: one cycle of one cluster's batch scheduler, with Volcano's semantics.

Role: given an immutable ``Snapshot`` (nodes, queues, jobs with their pods), decide which pods
to bind, which to evict (preempt within a queue, reclaim across queues), the podgroup phases
and the per-queue shares. Owns the Volcano framework (actions, plugin tiers from
``volcano-scheduler.conf``, Statement commit/discard) and the built-in plugins.

Invariants:
- Pure: no I/O, no clock, no randomness; ``Scheduler(conf).cycle(snapshot)`` is a function.
  Ties break by name (nodes) and by (creation, name) (jobs, queues, tasks).
- Node state is dense numpy (node x resource); filtering and scoring a pod shape over all nodes
  is a few vector operations, and identical pods reuse one cached vector.
- Expected rejections are values: hooks answer with ``status.Status`` (documented codes and
  reasons), a pod no node takes gets kube-scheduler's "0/N nodes are available: ..." message,
  and each job's reasons end up in ``Decision.unschedulable``; only a bad conf raises
  (``ConfError``).
- GPU pods (``nvidia.com/gpu`` whole GPUs, Volcano vGPU ``volcano.sh/vgpu-number``/``-cores``
  shares) take devices; ``Bind.devices`` says which, and a driver passes them back as
  ``TaskInfo.devices`` so later cycles see the same per-device free cores.
- A plugin whose filter or score depends on the task's queue (``per_queue``: ``nodegroup``) makes
  the placement caches per queue; a usage-dependent filter (``DynamicFit``: ``numa-aware``'s CPUs
  per NUMA node) is re-evaluated with the node's row whenever the node changes.

Confs: ``DEFAULT_CONF`` is Volcano's default plus ``network-topology-aware`` (gangs within one
HyperNode of the ``topology.hyperjob.io/tierN`` labels; ``hyperjob simulate`` without a
schedulerConf);
``LIVE_DEFAULT_CONF`` adds the fragmentation-aware GPU scorer ``gpufrag`` and is what the live
cluster-scheduler should run when none is configured. ``tracebench`` replays GPU cluster traces.

Driver contract (what a caller of ``cycle`` must do):
- Snapshot: every queue the jobs use (the core invents none, not even ``default``); jobs with
  their pods as tasks (a job may have no tasks before its podgroup is admitted); NotReady nodes
  may be listed (they are ignored, and so are the resources of pods on them).
- ``TaskInfo.request`` is the pod's summed container requests in base units; ``pods: 1`` is
  added by the core. ``JobInfo.min_resources`` None means "not declared" (always admitted).
- Apply ``Decision.binds`` (pods start; report them ``Bound``/``Running`` next time);
  ``Decision.evictions``: delete the pod and, per the job's policies, recreate it ``Pending``
  with no node (the same name is fine); only ``Running`` pods are reclaim victims, ``Bound``
  ones can be preempted. ``Decision.pipelined``: keep the pod Pending and pass the node back as
  ``TaskInfo.nominated_node`` until it is bound. ``Decision.podgroup_phases`` (every job) goes
  back as ``JobInfo.phase``; create a job's pods once its phase is Inqueue or later.
"""

from .conf import DEFAULT_CONF, DEFAULT_CONF_TEXT, LIVE_DEFAULT_CONF, LIVE_DEFAULT_CONF_TEXT, parse_conf
from .confspec import PluginConf, SchedulerConf
from .errors import ConfError
from .model import Bind, Decision, Evict, JobInfo, NodeInfo, QueueInfo, QueueUsage, Snapshot, TaskInfo
from .registry import build_registry
from .scheduler import Scheduler

__all__ = [
    "DEFAULT_CONF",
    "DEFAULT_CONF_TEXT",
    "LIVE_DEFAULT_CONF",
    "LIVE_DEFAULT_CONF_TEXT",
    "Bind",
    "ConfError",
    "Decision",
    "Evict",
    "JobInfo",
    "NodeInfo",
    "PluginConf",
    "QueueInfo",
    "QueueUsage",
    "Scheduler",
    "SchedulerConf",
    "Snapshot",
    "TaskInfo",
    "build_registry",
    "parse_conf",
]
