"""nodegroup: a queue's pods go to the node groups its ``spec.affinity`` names (Volcano's ``nodegroup``).

A node's group is its label ``volcano.sh/nodegroup-name``. Rules, as Volcano's plugin
(``pkg/scheduler/plugins/nodegroup``, ed72c7c81) applies them:

* filter: a node without the label takes only pods of queues without affinity, and only when
  ``strict`` is false (default true: unlabeled nodes take nothing); a labeled node takes a pod
  only if its queue has an affinity and the group is in the queue's required or preferred
  affinity or its preferred anti-affinity, and not in its required anti-affinity (preferred
  anti-affinity wins over required anti-affinity, as in Volcano's ``predicate``);
* score: +100 for a required group, +50 for a preferred one (with ``enablePreferredOrder``:
  50 × (n − i) / n for the i-th of n preferred groups), −1 for a group in preferred
  anti-affinity; unlabeled nodes score 0;
* with ``enableHierarchy`` on the plugin, a queue without affinity takes its nearest ancestor's.

The queue's ``volcano.sh/nodegroup-resource-limits`` annotation is refused by the API (see
``api.queue``). Filter and score depend on the task's queue: the plugin is ``per_queue``, so the
placement caches keep one entry per queue.
"""

from __future__ import annotations

import msgspec
import numpy as np

from hyperjob.api.queue import NODEGROUP_LABEL, QueueAffinity

from ..framework import NodeScore, Plugin, Predicate, ScalarScore, SessionView
from ..model import QueueInfo
from ..state import TaskState
from ..status import NodeRejection

BASE_SCORE = 100.0


class NodeGroupArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    strict: bool = True
    enable_preferred_order: bool = msgspec.field(default=False, name="enablePreferredOrder")


class _Groups(msgspec.Struct, frozen=True):
    required: frozenset[str]
    preferred: tuple[str, ...]
    anti_required: frozenset[str]
    anti_preferred: frozenset[str]

    @classmethod
    def of(cls, affinity: QueueAffinity | None) -> _Groups | None:
        if affinity is None:
            return None
        pro, anti = affinity.node_group_affinity, affinity.node_group_anti_affinity
        groups = cls(
            required=frozenset(pro.required_during_scheduling_ignored_during_execution if pro else ()),
            preferred=tuple(pro.preferred_during_scheduling_ignored_during_execution if pro else ()),
            anti_required=frozenset(anti.required_during_scheduling_ignored_during_execution if anti else ()),
            anti_preferred=frozenset(anti.preferred_during_scheduling_ignored_during_execution if anti else ()),
        )
        return (
            groups if (groups.required or groups.preferred or groups.anti_required or groups.anti_preferred) else None
        )

    def admits(self, group: str) -> bool:
        if group in self.anti_preferred:
            return True
        if group in self.anti_required:
            return False
        return group in self.required or group in self.preferred

    def score(self, group: str, preferred_order: bool) -> float:
        if group in self.anti_preferred:
            return -1.0
        score = BASE_SCORE if group in self.required else 0.0
        if group in self.preferred:
            n = len(self.preferred)
            score += 0.5 * BASE_SCORE * ((n - self.preferred.index(group)) / n if preferred_order else 1.0)
        return score


class NodeGroupPlugin(Plugin[NodeGroupArgs], Predicate, NodeScore, ScalarScore):
    NAME = "nodegroup"
    Args = NodeGroupArgs
    per_queue = True

    def on_session_open(self, ssn: SessionView) -> None:
        super().on_session_open(ssn)
        pconf = ssn.plugin_conf.get(self.NAME)
        hierarchy = bool(pconf and pconf.switches.get("enableHierarchy", False))
        infos = {name: q.info for name, q in ssn.queues.items()}
        self.groups = {name: _Groups.of(self._affinity(name, infos, hierarchy)) for name in infos}
        self.node_groups = [n.labels.get(NODEGROUP_LABEL) for n in ssn.nodes.infos]
        self._scores: dict[str, np.ndarray] = {}

    @staticmethod
    def _affinity(name: str, infos: dict[str, QueueInfo], hierarchy: bool) -> QueueAffinity | None:
        seen: set[str] = set()
        while name in infos and name not in seen:
            seen.add(name)
            if infos[name].affinity is not None or not hierarchy:
                return infos[name].affinity
            name = infos[name].parent or ("root" if name != "root" else "")
        return None

    def _queue_groups(self, task: TaskState) -> _Groups | None:
        return self.groups.get(task.job.queue) if task.job is not None else None

    def filter_nodes(self, task: TaskState) -> list[NodeRejection]:
        groups, strict = self._queue_groups(task), self.args.strict
        admitted = np.array(
            [
                (not strict and groups is None) if g is None else (groups is not None and groups.admits(g))
                for g in self.node_groups
            ],
            dtype=bool,
        )
        return [NodeRejection("node(s) didn't match the queue's node group affinity", ~admitted)]

    def _queue_scores(self, task: TaskState) -> np.ndarray:
        queue = task.job.queue if task.job is not None else ""
        cached = self._scores.get(queue)
        if cached is None:
            groups, order = self._queue_groups(task), self.args.enable_preferred_order
            cached = np.array(
                [0.0 if g is None or groups is None else groups.score(g, order) for g in self.node_groups]
            )
            self._scores[queue] = cached
        return cached

    def score(self, task: TaskState, rows: np.ndarray) -> np.ndarray:
        scores: np.ndarray = self._queue_scores(task)[rows]
        return scores

    def score_one(self, task: TaskState, row: int) -> float:
        return float(self._queue_scores(task)[row])
