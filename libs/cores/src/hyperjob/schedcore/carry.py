"""What one session hands the next of the same ``Scheduler``: values derived from parts of the
snapshot that did not change, so that opening a session costs what changed, not the cluster's size.

Owns: the resource space (kept while the resource names are the same), each task's request
vector and device shape (kept while its ``TaskInfo`` is the same object: the cluster-scheduler's
snapshot cache reuses unchanged jobs), and the node table's static part (kept while the snapshot's
nodes are the same objects).

Invariant: a session opened with a ``Carry`` is the session opened without one, value for value
(everything kept is read-only or copied before a session changes it); the same snapshot still
gives the same decision.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

from .model import NodeInfo, TaskInfo
from .nodes import NodeBase
from .resources import ResourceSpace
from .state import Shape, task_shape


class Carry:
    """Kept by a ``Scheduler`` from one session to the next; see the module docstring."""

    def __init__(self) -> None:
        self.space: ResourceSpace | None = None
        self._shapes: dict[int, tuple[TaskInfo, Shape]] = {}
        self._seen: dict[int, tuple[TaskInfo, Shape]] = {}
        self._nodes: tuple[list[NodeInfo], ResourceSpace, NodeBase] | None = None

    def space_for(self, space: ResourceSpace) -> ResourceSpace:
        """The session's space: the last one when its names are the same (its interned vectors
        are the same values), else ``space``, which then starts the carry again."""
        if self.space is not None and self.space.names == space.names:
            return self.space
        self.space, self._shapes, self._nodes = space, {}, None
        return space

    def shape(self, info: TaskInfo, space: ResourceSpace) -> Shape:
        """``task_shape(info, space)``, computed once per ``TaskInfo`` object."""
        kept = self._shapes.get(id(info))
        if kept is None or kept[0] is not info:
            kept = (info, task_shape(info, space))
        self._seen[id(info)] = kept
        return kept[1]

    def opened(self) -> None:
        """A session is open: keep the shapes of its tasks only (the others' jobs changed or left)."""
        self._shapes, self._seen = self._seen, {}

    def node_base(self, nodes: Sequence[NodeInfo], space: ResourceSpace) -> NodeBase:
        """``NodeBase(nodes, space)``, built again only when a node changed (a new object)."""
        kept = self._nodes
        if (
            kept is not None
            and kept[1] is space
            and len(kept[0]) == len(nodes)
            and all(map(operator.is_, kept[0], nodes))
        ):
            return kept[2]
        base = NodeBase(nodes, space)
        self._nodes = (list(nodes), space, base)
        return base
