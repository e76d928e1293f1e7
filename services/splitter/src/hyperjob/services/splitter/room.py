"""The room the children a split or a failover sends take on their clusters before the clusters'
summaries count them, and the room lower-priority work could give back."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from hyperjob import api, events, fleetcore, records
from hyperjob.servicekit import Reaction

from . import domain
from .state import SplitterState

# A planned or moved child's pods count against its cluster until it runs there, at most this long (s).
MOVE_SETTLING = 60.0


# A child's promised room: its cluster, its pods, and when it was sent there.
Promised = tuple[str, list[fleetcore.PodShape], float]


class Room:
    """The fleet's room as the splitter plans on it: the live clusters' room, less what children
    sent there lately will take.

    Invariants, enforced here:
    - A child a split sends to a cluster it is not on yet counts against that cluster from the
      split on (``promise``: the splits of one unit of work follow each other before it commits,
      so a burst does not land on one cluster); a child a failover moves, once the move is
      committed (``remember_moves``).
    - It stops counting once it runs (or ran) there and the cluster's summary counts it
      (``ran``), once it is withdrawn from there (``withdraw``: a plan redone after a gang retry
      names its children alike), or ``MOVE_SETTLING`` after it was sent, whichever comes first.
    """

    def __init__(self, state: SplitterState) -> None:
        self.state = state
        self.rt = state.rt
        # Children moved lately: (cluster, pods, when), until their new cluster's summary counts them.
        self.moving: dict[str, Promised] = {}
        # Each cluster's working room as last computed: the summary it started from, the promises
        # placed on it (in order) and the room they left. A burst's next split extends it by the
        # promises made since instead of placing every one of them again (which made a burst's
        # planning quadratic: 100 HyperJobs of 64 pods placed 10,650 gangs).
        self._placed: dict[str, tuple[fleetcore.ClusterCapacity, list[Promised], fleetcore.ClusterCapacity]] = {}

    def ran(self, msg: events.JobPhaseChanged) -> None:
        """A child's phase on a cluster: once it runs (or ran) there its room is the summary's."""
        moving = self.moving.get(msg.job)
        if moving is not None and moving[0] == msg.cluster and msg.new != "Pending":
            del self.moving[msg.job]  # it runs (or ran) there: the cluster's summary counts it now

    def working(
        self, now: float, exclude: set[str] | frozenset[str] = frozenset()
    ) -> dict[str, fleetcore.ClusterCapacity]:
        """The live clusters' room, less what the children planned or moved there lately take
        once they run (a cluster's summary counts a child's pods only once they are bound);
        ``exclude``: children whose room is not to be taken (those of the plan being redone)."""
        settled = [child for child, (_, _, since) in self.moving.items() if self.rt.now() - since > MOVE_SETTLING]
        for child in settled:
            del self.moving[child]
        live = self.state.capacity.live(now)
        taking: dict[str, list[Promised]] = {name: [] for name in live}
        for child, promised in self.moving.items():
            if promised[0] in taking and child not in exclude:
                taking[promised[0]].append(promised)
        self._placed = {name: self._taken(cap, taking[name]) for name, cap in live.items()}
        return {name: placed[2] for name, placed in self._placed.items()}

    def _taken(
        self, live: fleetcore.ClusterCapacity, promises: list[Promised]
    ) -> tuple[fleetcore.ClusterCapacity, list[Promised], fleetcore.ClusterCapacity]:
        """``live`` less ``promises``, each placed in order (one that does not fit takes nothing),
        from the last computation when it started from the same summary and placed a prefix of them."""
        room, done = live, 0
        if (last := self._placed.get(live.name)) is not None and last[0] is live and _prefix(last[1], promises):
            room, done = last[2], len(last[1])
        for _, pods, _ in promises[done:]:
            if not isinstance(placed := fleetcore.place_gang(room, pods), str):
                room = placed
        return live, promises, room

    def without_lower_priority(
        self, doc: records.HyperJobDoc, live: dict[str, fleetcore.ClusterCapacity]
    ) -> Iterator[dict[str, fleetcore.ClusterCapacity]]:
        """``live`` with the room of running children of lower priority than ``doc`` given back,
        one cluster more at a time, the cluster whose work would lose least first (GPUs × time
        since applied): a plan is made on as little of it as it needs, free room first."""
        cfg = self.state.cfg()
        priority = domain.priority_of(doc, cfg, self.state.decoded)
        given: dict[str, list[fleetcore.PodShape]] = {}
        work: dict[str, float] = {}
        for other in self.state.hyperjobs.values():
            if other.name == doc.name or not other.admitted or other.deleting:
                continue
            if domain.priority_of(other, cfg, self.state.decoded) >= priority:
                continue
            for ref, pods in domain.running_children(other, self.state.decoded):
                if ref.cluster in live:
                    given.setdefault(ref.cluster, []).extend(pods)
                    gpus = sum(p.request.get(fleetcore.GPU, 0.0) for p in pods)
                    work[ref.cluster] = work.get(ref.cluster, 0.0) + gpus * (self.rt.now() - other.created)
        room = dict(live)
        for cluster in sorted(given, key=lambda c: (work[c], c)):
            room[cluster] = fleetcore.given_back(room[cluster], given[cluster])
            yield dict(room)

    def promise(self, hyperjob: api.HyperJob, before: list[events.ChildRef], refs: list[events.ChildRef]) -> None:
        """Children a split sends to a cluster they are not on yet count against it until they run
        there, so the next split of the same burst sees that room taken. Kept at once, not after
        the commit: the splits of one unit of work follow each other before it commits."""
        was = {(ref.name, ref.cluster) for ref in before}
        specs = {rj.name: rj.template_spec for rj in hyperjob.spec.replicated_jobs}
        for ref in refs:
            if ref.cluster and (ref.name, ref.cluster) not in was and ref.replicated_job in specs:
                pods = fleetcore.gang_pods(specs[ref.replicated_job], ref.tasks)
                self.moving[ref.name] = (ref.cluster, pods, self.rt.now())

    def withdraw(self, removed: Sequence[events.ChildRef]) -> None:
        """Children asked to leave their cluster no longer take the room they were promised there:
        a plan redone after a gang retry names its children alike, and would otherwise find its own
        withdrawn child still holding the room it waits for, until ``MOVE_SETTLING`` passed."""
        for ref in removed:
            if (promised := self.moving.get(ref.name)) is not None and promised[0] == ref.cluster:
                del self.moving[ref.name]

    def remember_moves(
        self,
        reaction: Reaction,
        hyperjob: api.HyperJob,
        split: fleetcore.SplitPlan,
        moves: Sequence[fleetcore.FleetDecision],
    ) -> None:
        """Once committed, the moves' pods count against their new clusters until they run there."""
        promised = {
            m.child: (m.to_cluster, fleetcore.child_pods(hyperjob, child))
            for m in moves
            if isinstance(m, fleetcore.ChildMove) and (child := split.child(m.child)) is not None
        }

        async def remember() -> None:
            for child, (cluster, pods) in promised.items():
                self.moving[child] = (cluster, pods, self.rt.now())

        reaction.after.append(remember)


def _prefix(placed: list[Promised], promises: list[Promised]) -> bool:
    """Whether ``placed`` are the first of ``promises``, the very same promises (a child promised
    again is a new promise: its pods may differ)."""
    return len(placed) <= len(promises) and all(a is b for a, b in zip(placed, promises, strict=False))
