"""Deletion: of a Queue or PriorityClass at once, of a HyperJob, plain Job or PodGroup once every
child is gone from every cluster."""

from __future__ import annotations

from msgspec.structs import replace

from hyperjob import api, events, records
from hyperjob.events import subjects
from hyperjob.servicekit import Reaction, answers

from . import domain, messages
from .state import SplitterState


class Deletion:
    """Deletes what the splitter owns.

    Invariants, enforced here:
    - A queue in use (by a HyperJob or Job, or as a parent queue) is not deleted; the request is
      refused naming its users, and nothing changes.
    - A HyperJob, plain Job or PodGroup with children placed is withdrawn from its queue and marked
      ``deleting`` at once; its document is dropped (``HyperJobDeleted``) only when its last child
      is gone from its cluster (``on_job_removed``). One never admitted, or without children, is
      dropped at once.
    - Every message's id derives from the request's: a unit of work redone sends the same ids.
    """

    def __init__(self, state: SplitterState) -> None:
        self.state = state
        self.rt = state.rt

    def on_delete(self, msg: events.DeleteObject) -> Reaction | None:
        if msg.kind in api.WORKFLOW_KINDS:
            return None  # the workflow-controller's to answer
        try:
            namespace = domain.request_namespace(subjects.DELETE, msg, msg.kind, msg.namespace, "$.namespace")
        except api.ManifestError as exc:
            return answers.rejected(self.rt, msg, kind=msg.kind, name=msg.name, reason=str(exc))
        if msg.kind == "Queue":
            return self._delete_queue(msg)
        if msg.kind == "PriorityClass" and msg.name in self.state.classes:
            self.state.classes.delete(msg.name)
            reaction = answers.accepted(self.rt, msg, kind=msg.kind, name=msg.name, outcome="deleted")
            return reaction.publish(
                subjects.priority_class_config(msg.name),
                events.PriorityClassChanged(
                    **self.rt.envelope(msg, f"priorityclass/{msg.name}"), name=msg.name, deleted=True
                ),
            )
        doc = self.state.find(msg.kind, namespace, msg.name) if msg.kind in ("Job", "HyperJob", "PodGroup") else None
        if doc is None:
            return answers.rejected(
                self.rt, msg, kind=msg.kind, name=msg.name, reason=messages.not_found(msg.kind, namespace, msg.name)
            )
        reaction = answers.accepted(self.rt, msg, kind=msg.kind, name=msg.name, outcome="deleting")
        reaction.publish(
            subjects.OWNER_WITHDRAWN, events.OwnerWithdrawn(**self.rt.envelope(msg, "withdrawn"), name=doc.name)
        )
        return self._start_deleting(reaction, msg, doc)

    def _start_deleting(self, reaction: Reaction, cause: events.Message, doc: records.HyperJobDoc) -> Reaction:
        if not doc.children or not doc.admitted:
            return self._deleted(reaction, cause, doc)
        for ref in doc.children:
            reaction.publish(
                subjects.UNPLACE_CHILD,
                events.RemoveChild(
                    **self.rt.envelope(cause, f"unplace/{ref.name}"), child=ref.name, cluster=ref.cluster
                ),
            )
        self.state.put(replace(doc, deleting=True))
        return reaction

    def _deleted(self, reaction: Reaction, cause: events.Message, doc: records.HyperJobDoc) -> Reaction:
        self.state.drop(doc)
        return reaction.publish(
            subjects.HYPERJOB_DELETED, events.HyperJobDeleted(**self.rt.envelope(cause, "deleted"), name=doc.name)
        )

    def _delete_queue(self, msg: events.DeleteObject) -> Reaction:
        if msg.name not in self.state.queues:
            return answers.rejected(self.rt, msg, kind="Queue", name=msg.name, reason=f"Queue {msg.name!r} not found")
        users = sorted(d.name for d in self.state.hyperjobs.values() if msg.name in domain.queues_of(d))
        children = sorted(n for n, parent in self.state.cfg().parents.items() if parent == msg.name)
        if users or children:
            return answers.rejected(
                self.rt,
                msg,
                kind="Queue",
                name=msg.name,
                reason=f"queue {msg.name!r} is used by {', '.join(users or children)}",
            )
        self.state.queues.delete(msg.name)
        reaction = answers.accepted(self.rt, msg, kind="Queue", name=msg.name, outcome="deleted")
        return reaction.publish(subjects.queue_config(msg.name), messages.queue_changed(self.rt, msg, msg.name, None))

    def on_job_removed(self, msg: events.JobRemoved) -> Reaction | None:
        """A child is gone from its cluster; the last one gone ends a deletion."""
        doc = self.state.hyperjobs.get(msg.hyperjob or msg.job)
        if doc is None or not doc.deleting:
            return None
        remaining = replace(doc, children=[ref for ref in doc.children if ref.name != msg.job])
        if not remaining.children:
            return self._deleted(Reaction(), msg, remaining)
        self.state.put(remaining)
        return None
