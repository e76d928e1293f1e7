"""Admission: Volcano's webhook defaults and rejections."""

from __future__ import annotations

import pytest

from hyperjob import api
from hyperjob import jobcore as jc
from tests.unit.jobcore.jobcore_builders import QUEUES, job, task


def test_defaults_are_applied():
    record = jc.admit(job(task("", 3), task("ps", 2, minAvailable=1)), QUEUES, 5.0)
    spec = record.spec
    assert spec.queue == "default"
    assert spec.max_retry == 3
    assert [t.name for t in spec.tasks] == ["default0", "ps"]
    assert [t.min_available for t in spec.tasks] == [3, 1]
    assert [t.max_retry for t in spec.tasks] == [3, 3]
    assert spec.min_available == 4
    assert (record.phase, record.version, record.retry_count, record.created_at) == ("Pending", 0, 0, 5.0)
    assert record.pods == {}


def test_explicit_values_are_kept():
    spec = jc.admit(job(task("w", 3, maxRetry=5), minAvailable=2, maxRetry=7, queue="weight"), QUEUES, 0).spec
    assert (spec.min_available, spec.max_retry, spec.queue, spec.tasks[0].max_retry) == (2, 7, "weight", 5)


@pytest.mark.parametrize(
    ("plugins", "expected"),
    [
        ({"pytorch": []}, {"pytorch", "svc"}),
        ({"mpi": []}, {"mpi", "svc", "ssh"}),
        ({"tensorflow": []}, {"tensorflow", "svc"}),
        ({"ray": ["--head=master"]}, {"ray", "svc"}),
        ({"env": []}, {"env"}),
        ({"pytorch": [], "svc": ["--disable-network-policy"]}, {"pytorch", "svc"}),
    ],
    ids=[
        "pytorch-adds-svc",
        "mpi-adds-svc-and-ssh",
        "tensorflow-adds-svc",
        "ray-adds-svc",
        "env-alone",
        "existing-svc-args-kept",
    ],
)
def test_framework_plugins_add_svc_and_ssh(plugins, expected):
    record = jc.admit(job(task("master"), task("worker", 2), plugins=plugins), QUEUES, 0)
    assert set(record.spec.plugins) == expected
    if "svc" in plugins:
        assert record.spec.plugins["svc"] == plugins["svc"]


def test_defaulting_is_idempotent():
    once = jc.apply_defaults(job(task("master"), task("", 2), plugins={"mpi": []}))
    assert jc.apply_defaults(once) == once


@pytest.mark.parametrize(
    ("manifest", "queues", "path"),
    [
        (lambda: job(task("a"), task("a")), QUEUES, "$.spec.tasks[1].name"),
        (lambda: job(task("a", 2, minAvailable=3)), QUEUES, "$.spec.tasks[0].minAvailable"),
        (lambda: job(task("a", 2), minAvailable=3), QUEUES, "$.spec.minAvailable"),
        (lambda: job(task("a"), queue="nope"), QUEUES, "$.spec.queue"),
        (lambda: job(task("a"), queue="closed"), QUEUES, "$.spec.queue"),
        (lambda: job(task("a")), {"weight": "Open"}, "$.spec.queue"),
        (
            lambda: job(task("a", annotations={"hyperjob.io/sim-duration": "soon"})),
            QUEUES,
            "$.spec.tasks[0].template.metadata.annotations.hyperjob.io/sim-duration",
        ),
    ],
    ids=[
        "duplicate-task-name",
        "task-minavailable-above-replicas",
        "job-minavailable-above-replicas",
        "queue-missing",
        "queue-closed",
        "default-queue-missing",
        "bad-sim-duration",
    ],
)
def test_rejections_name_the_field(manifest, queues, path):
    with pytest.raises(api.ManifestError) as info:
        jc.admit(manifest(), queues, 0)
    assert info.value.path == path


def test_unknown_policy_event_in_a_struct_built_in_code_is_rejected():
    manifest = job(task("a"))
    bad = api.LifecyclePolicy(event="PodExploded", action="RestartJob")  # type: ignore[arg-type]
    import msgspec

    # The spec checks its policies whenever it is built (Volcano's validatePolicies), in code too.
    with pytest.raises(ValueError, match="PodExploded is not an event a policy may name"):
        msgspec.structs.replace(manifest.spec, policies=[bad])


def test_unknown_policy_action_is_rejected_when_decoding():
    with pytest.raises(api.ManifestError):
        job(task("a"), policies=[{"event": "PodFailed", "action": "Explode"}])


def test_non_leaf_queue_is_rejected_when_hierarchy_is_given():
    queues = {"default": "Open", "team": "Open", "team-a": "Open"}
    parents = {"team": "root", "team-a": "team", "default": "root"}
    with pytest.raises(api.ManifestError, match="not a leaf"):
        jc.admit(job(task("a"), queue="team"), queues, 0, parents=parents)
    assert jc.admit(job(task("a"), queue="team-a"), queues, 0, parents=parents).spec.queue == "team-a"


def test_priority_comes_from_the_priority_class():
    record = jc.admit(job(task("a"), priorityClassName="high"), QUEUES, 0, {"high": 1000})
    assert record.priority == 1000
    assert jc.admit(job(task("a"), priorityClassName="unknown"), QUEUES, 0).priority == 0


def test_initial_effects_announce_pending_and_create_the_podgroup():
    record = jc.admit(job(task("a", 2)), QUEUES, 0)
    phase, create = jc.initial_effects(record)
    assert phase == jc.JobPhaseChanged(old="", new="Pending", reason="Created")
    assert create == jc.CreatePodGroup(podgroup=jc.derive_podgroup(record))


def test_uid_defaults_to_namespace_and_name():
    assert jc.admit(job(task("a"), name="train"), QUEUES, 0).uid == "default/train"
