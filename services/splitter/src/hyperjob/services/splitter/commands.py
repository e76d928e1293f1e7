"""Commands: suspend, resume, restart and abort on a HyperJob; a Volcano Job command on a plain
Job; a Queue opened or closed."""

from __future__ import annotations

from msgspec.structs import replace

from hyperjob import api, events, fleetcore, records
from hyperjob.events import subjects
from hyperjob.servicekit import InvariantError, Reaction, answers

from . import domain, messages
from .planning import Planner
from .state import SplitterState


class Commands:
    """Carries out commands on what the splitter owns.

    Invariants, enforced here:
    - A command that would change nothing, or that the object cannot take (a HyperJob being
      deleted or finished, a second suspend, a Job not on a cluster yet), is refused with the
      reason and changes nothing (``domain.command_refused``).
    - A HyperJob command acts on every child through its cluster's job-controller and sets the
      lifecycle with the same commit; a HyperJob suspended before it was planned is planned
      when resumed. A HyperJob that takes a command never becomes ``Terminating`` (only a
      deletion terminates one): that is an ``InvariantError``, not a silent change.
    """

    def __init__(self, state: SplitterState, planner: Planner) -> None:
        self.state = state
        self.planner = planner
        self.rt = state.rt

    def on_command(self, msg: events.CommandHyperJob) -> Reaction:
        """suspend / resume / restart / abort act on every child, through its cluster's job-controller."""
        try:
            namespace = domain.request_namespace(
                subjects.HYPERJOB_COMMAND, msg, "HyperJob", msg.namespace, "$.namespace"
            )
        except api.ManifestError as exc:
            return answers.rejected(self.rt, msg, kind="HyperJob", name=msg.name, reason=str(exc))
        doc = self.state.find("HyperJob", namespace, msg.name)
        if doc is None or doc.deleting:
            reason = (
                f"HyperJob {msg.name!r} is being deleted"
                if doc is not None and doc.deleting
                else messages.not_found("HyperJob", namespace, msg.name)
            )
            return answers.rejected(self.rt, msg, kind="HyperJob", name=msg.name, reason=reason)
        refused = domain.command_refused(msg.action, doc)
        if refused:
            reason = f"HyperJob {msg.name!r} {refused}"
            return answers.rejected(self.rt, msg, kind="HyperJob", name=msg.name, reason=reason)
        return self._command(msg, doc)

    def _command(self, msg: events.CommandHyperJob, doc: records.HyperJobDoc) -> Reaction:
        phases = {ref.name: doc.child_phases.get(ref.name, "Pending") for ref in doc.children}
        lifecycle = fleetcore.settle_lifecycle(doc.lifecycle, phases)
        lifecycle, decisions = fleetcore.hyperjob_command(msg.action, phases, lifecycle)
        reaction = answers.accepted(self.rt, msg, kind="HyperJob", name=msg.name, outcome="commanded")
        messages.carry_out(self.rt, reaction, msg, doc, decisions)
        restarts = doc.restarts + (1 if msg.action == "restart" else 0)
        doc = replace(doc, lifecycle=lifecycle, restarts=restarts)
        self.state.put(doc)
        if lifecycle == "Active" and doc.admitted and not doc.children:
            self.planner.split(reaction, msg, doc)  # suspended before it was placed: plan it now
        if lifecycle == "Terminating":  # only a deleting HyperJob terminates, and it takes no command
            raise InvariantError(f"HyperJob {msg.name!r} is Terminating yet took the command {msg.action}")
        return reaction.publish(
            subjects.OWNER_LIFECYCLE,
            events.OwnerLifecycle(
                **self.rt.envelope(msg, "lifecycle"), name=doc.name, lifecycle=lifecycle, restarts=restarts
            ),
        )

    def on_object_command(self, msg: events.CommandObject) -> Reaction:
        """A Volcano Job command on a plain Job (through its cluster), or a Queue opened or closed."""
        try:
            namespace = domain.request_namespace(subjects.OBJECT_COMMAND, msg, msg.kind, msg.namespace, "$.namespace")
        except api.ManifestError as exc:
            return answers.rejected(self.rt, msg, kind=msg.kind, name=msg.name, reason=str(exc))
        if msg.kind == "Queue":
            return self._queue_command(msg)
        doc = self.state.find("Job", namespace, msg.name)
        cluster = doc.children[0].cluster if doc is not None and doc.children else ""
        if not cluster:
            reason = (
                messages.not_found("Job", namespace, msg.name)
                if doc is None
                else f"Job {msg.name!r} is not on a cluster yet"
            )
            return answers.rejected(self.rt, msg, kind="Job", name=msg.name, reason=reason)
        reaction = answers.accepted(self.rt, msg, kind="Job", name=msg.name, outcome="commanded")
        return reaction.publish(
            subjects.command_child(cluster),
            events.CommandChild(**self.rt.envelope(msg, "command"), child=msg.name, cluster=cluster, action=msg.action),
        )

    def _queue_command(self, msg: events.CommandObject) -> Reaction:
        queue = self.state.queues.get(msg.name) or (_default_queue() if msg.name == api.DEFAULT_QUEUE else None)
        if queue is None or msg.action not in ("open", "close"):
            return answers.rejected(
                self.rt,
                msg,
                kind=msg.kind,
                name=msg.name,
                reason=f"Queue {msg.name!r} not found"
                if queue is None
                else f"$.action: a Queue takes open or close, not {msg.action!r}",
            )
        queue = replace(queue, state="Open" if msg.action == "open" else "Closed")
        self.state.queues.put(msg.name, queue)
        reaction = answers.accepted(self.rt, msg, kind="Queue", name=msg.name, outcome="commanded")
        return reaction.publish(subjects.queue_config(msg.name), messages.queue_changed(self.rt, msg, msg.name, queue))


def _default_queue() -> records.QueueDoc:
    """The queue ``default`` (weight 1, reclaimable) that always exists, as in Volcano."""
    queue = api.Queue(metadata=api.ObjectMeta(name=api.DEFAULT_QUEUE), spec=api.QueueSpec(weight=1, reclaimable=True))
    return records.QueueDoc(manifest=api.encode(queue))
