"""Facts about a HyperJob as a whole, from the status-aggregator."""

from __future__ import annotations

from typing import Any

from .base import Message


class HyperJobStatusChanged(Message, frozen=True, kw_only=True, tag="hj.hyperjob.status.v1"):
    """The HyperJob's aggregated status (upstream's shape plus phase, placement and waiting reason)."""

    name: str
    phase: str
    status: dict[str, Any]


class HyperJobDeleted(Message, frozen=True, kw_only=True, tag="hj.hyperjob.deleted.v1"):
    """Every child is gone from every cluster; the HyperJob no longer exists."""

    name: str
