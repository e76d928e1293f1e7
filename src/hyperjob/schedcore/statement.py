"""Tentative changes with commit/discard (Volcano's Statement).

Each operation applies to the session at once, so later decisions in the cycle see it; discard
undoes them in reverse order; commit turns allocations into binds and evictions into evictions.
A statement that is neither committed nor discarded keeps its effects for the rest of the cycle
but produces no output (Volcano's "pipelined" job).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .model import Bind, Evict

if TYPE_CHECKING:
    from .session import Session
    from .state import TaskState


class Statement:
    """An ordered log of allocate/pipeline/evict operations on one session."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.ops: list[tuple[str, TaskState, str]] = []

    def allocate(self, task: TaskState, row: int) -> None:
        self.ssn.do_allocate(task, row)
        self.ops.append(("allocate", task, ""))

    def pipeline(self, task: TaskState, row: int) -> None:
        self.ssn.do_pipeline(task, row)
        self.ops.append(("pipeline", task, ""))

    def evict(self, task: TaskState, reason: str) -> None:
        prev = self.ssn.do_evict(task)
        self.ops.append(("evict:" + reason, task, prev))

    def mark(self) -> int:
        return len(self.ops)

    def rollback_to(self, mark: int) -> None:
        """Undo every operation after ``mark`` (a nested per-node attempt that failed)."""
        for kind, task, prev in reversed(self.ops[mark:]):
            if kind == "allocate":
                self.ssn.undo_allocate(task)
            elif kind == "pipeline":
                self.ssn.undo_pipeline(task)
            else:
                self.ssn.undo_evict(task, prev)
        del self.ops[mark:]

    def discard(self) -> None:
        self.rollback_to(0)

    def commit(self) -> None:
        ssn = self.ssn
        names = ssn.nodes.names
        for kind, task, _ in self.ops:
            job = task.job
            assert job is not None
            if kind == "allocate":
                job.move(task, "Binding")
                ssn.binds.append(Bind(task=task.name, job=job.name, node=names[task.node], devices=task.devices))
            elif kind == "pipeline":
                ssn.pipelined.append(Bind(task=task.name, job=job.name, node=names[task.node]))
            else:
                reason = kind.split(":", 1)[1]
                ssn.evictions.append(Evict(task=task.name, job=job.name, node=names[task.node], reason=reason))  # type: ignore[arg-type]
        self.ops.clear()
