"""overcommit: admit a podgroup only while reserved minResources fit ``total x factor - used``."""

from __future__ import annotations

import msgspec
import numpy as np

from ..framework import JobEnqueueable, Plugin, SessionView
from ..state import JobState
from ..status import SUCCESS, Status, unschedulable
from .quota import inqueue_part


class OvercommitArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    factor: float = msgspec.field(default=1.2, name="overcommit-factor")


class OvercommitPlugin(Plugin[OvercommitArgs], JobEnqueueable):
    NAME = "overcommit"
    Args = OvercommitArgs

    def on_session_open(self, ssn: SessionView) -> None:
        super().on_session_open(ssn)
        self.factor = self.args.factor if self.args.factor >= 1 else 1.2
        self.idle = ssn.total * self.factor - ssn.nodes.used().sum(axis=0)
        self.inqueue = np.zeros(ssn.space.size)
        for job in ssn.jobs.values():
            if job.min_req is None:
                continue
            if job.phase == "Inqueue":
                self.inqueue += job.min_req
            else:
                part = inqueue_part(job)
                if part is not None:
                    self.inqueue += part

    def job_enqueueable(self, job: JobState) -> Status:
        if job.min_req is None:
            return SUCCESS
        space = self.ssn.space
        dims = space.req_dims(job.min_req)
        need = self.inqueue + job.min_req
        if space.le_on(need, self.idle, dims):
            return SUCCESS
        over = ", ".join(space.over_on(need, self.idle, dims))
        return unschedulable(
            f"podgroup minResources exceed what the cluster can admit on {over} "
            f"(its allocatable x {self.factor:g} overcommit, less what runs and what admitted podgroups reserve)",
            self.NAME,
        )

    def job_enqueued(self, job: JobState) -> None:
        if job.min_req is not None:
            self.inqueue += job.min_req
