"""The world a HyperJob's own ``mpi`` / ``tensorflow`` plugins span: every child of its split plan.

``world_of(hyperjob, plan)`` is what ``child_jobs`` writes on every child as the annotation
``hyperjob.io/world`` (``api.World``); jobcore computes each pod's hostfile, ``MPI_HOST`` and
``TF_CONFIG`` from it (``jobcore.world``). Children come in plan order, so the world's order is the
order of global ranks (``ChildPlan.rank_offset``).
"""

from __future__ import annotations

from hyperjob import api

from .model import SplitPlan

WORLD_PLUGINS = ("mpi", "tensorflow")


def world_of(hyperjob: api.HyperJob, plan: SplitPlan) -> api.World | None:
    """The world of the plan's children, or None when the HyperJob has no world-spanning plugin."""
    plugins = {name: list(args) for name, args in hyperjob.spec.plugins.items() if name in WORLD_PLUGINS}
    if not plugins:
        return None
    children = [api.WorldChild(name=child.name, tasks=dict(child.tasks)) for child in plan.children]
    return api.World(hyperjob=hyperjob.metadata.name, plugins=plugins, children=children)
