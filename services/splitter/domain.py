"""Pure parts of the splitter: planning children and their cross-cluster environment."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

import api
import fleetcore
import records


class PlannedChild(msgspec.Struct, frozen=True, kw_only=True):
    child: fleetcore.ChildJob
    env_by_pod: dict[str, dict[str, str]]


def plan(hyperjob: api.HyperJob, clusters: Mapping[str, records.ClusterDoc], now: float
         ) -> list[PlannedChild] | fleetcore.Waiting:
    """The children of a HyperJob on the clusters as they are now, or why it must wait."""
    capacities = {name: records.cluster_capacity(doc) for name, doc in clusters.items()}
    split = fleetcore.plan_split(hyperjob, capacities, now=now)
    if isinstance(split, fleetcore.Waiting):
        return split
    planned = []
    for child_plan, child in zip(split.children, fleetcore.child_jobs(hyperjob, split), strict=True):
        env = {f"{child.name}-{task}-{i}": fleetcore.training_env(hyperjob, split, child_plan.name, task, i)
               for task, replicas in child_plan.tasks.items() for i in range(replicas)}
        planned.append(PlannedChild(child=child, env_by_pod=env))
    return planned


def child_refs(planned: list[PlannedChild]) -> list[records.ChildRef]:
    return [records.ChildRef(name=p.child.name, replicated_job=p.child.replicated_job, index=p.child.index,
                             replicas=p.child.replicas, cluster=p.child.cluster, template_hash=p.child.template_hash)
            for p in planned]


def changes(existing: list[records.ChildRef], desired: list[PlannedChild]
            ) -> tuple[list[PlannedChild], list[records.ChildRef]]:
    """(children to place, children to remove): a child whose template or cluster changed is
    replaced; one that is no longer desired is removed; an identical one is left alone."""
    current = {ref.name: ref for ref in existing}
    wanted = {p.child.name for p in desired}
    place = [p for p in desired if p.child.name not in current
             or (current[p.child.name].template_hash, current[p.child.name].cluster)
             != (p.child.template_hash, p.child.cluster)]
    replaced = {p.child.name for p in place}
    remove = [ref for ref in existing if ref.name not in wanted or ref.name in replaced]
    return place, remove
