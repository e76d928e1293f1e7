"""predicates: node filters that do not depend on usage.

nodeName, nodeSelector, required node affinity (matchExpressions and metadata.name
matchFields), NoSchedule/NoExecute taints against tolerations, and cordoned nodes. Resource fit
(including the implicit ``pods`` slot) and vGPU device fit are checked by the framework.
"""

from __future__ import annotations

import msgspec
import numpy as np

from hyperjob.api.pod import NodeSelectorRequirement, NodeSelectorTerm, Taint, Toleration

from ..framework import Plugin, Predicate, SessionView
from ..state import TaskState
from ..status import NodeRejection

UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")


class PredicatesArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    gpu_sharing: bool = msgspec.field(default=False, name="predicate.GPUSharingEnable")
    gpu_number: bool = msgspec.field(default=False, name="predicate.GPUNumberEnable")
    cache: bool = msgspec.field(default=False, name="predicate.CacheEnable")
    proportional: bool = msgspec.field(default=False, name="predicate.ProportionalEnable")
    vgpu: bool = msgspec.field(default=False, name="deviceshare.VGPUEnable")


def tolerates(tolerations: list[Toleration], taint: Taint) -> bool:
    """Kubernetes' ToleratesTaint for one taint."""
    for t in tolerations:
        if t.effect and t.effect != taint.effect:
            continue
        if t.key and t.key != taint.key:
            continue
        if t.operator == "Exists" or (t.key and t.value == taint.value):
            return True
    return False


def _requirement(ssn: SessionView, req: NodeSelectorRequirement, by_name: bool) -> np.ndarray:
    col = np.array(ssn.nodes.names, dtype=object) if by_name else ssn.nodes.column(req.key)
    values = set(req.values)
    op = req.operator
    if op == "Exists":
        return np.array([v is not None for v in col], dtype=bool)
    if op == "DoesNotExist":
        return np.array([v is None for v in col], dtype=bool)
    if op in ("In", "NotIn"):
        hit = np.array([v is not None and v in values for v in col], dtype=bool)
        return hit if op == "In" else ~hit
    bound = int(req.values[0]) if req.values else 0
    out = np.zeros(len(col), dtype=bool)
    for i, v in enumerate(col):
        if v is not None and v.lstrip("-").isdigit():
            out[i] = int(v) > bound if op == "Gt" else int(v) < bound
    return out


class PredicatesPlugin(Plugin[PredicatesArgs], Predicate):
    NAME = "predicates"
    Args = PredicatesArgs

    def on_session_open(self, ssn: SessionView) -> None:
        super().on_session_open(ssn)
        groups: dict[tuple[Taint, ...], list[int]] = {}
        for i, n in enumerate(ssn.nodes.infos):
            hard = tuple(t for t in n.taints if t.effect in ("NoSchedule", "NoExecute"))
            if hard:
                groups.setdefault(hard, []).append(i)
        self.taint_groups = groups
        self.cordoned = ssn.nodes.unschedulable

    def filter_nodes(self, task: TaskState) -> list[NodeRejection]:
        """kube-scheduler's NodeUnschedulable, NodeName, TaintToleration and NodeAffinity, in
        that order, each with kube's wording."""
        ssn, info = self.ssn, task.info
        out: list[NodeRejection] = []
        if self.cordoned.any() and not tolerates(info.tolerations, UNSCHEDULABLE_TAINT):
            out.append(NodeRejection("node(s) were unschedulable", self.cordoned))
        if info.node_name:
            other = np.array([n != info.node_name for n in ssn.nodes.names], dtype=bool)
            out.append(NodeRejection("node(s) didn't match the requested node name", other))
        for taints, rows in self.taint_groups.items():
            untolerated = next((t for t in taints if not tolerates(info.tolerations, t)), None)
            if untolerated is not None:
                mask = np.zeros(ssn.nodes.size, dtype=bool)
                mask[rows] = True
                out.append(
                    NodeRejection(f"node(s) had untolerated taint {{{untolerated.key}: {untolerated.value}}}", mask)
                )
        match = self._affinity(task)
        if match is not None:
            out.append(NodeRejection("node(s) didn't match Pod's node affinity/selector", ~match))
        return out

    def _affinity(self, task: TaskState) -> np.ndarray | None:
        """Nodes matching the pod's nodeSelector and required node affinity (None: no such terms)."""
        info = task.info
        aff = info.affinity.node_affinity if info.affinity else None
        required = aff.required_during_scheduling_ignored_during_execution if aff else None
        if not info.node_selector and required is None:
            return None
        mask = np.ones(self.ssn.nodes.size, dtype=bool)
        for key, value in info.node_selector.items():
            mask &= np.array([v == value for v in self.ssn.nodes.column(key)], dtype=bool)
        if required is not None:
            mask &= self._terms(required.node_selector_terms)
        return mask

    def _terms(self, terms: list[NodeSelectorTerm]) -> np.ndarray:
        # Terms are ORed; requirements inside a term are ANDed; an empty term matches nothing.
        out = np.zeros(self.ssn.nodes.size, dtype=bool)
        for term in terms:
            if not term.match_expressions and not term.match_fields:
                continue
            m = np.ones(self.ssn.nodes.size, dtype=bool)
            for req in term.match_expressions:
                m &= _requirement(self.ssn, req, by_name=False)
            for req in term.match_fields:
                m &= _requirement(self.ssn, req, by_name=req.key == "metadata.name")
            out |= m
        return out
