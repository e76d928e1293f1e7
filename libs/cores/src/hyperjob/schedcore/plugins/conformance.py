"""conformance: never evict system-critical pods or pods in kube-system."""

from __future__ import annotations

from ..framework import NoArgs, Plugin, Preemptable, Reclaimable
from ..state import TaskState

_CRITICAL = frozenset({"system-cluster-critical", "system-node-critical"})


class ConformancePlugin(Plugin[NoArgs], Preemptable, Reclaimable):
    NAME = "conformance"

    def _filter(self, candidates: list[TaskState]) -> list[TaskState]:
        return [c for c in candidates if c.info.namespace != "kube-system" and c.info.priority_class not in _CRITICAL]

    def preemptable(self, preemptor: TaskState, candidates: list[TaskState]) -> list[TaskState] | None:
        return self._filter(candidates)

    def reclaimable(self, reclaimer: TaskState, candidates: list[TaskState]) -> list[TaskState] | None:
        return self._filter(candidates)
