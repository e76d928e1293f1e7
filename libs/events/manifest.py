"""The API front door: manifests applied, objects deleted, HyperJob commands, and the answers.

Commands have one consumer (the splitter); the answer to a request is published on
``hj.result.<request_id>`` so the client that asked can wait for it.
"""

from __future__ import annotations

from typing import Any, Literal

from .base import Message

HyperJobAction = Literal["suspend", "resume", "restart", "abort"]


class ApplyManifest(Message, frozen=True, kw_only=True, tag="hj.manifest.apply.v1"):
    """Create or update one object from its manifest (any kind of the API)."""

    manifest: dict[str, Any]


class DeleteObject(Message, frozen=True, kw_only=True, tag="hj.object.delete.v1"):
    kind: str
    name: str


class CommandHyperJob(Message, frozen=True, kw_only=True, tag="hj.hyperjob.command.v1"):
    name: str
    action: HyperJobAction


class CommandObject(Message, frozen=True, kw_only=True, tag="hj.object.command.v1"):
    """A command on a plain Job (a Volcano Job action: AbortJob, ResumeJob, RestartJob,
    TerminateJob, CompleteJob) or on a Queue (``open``, ``close``)."""

    kind: Literal["Job", "Queue"]
    name: str
    action: str


class RequestAccepted(Message, frozen=True, kw_only=True, tag="hj.request.accepted.v1"):
    kind: str
    name: str
    outcome: Literal["created", "configured", "unchanged", "deleting", "deleted", "commanded"]


class RequestRejected(Message, frozen=True, kw_only=True, tag="hj.request.rejected.v1"):
    """Nothing changed; ``reason`` names the field path (``$.spec.tasks[0].replicas: ...``)."""

    kind: str
    name: str
    reason: str


class AdminCommand(Message, frozen=True, kw_only=True, tag="admin.command.v1"):
    """An operator's command to one service instance. ``rebuild``: forget the instance's state in
    the store and rebuild it from its changelog (``state.<instance>.>``)."""

    instance: str
    action: Literal["rebuild"]


class InstanceStarted(Message, frozen=True, kw_only=True, tag="admin.instance.v1"):
    """A service instance is up (latest value per instance: what runs, and since when)."""

    instance: str
    service: str
    started_at: float
