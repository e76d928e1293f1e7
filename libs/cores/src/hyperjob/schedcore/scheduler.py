"""``Scheduler(conf).cycle(snapshot) -> Decision``: open a session, run the actions, close it."""

from __future__ import annotations

from collections.abc import Callable

from .actions.allocate import allocate
from .actions.backfill import backfill
from .actions.enqueue import enqueue
from .actions.preempt import preempt
from .actions.reclaim import reclaim
from .carry import Carry
from .conf import DEFAULT_CONF
from .confspec import SchedulerConf
from .model import Decision, Snapshot
from .registry import build_registry
from .session import Session

ACTIONS: dict[str, Callable[[Session], None]] = {
    "enqueue": enqueue,
    "allocate": allocate,
    "preempt": preempt,
    "reclaim": reclaim,
    "backfill": backfill,
}


class Scheduler:
    """One cluster's scheduler. Pure and stateless between cycles: the same snapshot always
    gives the same decision. ``cycle`` never raises for a scheduling outcome."""

    def __init__(self, conf: SchedulerConf = DEFAULT_CONF) -> None:
        self.conf = conf
        self.registry = build_registry()
        # Only what a session derives from unchanged parts of the snapshot (``carry``): decisions
        # still depend on the snapshot alone.
        self.carry = Carry()

    def open(self, snapshot: Snapshot) -> Session:
        """A session over ``snapshot`` with plugins opened (for tests that inspect the world)."""
        return Session(self.conf, snapshot, self.registry, self.carry)

    def cycle(self, snapshot: Snapshot) -> Decision:
        ssn = self.open(snapshot)
        for name in self.conf.actions:
            ACTIONS[name](ssn)
        return ssn.close()
