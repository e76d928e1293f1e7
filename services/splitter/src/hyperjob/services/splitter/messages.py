"""The messages more than one unit of the splitter sends, each built in one place: a queue's
configuration, a HyperJob's waiting reason, and fleetcore's decisions about children. The answer
to a request is built by ``servicekit.answers``, shared with the workflow-controller."""

from __future__ import annotations

from collections.abc import Sequence

from hyperjob import api, events, fleetcore, records
from hyperjob.events import subjects
from hyperjob.servicekit import Reaction, Runtime


def not_found(kind: str, namespace: str, name: str) -> str:
    """kubectl's NotFound, naming the namespace outside ``default`` (the reason ends "not found")."""
    where = f" in namespace {namespace!r}" if namespace not in ("", api.DEFAULT_NAMESPACE) else ""
    return f"{kind} {name!r}{where} not found"


def queue_changed(rt: Runtime, cause: events.Message, name: str, doc: records.QueueDoc | None) -> events.QueueChanged:
    """A queue as it now is (``doc``), or deleted (None), for the configuration stream."""
    if doc is None:
        return events.QueueChanged(**rt.envelope(cause, f"queue/{name}"), name=name, deleted=True)
    return events.QueueChanged(
        **rt.envelope(cause, f"queue/{name}"), name=name, manifest=doc.manifest, state=doc.state, created=doc.created
    )


def child_waiting(
    rt: Runtime, cause: events.Message | str, doc: records.HyperJobDoc, reason: str
) -> events.ChildPlacementWaiting:
    """Why the HyperJob ``doc`` waits before any child is placed: one message per generation and reason."""
    return events.ChildPlacementWaiting(
        **rt.envelope(cause, f"waiting/{doc.generation}/{reason}"), child="", hyperjob=doc.name, reason=reason
    )


def carry_out(
    rt: Runtime,
    reaction: Reaction,
    cause: events.Message | str,
    doc: records.HyperJobDoc,
    decisions: Sequence[fleetcore.FleetDecision],
) -> Reaction:
    """Send fleetcore's decisions about children where they must go (lifecycle is the caller's)."""
    clusters = {ref.name: ref.cluster for ref in doc.children}
    for d in decisions:
        if isinstance(d, fleetcore.ChildCommand) and clusters.get(d.child):
            reaction.publish(
                subjects.command_child(clusters[d.child]),
                events.CommandChild(
                    **rt.envelope(cause, f"command/{d.child}/{d.action}/{doc.restarts}"),
                    child=d.child,
                    cluster=clusters[d.child],
                    action=d.action,
                    reason=d.reason,
                ),
            )
        elif isinstance(d, fleetcore.ChildMove | fleetcore.ChildUnplaced):
            to = d.to_cluster if isinstance(d, fleetcore.ChildMove) else ""
            reaction.publish(
                subjects.MOVE_CHILD,
                events.MoveChild(
                    **rt.envelope(cause, f"move/{d.child}/{to}"), child=d.child, to_cluster=to, reason=d.reason
                ),
            )
    return reaction
