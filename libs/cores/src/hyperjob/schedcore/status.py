"""Results as values (kube-scheduler's ``framework.Status``): what a hook or a placement attempt
concluded, and why, in words a user reads.

A ``Status`` is never raised: an expected rejection is a value, and an exception means a bug.
The reasons of the statuses a job collects in a cycle become its entry in
``Decision.unschedulable`` (gang writes it), so they are phrased for the person waiting.

``NodeRejection`` is the vectorised form a node filter returns: one reason and the mask of the
node rows it rules out. ``fit_error`` aggregates them over the nodes the way kube-scheduler's
``FitError`` does: ``0/8 nodes are available: 5 Insufficient nvidia.com/gpu, 3 node(s) were
NotReady`` (without kube's final period: gang joins several reasons with "; ").
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


class Code(enum.Enum):
    """What a status means for the pod or job it is about.

    - ``SUCCESS``: the hook admits it (a filter: the node may take the pod; job validity: the
      job may be scheduled this cycle; a vote, ``JobEnqueueable``/``JobPipelined``: permit).
      Carries no reasons.
    - ``UNSCHEDULABLE``: not now, but a change in usage may help: resources run out, a quota
      is full. Preempt and reclaim may still free room for it.
    - ``UNRESOLVABLE`` (kube's ``UnschedulableAndUnresolvable``): evicting pods cannot help:
      the node does not match the pod's selector, affinity or tolerations, is NotReady or
      cordoned, or the job itself is invalid (too few pods for its gang).
    - ``ERROR``: a plugin met input it cannot judge (an inconsistent snapshot). No built-in
      plugin returns it; one that does turns the job away like any rejection, with its reason.
    - ``SKIP``: the plugin has no opinion on this pod or job; the next one decides (a vote:
      abstain).

    In a vote any code but ``SUCCESS`` and ``SKIP`` is a reject.
    """

    SUCCESS = "Success"
    UNSCHEDULABLE = "Unschedulable"
    UNRESOLVABLE = "UnschedulableAndUnresolvable"
    ERROR = "Error"
    SKIP = "Skip"


_ADMITTING = frozenset({Code.SUCCESS, Code.SKIP})


@dataclass(frozen=True, slots=True)
class Status:
    """A hook's answer: ``code``, the ``reasons`` users read, and the ``plugin`` that gave it."""

    code: Code
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def is_success(self) -> bool:
        return self.code is Code.SUCCESS

    @property
    def rejects(self) -> bool:
        """The pod or job is turned away (any code but ``SUCCESS`` and ``SKIP``)."""
        return self.code not in _ADMITTING

    @property
    def message(self) -> str:
        return "; ".join(self.reasons) if self.reasons else self.code.value


SUCCESS = Status(Code.SUCCESS)
SKIP = Status(Code.SKIP)  # a vote's abstention: no opinion, the next plugin or tier decides


def unschedulable(reason: str, plugin: str = "") -> Status:
    return Status(Code.UNSCHEDULABLE, (reason,), plugin)


def unresolvable(reason: str, plugin: str = "") -> Status:
    return Status(Code.UNRESOLVABLE, (reason,), plugin)


@dataclass(frozen=True, slots=True)
class NodeRejection:
    """Node rows one reason rules out for a pod (``rows``: a boolean mask over the session's
    node table). ``code`` is ``UNRESOLVABLE`` for static filters (selectors, taints) and
    ``UNSCHEDULABLE`` for usage (resources, devices, NUMA room)."""

    reason: str
    rows: np.ndarray
    code: Code = Code.UNRESOLVABLE


def fit_error(total: int, rejected: Iterable[tuple[str, int, Code]], plugin: str = "") -> Status:
    """kube-scheduler's FitError over ``total`` nodes from (reason, how many nodes, code):
    ``0/N nodes are available: <count> <reason>, ...`` (reasons in text order; a reason
    given twice is summed, one that rules out no node is left out).

    Unresolvable when every rejection is; otherwise preemption might help, so Unschedulable.
    """
    counts: Counter[str] = Counter()
    resolvable = False
    for reason, n, code in rejected:
        if n > 0:
            counts[reason] += n
            resolvable |= code is not Code.UNRESOLVABLE
    detail = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))
    text = f"0/{total} nodes are available" + (f": {detail}" if detail else "")
    return Status(Code.UNSCHEDULABLE if resolvable or not counts else Code.UNRESOLVABLE, (text,), plugin)
