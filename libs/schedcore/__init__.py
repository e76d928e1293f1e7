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
- Expected rejections are values (``Decision.unschedulable``); only a bad conf raises
  (``ConfError``).

Driver contract: after an eviction, delete the pod and, per the job's policy, recreate it
Pending (same name is fine); pass podgroup phases from ``Decision.podgroup_phases`` back in
the next snapshot's ``JobInfo.phase``; pass ``Decision.pipelined`` nodes back as
``TaskInfo.nominated_node`` while the pod stays Pending.
"""

from .conf import DEFAULT_CONF, DEFAULT_CONF_TEXT, PluginConf, SchedulerConf, parse_conf
from .errors import ConfError
from .model import Bind, Decision, Evict, JobInfo, NodeInfo, QueueInfo, QueueUsage, Snapshot, TaskInfo
from .registry import build_registry
from .scheduler import Scheduler

__all__ = [
    "DEFAULT_CONF", "DEFAULT_CONF_TEXT", "Bind", "ConfError", "Decision", "Evict", "JobInfo", "NodeInfo",
    "PluginConf", "QueueInfo", "QueueUsage", "Scheduler", "SchedulerConf", "Snapshot", "TaskInfo",
    "build_registry", "parse_conf",
]
