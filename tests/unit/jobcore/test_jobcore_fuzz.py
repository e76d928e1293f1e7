"""Seeded random event sequences: decide never crashes, stays in the ten phases, and every
event applied a second time right away changes nothing (redelivery is harmless)."""

from __future__ import annotations

import random

import pytest

from hyperjob import jobcore as jc
from tests.unit.jobcore.jobcore_builders import admitted, task

POLICIES = [
    [],
    [{"event": "PodFailed", "action": "RestartJob"}],
    [{"event": "PodEvicted", "action": "RestartTask"}, {"exitCode": 3, "action": "AbortJob"}],
    [
        {"event": "PodPending", "action": "TerminateJob", "timeout": "10s"},
        {"event": "TaskFailed", "action": "RestartJob"},
    ],
    [
        {"event": "PodFailed", "action": "RestartPod", "timeout": "5s"},
        {"event": "TaskCompleted", "action": "CompleteJob"},
    ],
]


def _random_event(rng: random.Random, record: jc.JobRecord, keys: list[str]) -> object:
    pods = sorted(record.pods.values(), key=lambda p: p.name)
    choice = rng.random()
    if choice < 0.08:
        return jc.PodGroupAdmitted(job_version=record.version)
    if choice < 0.12:
        return jc.CommandIssued(action=rng.choice(["abort", "resume", "restart", "terminate", "complete", "SyncJob"]))
    if choice < 0.18 and keys:
        return jc.TimerFired(key=rng.choice(keys))
    if not pods:
        return jc.PodGroupAdmitted(job_version=record.version)
    pod = rng.choice(pods)
    v = pod.version
    return rng.choice(
        [
            jc.PodBound(pod=pod.name, node="n1", job_version=v),
            jc.PodRunning(pod=pod.name, job_version=v),
            jc.PodSucceeded(pod=pod.name, job_version=v),
            jc.PodFailed(pod=pod.name, exit_code=rng.choice([1, 3]), job_version=v),
            jc.PodEvicted(pod=pod.name, reason="nodeDown", job_version=v),
            jc.PodDeleted(pod=pod.name, job_version=v),
            jc.PodRestarted(pod=pod.name, restarts=pod.status.container_restarts + 1, job_version=v),
        ]
    )


@pytest.mark.parametrize("seed", range(40))
def test_random_sequences_are_safe_and_redelivery_is_harmless(seed):
    rng = random.Random(seed)
    record = admitted(
        task("master", 1, maxRetry=2),
        task("worker", rng.randint(1, 3), minAvailable=1),
        policies=POLICIES[seed % len(POLICIES)],
        minSuccess=None if seed % 3 else 2,
    )
    keys: list[str] = []
    for step in range(60):
        event = _random_event(rng, record, keys)
        record, effects = jc.decide(record, event, float(step))
        keys += [e.key for e in effects if isinstance(e, jc.StartTimer)]
        assert record.phase in jc.PHASES
        if not isinstance(event, jc.CommandIssued):  # commands without an id are not deduplicated
            again, more = jc.decide(record, event, float(step))
            assert (again, more) == (record, []), (seed, step, event)
        assert all(p.name.startswith("job1-") for p in record.pods.values())
        assert jc.counts(record).pending + jc.counts(record).running <= jc.total_replicas(record)
