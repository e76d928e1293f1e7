"""Facts about a HyperJob as a whole: its spec as the splitter holds it, its status, its end."""

from __future__ import annotations

from typing import Any

import msgspec

from .base import Message


class ChildRef(msgspec.Struct, frozen=True, kw_only=True):
    """One child job of a HyperJob as the split planned it (``cluster`` empty while unplaced)."""

    name: str
    replicated_job: str = ""
    index: int = 0
    cluster: str = ""
    replicas: int = 0
    tasks: dict[str, int] = {}
    rank_offset: int = 0
    min_available: int = 0
    template_hash: str = ""


class HyperJobSpecChanged(Message, frozen=True, kw_only=True, tag="hj.hyperjob.spec.v1"):
    """What the splitter knows of a HyperJob (or of a plain Job, ``plain``): everything the
    status needs. ``children`` is the plan in force; ``lifecycle`` is Active, Suspended or
    Restarting (``restarts`` counts restart commands); ``deleting`` once deletion started."""

    name: str
    manifest: dict[str, Any]
    plain: bool = False
    generation: int = 1
    created: float = 0.0
    children: list[ChildRef] = []
    world_size: int = 0
    lifecycle: str = "Active"
    restarts: int = 0
    deleting: bool = False
    waiting_reason: str = ""
    attempt: int = 1  # the plan attempt in force: a gang that timed out is planned again


class HyperJobStatusChanged(Message, frozen=True, kw_only=True, tag="hj.hyperjob.status.v1"):
    """The HyperJob's aggregated status (upstream's shape plus phase, placement and waiting reason)."""

    name: str
    phase: str
    status: dict[str, Any]


class HyperJobDeleted(Message, frozen=True, kw_only=True, tag="hj.hyperjob.deleted.v1"):
    """Every child is gone from every cluster; the HyperJob (or plain Job) no longer exists."""

    name: str
