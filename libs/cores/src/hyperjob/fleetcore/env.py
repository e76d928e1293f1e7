"""The cross-cluster training environment: the children of a HyperJob form one training job.

Ranks are global and contiguous: a pod's ``RANK`` is its child's ``rank_offset`` plus its local
rank inside the child (replicas of the child's earlier tasks, then its pod index). The HyperJob
plugin ``pytorch: ["--master=trainer", "--port=23456"]`` adds ``MASTER_ADDR`` (the master task's
pod 0 in the first child that has it, as ``<pod>.<child>``, the svc plugin's hostname),
``MASTER_PORT``, ``WORLD_SIZE`` and ``RANK``; these override what a child's own plugins set.
"""

from __future__ import annotations

from hyperjob import api

from .model import ChildPlan, SplitPlan

DEFAULT_MASTER = "master"
DEFAULT_PORT = "23456"


def training_env(hyperjob: api.HyperJob, plan: SplitPlan, child: str, task: str, index: int) -> dict[str, str]:
    """The env of pod ``index`` of ``task`` in ``child`` (the job-controller merges it last).

    Always: ``HYPERJOB_NAME``, ``HYPERJOB_CHILD_INDEX`` (the child's position in the plan),
    ``HYPERJOB_CLUSTER``, ``HYPERJOB_RANK``, ``HYPERJOB_WORLD_SIZE``. With the HyperJob ``pytorch``
    plugin also ``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``, ``RANK``. Pure; an unknown child
    or task gives the HyperJob-wide entries only.
    """
    position = next((i for i, c in enumerate(plan.children) if c.name == child), None)
    env = {"HYPERJOB_NAME": hyperjob.metadata.name, "HYPERJOB_WORLD_SIZE": str(plan.world_size)}
    if position is None:
        return env
    me = plan.children[position]
    rank = me.rank_offset + local_rank(me, task, index)
    env |= {"HYPERJOB_CHILD_INDEX": str(position), "HYPERJOB_CLUSTER": me.cluster, "HYPERJOB_RANK": str(rank)}
    args = hyperjob.spec.plugins.get("pytorch")
    if args is not None:
        options = _options(args)
        env |= {
            "MASTER_ADDR": master_addr(plan, options.get("master", DEFAULT_MASTER)),
            "MASTER_PORT": options.get("port", DEFAULT_PORT),
            "WORLD_SIZE": str(plan.world_size),
            "RANK": str(rank),
        }
    return env


def local_rank(child: ChildPlan, task: str, index: int) -> int:
    """Replicas of the child's tasks before ``task`` (template order), plus ``index``."""
    before = 0
    for name, replicas in child.tasks.items():
        if name == task:
            return before + index
        before += replicas
    return before + index


def master_addr(plan: SplitPlan, master: str) -> str:
    """Pod 0 of the master task in the first child that runs it (else the first child's first pod)."""
    for child in plan.children:
        if master in child.tasks:
            return f"{child.name}-{master}-0.{child.name}"
    if not plan.children:
        return ""
    first = plan.children[0]
    task = next(iter(first.tasks), master)
    return f"{first.name}-{task}-0.{first.name}"


def _options(args: list[str]) -> dict[str, str]:
    """``["--master=trainer", "--port=23456"]`` → ``{"master": "trainer", "port": "23456"}``."""
    options: dict[str, str] = {}
    for arg in args:
        key, _, value = arg.lstrip("-").partition("=")
        if key:
            options[key] = value
    return options
