"""network-topology-aware: gangs inside one HyperNode of the ``topology.hyperjob.io/tierN`` labels.

A job's ``networkTopology`` asks for its gang inside one HyperNode (a label value of one tier):
``hard`` tries tiers 1..highestTierAllowed and otherwise leaves the job pending; ``soft`` tries
the same and then falls back to any nodes. Without a request, a job of more than one task
behaves as soft over every tier, so gangs land in as few tier1 domains as possible.
Within a tier, domains are tried tightest first (least free capacity that still holds the
gang's aggregate request), then by name; allocate makes each try a statement rolled back on
failure (``GangDomains``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from ..cyclestate import StateKey
from ..framework import Domain, DomainPlan, GangDomains, NoArgs, Plugin
from ..nodes import TIER_LABEL
from ..state import JobState, TaskState
from ..status import unschedulable

# This module's per-cycle data: the deepest tier, and per tier its domains and node -> domain.
MAX_TIER: StateKey[int] = StateKey("topology.max_tier")
DOMAINS: StateKey[dict[int, list[tuple[str, np.ndarray]]]] = StateKey("topology.domains")
DOMAIN_INDEX: StateKey[dict[int, np.ndarray]] = StateKey("topology.domain_index")


class NetworkTopologyPlugin(Plugin[NoArgs], GangDomains):
    NAME = "network-topology-aware"

    def wants_domains(self, job: JobState) -> bool:
        if job.info.network_topology is not None:
            return True
        return job.min_member > 1 and self._max_tier() > 0

    def job_domains(self, job: JobState, todo: Sequence[TaskState]) -> DomainPlan:
        nt = job.info.network_topology
        top = self._max_tier()
        highest = min(nt.highest_tier_allowed or top, top) if nt is not None else top
        return DomainPlan(
            domains=self._tries(job, todo, highest),
            fallback=nt is None or nt.mode != "hard",
            unplaced=unschedulable(f"no HyperNode of tier <= {highest} holds the gang", self.NAME),
        )

    def _tries(self, job: JobState, todo: Sequence[TaskState], highest: int) -> Iterator[Domain]:
        placed = [t.node for t in job.tasks if t.node >= 0 and t.status in ("Running", "Bound", "Releasing")]
        need = _needed(job, todo)
        for tier in range(1, highest + 1):
            # Ordered when the tier is reached: the tries before it have been rolled back.
            for name, mask in self._ordered(tier, need, placed):
                yield Domain(name=f"HyperNode {name} (tier {tier})", rows=mask, key=(self.NAME, tier, name))

    def _max_tier(self) -> int:
        return self.ssn.cycle_state.get(MAX_TIER, self.ssn.nodes.tiers)

    def domains(self, tier: int) -> list[tuple[str, np.ndarray]]:
        """The HyperNodes of one tier as (name, node mask), by name; built once per session."""
        nodes = self.ssn.nodes
        cache = self.ssn.cycle_state.get(DOMAINS, dict)
        if tier not in cache:
            rows: dict[str, list[int]] = {}
            for i, v in enumerate(nodes.column(f"{TIER_LABEL}{tier}")):
                if v is not None:
                    rows.setdefault(v, []).append(i)
            out = []
            for name in sorted(rows):
                mask = np.zeros(nodes.size, dtype=bool)
                mask[rows[name]] = True
                out.append((name, mask))
            cache[tier] = out
        return cache[tier]

    def _ordered(self, tier: int, need: np.ndarray, placed: list[int]) -> list[tuple[str, np.ndarray]]:
        doms = self.domains(tier)
        if not doms:
            return []
        space = self.ssn.space
        index = self._domain_index(tier, doms)
        valid = index >= 0
        free = np.zeros((len(doms), space.size))
        np.add.at(free, index[valid], self.ssn.nodes.fidle[valid])  # every domain's FutureIdle in one pass
        ok = np.all(free + space.eps >= need, axis=1)
        if placed:
            # Pods already running pin the job to the one domain holding all of them (if any).
            same = index[placed]
            only = int(same[0]) if bool(np.all(same == same[0])) else -1
            ok &= np.arange(len(doms)) == only
        order = sorted(np.flatnonzero(ok).tolist(), key=lambda d: (free[d, 0], free[d, 1], doms[d][0]))
        return [doms[d] for d in order]

    def _domain_index(self, tier: int, doms: list[tuple[str, np.ndarray]]) -> np.ndarray:
        cache = self.ssn.cycle_state.get(DOMAIN_INDEX, dict)
        if tier not in cache:
            index = np.full(self.ssn.nodes.size, -1)
            for d, (_, mask) in enumerate(doms):
                index[mask] = d
            cache[tier] = index
        return cache[tier]


def _needed(job: JobState, todo: Sequence[TaskState]) -> np.ndarray:
    """What the gang still needs in aggregate: its first tasks (task order) up to minMember."""
    k = max(job.min_member - job.ready_num() - job.waiting_num(), 1)
    return sum((t.req for t in todo[:k]), np.zeros_like(job.allocated))
