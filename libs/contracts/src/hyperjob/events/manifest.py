"""The API front door: manifests applied, objects deleted, HyperJob commands, and the answers.

Commands have one consumer (the splitter); the answer to a request is published on
``hj.result.<request_id>`` so the client that asked can wait for it.

A request about a namespaced object travels on ``<subject>.<namespace>`` (``subjects.in_namespace``):
NATS checks that its sender may act in that namespace, and the splitter refuses a request whose
object names another one. ``received_on`` is where the request arrived: the receiving runtime
sets it from the delivery (a sender's value is replaced), so the splitter knows the subject NATS
checked.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

import msgspec

from hyperjob import api

from . import subjects
from .base import Message

HyperJobAction = Literal["suspend", "resume", "restart", "abort"]


class Request(Message, frozen=True, kw_only=True):
    """A request of the submit contract. ``received_on``: set by the receiver, never by a sender.
    ``subject``: the one request subject this type travels on (bare or ``.<namespace>``)."""

    subject: ClassVar[str]

    received_on: Annotated[
        str,
        msgspec.Meta(description="set by the receiver: the subject the request arrived on (a sender's is replaced)"),
    ] = ""


class ApplyManifest(Request, frozen=True, kw_only=True, tag="hj.manifest.apply.v1"):
    """Create or update one object from its manifest (any kind of the API)."""

    subject = subjects.APPLY

    manifest: dict[str, Any]


class DeleteObject(Request, frozen=True, kw_only=True, tag="hj.object.delete.v1"):
    """``namespace``: of a namespaced object; "" is the subject's namespace (``default`` on the bare one)."""

    subject = subjects.DELETE

    kind: str
    name: str
    namespace: str = ""


class CommandHyperJob(Request, frozen=True, kw_only=True, tag="hj.hyperjob.command.v1"):
    subject = subjects.HYPERJOB_COMMAND

    name: str
    action: HyperJobAction
    namespace: str = ""


class CommandObject(Request, frozen=True, kw_only=True, tag="hj.object.command.v1"):
    """A command on a plain Job (a Volcano Job action: AbortJob, ResumeJob, RestartJob,
    TerminateJob, CompleteJob) or on a Queue (``open``, ``close``)."""

    subject = subjects.OBJECT_COMMAND

    kind: Literal["Job", "Queue"]
    name: str
    action: str
    namespace: str = ""


REQUEST_TYPES: dict[str, type[Request]] = {
    t.subject: t for t in (ApplyManifest, DeleteObject, CommandHyperJob, CommandObject)
}


def request_type_on(subject: str) -> type[Request] | None:
    """The one message type a request subject carries, bare or in a namespace
    (``hj.object.delete.team-a``: ``DeleteObject``); ``None`` for a subject that is no request's.
    The subject is the request's authority (what NATS let its sender publish), so a message of
    another type on it is refused: a right to apply is no right to delete."""
    for request, request_type in REQUEST_TYPES.items():
        if subject == request or subject.startswith(request + "."):
            return request_type
    return None


# A request's subject names the namespace NATS let its sender act in (``hj.object.delete.team-a``);
# the bare subject is for whoever may act in every namespace (ADR 0006). A request never reaches
# past its subject's namespace: an object that names another is refused, naming the field. Every
# service that answers requests (the splitter, the workflow-controller) judges them by these two.


def request_namespace(request: str, msg: Request, kind: object, named: object, field: str) -> str:
    """The namespace ``msg`` (about an object of ``kind``) acts in: its subject's, which ``named``
    (what the object or the message says, ``""`` or ``None`` if nothing) must not contradict; on
    the bare subject ``named`` or ``default``. A cluster-scoped kind has none (``""``) and only the
    bare subject may carry it. ``api.ManifestError`` naming ``field`` (or ``$.kind``) otherwise."""
    granted = subjects.namespace_of(request, msg.received_on)
    if isinstance(kind, str) and kind in api.CLUSTER_SCOPED_KINDS:
        if granted is not None:
            raise api.ManifestError(
                "$.kind", f"a {kind} has no namespace: send it on {request} (rights in every namespace)"
            )
        return ""
    if named is not None and not isinstance(named, str):
        raise api.ManifestError(field, f"a namespace is a string, not {type(named).__name__}")
    if granted is None:
        return named or api.DEFAULT_NAMESPACE
    if named and named != granted:
        raise api.ManifestError(
            field, f"namespace {named!r} is not the namespace of the request's subject {msg.received_on} ({granted!r})"
        )
    return granted


def scoped_manifest(msg: ApplyManifest) -> dict[str, Any]:
    """The manifest as applied: server-set metadata and ``status`` dropped (as kubectl does with an
    exported object) and the namespace the request acts in written in (none for a Queue or a
    PriorityClass, which only the bare subject may carry)."""
    manifest = api.without_server_fields(msg.manifest)
    metadata = manifest.get("metadata")
    if not isinstance(metadata, dict):
        return manifest  # decoding says what is wrong
    kind = manifest.get("kind")
    namespace = request_namespace(subjects.APPLY, msg, kind, metadata.get("namespace"), "$.metadata.namespace")
    if not namespace:
        return manifest
    return {**manifest, "metadata": {**metadata, "namespace": namespace}}


Outcome = Literal["created", "configured", "unchanged", "deleting", "deleted", "commanded"]


class RequestAccepted(Message, frozen=True, kw_only=True, tag="hj.request.accepted.v1"):
    kind: str
    name: str
    outcome: Outcome


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
