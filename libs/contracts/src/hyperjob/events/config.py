"""Configuration the splitter owns and every scheduler and controller follows: queues and
priority classes. Published on latest-value subjects (``cfg.queue.<q>``, ``cfg.priorityclass.<p>``)
so a reader gets the whole configuration by reading the last message of each subject; a deleted
object leaves a tombstone (``deleted``)."""

from __future__ import annotations

from typing import Any

from .base import Message


class QueueChanged(Message, frozen=True, kw_only=True, tag="cfg.queue.v1"):
    """A Queue as applied (its manifest in camelCase), its state and creation time."""

    name: str
    manifest: dict[str, Any] = {}
    state: str = "Open"
    created: float = 0.0
    deleted: bool = False


class PriorityClassChanged(Message, frozen=True, kw_only=True, tag="cfg.priorityclass.v1"):
    name: str
    value: int = 0
    global_default: bool = False
    preemption_policy: str = ""
    deleted: bool = False
