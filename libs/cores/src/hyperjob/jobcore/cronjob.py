"""A CronJob's decisions (Volcano's ``pkg/controllers/cronjob``, ed72c7c81, Kubernetes' semantics), pure.

``step(cron, created_at, state, jobs, now)`` takes the CronJob, when it was created, what it
remembers (the last scheduled time and its active jobs) and the phase of every job it created;
it returns the job to create now (if any), the jobs to delete, the new state and when to look
again. Times are seconds since the Unix epoch (``hyperjob simulate``'s virtual time starts at 0).

* The schedule time to run is the most recent one not after ``now`` since the last scheduled time
  (or the creation); with ``startingDeadlineSeconds`` one older than ``now − deadline`` is too late
  and skipped (``mostRecentScheduleTime``). More than 100 missed times are reported (``missed``).
* The job is ``<cronjob>-<scheduled time in minutes since the epoch>`` (``getJobName``); a time
  already scheduled, or whose job is active, creates nothing.
* ``concurrencyPolicy``: Allow starts it anyway; Forbid skips this time while a job is active (it is
  not remembered as scheduled, so a later sync may still start it within the deadline); Replace
  deletes the active jobs and starts the new one.
* Finished jobs (Completed, Failed, Terminated, Aborted) leave the active list; the oldest beyond
  ``successfulJobsHistoryLimit`` (Completed) and ``failedJobsHistoryLimit`` (the others) are deleted.
* ``suspend`` stops new runs; history is still kept to its limits.

The workflow-controller service calls ``step`` at ``requeue_at`` (a timer) and on every phase
change or end of the CronJob's jobs, and carries out ``create`` / ``delete``.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Mapping

import croniter
import msgspec

from hyperjob.api.job import CronJob

FINISHED = ("Completed", "Failed", "Terminated", "Aborted")
MANY_MISSED = 100


class CronState(msgspec.Struct, frozen=True, kw_only=True):
    last_schedule_time: float | None = None
    active: list[str] = []


class JobRun(msgspec.Struct, frozen=True, kw_only=True):
    """A job the CronJob created: its phase and when it was created (orders the history)."""

    phase: str
    created_at: float


class CronStep(msgspec.Struct, frozen=True, kw_only=True):
    create: str | None = None
    scheduled_at: float | None = None
    delete: list[str] = []
    state: CronState
    requeue_at: float | None = None
    missed: str = "none"  # none | few | many


def job_name(cron: CronJob, scheduled_at: float) -> str:
    return f"{cron.metadata.name}-{int(scheduled_at) // 60}"


def _zone(cron: CronJob) -> dt.tzinfo:
    return zoneinfo.ZoneInfo(cron.spec.time_zone) if cron.spec.time_zone else dt.UTC


def next_time(cron: CronJob, after: float) -> float:
    """The first schedule time strictly after ``after``."""
    start = dt.datetime.fromtimestamp(after, _zone(cron))
    return float(croniter.croniter(cron.spec.schedule, start).get_next(float))


def most_recent(cron: CronJob, created_at: float, state: CronState, now: float) -> tuple[float | None, int]:
    """(the schedule time to run now or None, how many were missed since the last one)."""
    earliest = state.last_schedule_time if state.last_schedule_time is not None else created_at
    deadline = cron.spec.starting_deadline_seconds
    if deadline is not None:
        earliest = max(earliest, now - deadline)
    recent, missed, t = None, 0, next_time(cron, earliest)
    while t <= now:
        recent, missed = t, missed + 1
        if missed > MANY_MISSED:  # Kubernetes stops counting here; jump to the last one before now
            back = dt.datetime.fromtimestamp(now, _zone(cron))
            recent = float(croniter.croniter(cron.spec.schedule, back).get_prev(float))
            if next_time(cron, recent) <= now:  # ``now`` is itself a schedule time
                recent = next_time(cron, recent)
            break
        t = next_time(cron, t)
    return recent, missed


def step(cron: CronJob, created_at: float, state: CronState, jobs: Mapping[str, JobRun], now: float) -> CronStep:
    """One sync of the CronJob at ``now``."""
    active = [name for name in state.active if name in jobs and jobs[name].phase not in FINISHED]
    delete = _over_history(cron, jobs)
    state = msgspec.structs.replace(state, active=active)
    requeue = next_time(cron, now)
    if cron.spec.suspend:
        return CronStep(delete=delete, state=state, requeue_at=None)
    scheduled, missed = most_recent(cron, created_at, state, now)
    missed_text = "many" if missed > MANY_MISSED else "few" if missed > 1 else "none"
    if scheduled is None or job_name(cron, scheduled) in active or state.last_schedule_time == scheduled:
        return CronStep(delete=delete, state=state, requeue_at=requeue, missed=missed_text)
    if active and cron.spec.concurrency_policy == "Forbid":
        return CronStep(delete=delete, state=state, requeue_at=requeue, missed=missed_text)
    if active and cron.spec.concurrency_policy == "Replace":
        delete, active = delete + active, []
    name = job_name(cron, scheduled)
    state = CronState(last_schedule_time=scheduled, active=[*active, name])
    return CronStep(
        create=name, scheduled_at=scheduled, delete=delete, state=state, requeue_at=requeue, missed=missed_text
    )


def _over_history(cron: CronJob, jobs: Mapping[str, JobRun]) -> list[str]:
    """Finished jobs beyond the history limits, oldest first (``processFinishedJobs``)."""
    by_age = sorted(jobs.items(), key=lambda item: (item[1].created_at, item[0]))
    succeeded = [name for name, run in by_age if run.phase == "Completed"]
    failed = [name for name, run in by_age if run.phase in FINISHED and run.phase != "Completed"]
    keep_ok, keep_failed = cron.spec.successful_jobs_history_limit, cron.spec.failed_jobs_history_limit
    return succeeded[: max(0, len(succeeded) - keep_ok)] + failed[: max(0, len(failed) - keep_failed)]
