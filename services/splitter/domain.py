"""Pure parts of the splitter: planning children and their cross-cluster environment."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

import api
import fleetcore
import records


class PlannedChild(msgspec.Struct, frozen=True, kw_only=True):
    child: fleetcore.ChildJob
    plan: fleetcore.ChildPlan
    env_by_pod: dict[str, dict[str, str]]


def plan(hyperjob: api.HyperJob, clusters: Mapping[str, records.ClusterDoc], now: float
         ) -> tuple[list[PlannedChild], int] | fleetcore.Waiting:
    """The children of a HyperJob on the clusters as they are now (and the world size), or why it must wait."""
    capacities = {name: records.cluster_capacity(doc) for name, doc in clusters.items()}
    split = fleetcore.plan_split(hyperjob, capacities, now=now)
    if isinstance(split, fleetcore.Waiting):
        return split
    planned = []
    for child_plan, child in zip(split.children, fleetcore.child_jobs(hyperjob, split), strict=True):
        env = {f"{child.name}-{task}-{i}": fleetcore.training_env(hyperjob, split, child_plan.name, task, i)
               for task, replicas in child_plan.tasks.items() for i in range(replicas)}
        planned.append(PlannedChild(child=child, plan=child_plan, env_by_pod=env))
    return planned, split.world_size


def child_refs(planned: list[PlannedChild]) -> list[records.ChildRef]:
    return [records.ChildRef(name=p.child.name, replicated_job=p.child.replicated_job, index=p.child.index,
                             replicas=p.child.replicas, cluster=p.child.cluster, template_hash=p.child.template_hash,
                             tasks=dict(p.plan.tasks), rank_offset=p.plan.rank_offset,
                             min_available=p.plan.min_available)
            for p in planned]


def split_plan(doc: records.HyperJobDoc) -> fleetcore.SplitPlan:
    """The plan in force, rebuilt from the HyperJob document."""
    children = tuple(fleetcore.ChildPlan(name=ref.name, replicated_job=ref.replicated_job, index=ref.index,
                                         cluster=ref.cluster, tasks=dict(ref.tasks), replicas=ref.replicas,
                                         rank_offset=ref.rank_offset, min_available=ref.min_available)
                     for ref in doc.children)
    return fleetcore.SplitPlan(hyperjob=doc.name, children=children, world_size=doc.world_size,
                               generation=doc.generation)


def with_plan(doc: records.HyperJobDoc, plan: fleetcore.SplitPlan) -> records.HyperJobDoc:
    """The document with each child's cluster as ``plan`` now says."""
    clusters = {child.name: child.cluster for child in plan.children}
    return msgspec.structs.replace(doc, children=[msgspec.structs.replace(ref, cluster=clusters.get(ref.name, ref.cluster))
                                                  for ref in doc.children])


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
