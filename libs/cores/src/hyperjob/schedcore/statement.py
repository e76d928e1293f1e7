"""Tentative changes with commit/discard (Volcano's Statement).

Each operation applies to the session at once, so later decisions in the cycle see it; discard
undoes them in reverse order; commit turns allocations into binds and evictions into evictions.
A statement that is neither committed nor discarded keeps its effects for the rest of the cycle
but produces no output (Volcano's "pipelined" job).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .model import Bind, Evict

if TYPE_CHECKING:
    from .session import Session
    from .state import TaskState

EvictReason = Literal["preempt", "reclaim"]


@dataclass(frozen=True, slots=True)
class Allocated:
    """``task`` was allocated to its node: a bind at commit."""

    task: TaskState


@dataclass(frozen=True, slots=True)
class Pipelined:
    """``task`` will fit its node once the evicted pods are gone: nominated at commit."""

    task: TaskState


@dataclass(frozen=True, slots=True)
class Evicted:
    """``task`` was evicted for ``reason``; ``prev`` is the status an undo restores."""

    task: TaskState
    reason: EvictReason
    prev: str


Operation = Allocated | Pipelined | Evicted


class Statement:
    """An ordered log of allocate/pipeline/evict operations on one session."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.ops: list[Operation] = []

    def allocate(self, task: TaskState, row: int) -> None:
        self.ssn.do_allocate(task, row)
        self.ops.append(Allocated(task))

    def pipeline(self, task: TaskState, row: int) -> None:
        self.ssn.do_pipeline(task, row)
        self.ops.append(Pipelined(task))

    def evict(self, task: TaskState, reason: EvictReason) -> None:
        prev = self.ssn.do_evict(task)
        self.ops.append(Evicted(task, reason, prev))

    def mark(self) -> int:
        return len(self.ops)

    def rollback_to(self, mark: int) -> None:
        """Undo every operation after ``mark`` (a nested per-node attempt that failed)."""
        for op in reversed(self.ops[mark:]):
            match op:
                case Allocated(task):
                    self.ssn.undo_allocate(task)
                case Pipelined(task):
                    self.ssn.undo_pipeline(task)
                case Evicted(task, _, prev):
                    self.ssn.undo_evict(task, prev)
        del self.ops[mark:]

    def discard(self) -> None:
        self.rollback_to(0)

    def commit(self) -> None:
        ssn = self.ssn
        names = ssn.nodes.names
        for op in self.ops:
            task = op.task
            job = task.job
            assert job is not None
            node = names[task.node]
            match op:
                case Allocated():
                    job.move(task, "Binding")
                    ssn.binds.append(Bind(task=task.name, job=job.name, node=node, devices=task.devices))
                case Pipelined():
                    ssn.pipelined.append(Bind(task=task.name, job=job.name, node=node))
                case Evicted(reason=reason):
                    ssn.evictions.append(Evict(task=task.name, job=job.name, node=node, reason=reason))
        self.ops.clear()
