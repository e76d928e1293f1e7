"""Pure pod bookkeeping of the node-agent: both modes' finishing rules, and pod hostnames in exec mode."""

import pytest

from hyperjob.services.node_agent import domain
from hyperjob.services.node_agent.execpods import restart_delay


def pod(name="j-w-0", uid="u1", policy="Never", finishes_at=None, exit_code=0):
    return domain.RunningPod(
        pod=name,
        uid=uid,
        job="j",
        node="n1",
        job_version=1,
        started_at=0.0,
        finishes_at=finishes_at,
        exit_code=exit_code,
        restart_policy=policy,
    )


@pytest.mark.parametrize(
    ("policy", "code", "phase", "stays"),
    [
        ("Never", 0, "Succeeded", False),
        ("Never", 3, "Failed", False),
        ("OnFailure", 0, "Succeeded", False),
        ("OnFailure", 3, "Running", True),
        ("Always", 0, "Running", True),
        ("Always", 3, "Running", True),
    ],
    ids=lambda v: str(v),
)
def test_an_exited_container_finishes_or_restarts_in_place_by_policy(policy, code, phase, stays):
    pods = {"j-w-0": pod(policy=policy)}
    [report] = domain.exited(pods, "j-w-0", "u1", code, now=5.0)
    assert report.phase == phase
    assert ("j-w-0" in pods) == stays
    if stays:
        assert report.restarts == 1 and pods["j-w-0"].started_at == 5.0 and pods["j-w-0"].finishes_at is None
    else:
        assert report.exit_code == code


def test_the_exit_of_an_older_incarnation_reports_nothing():
    pods = {"j-w-0": pod(uid="u2")}
    assert domain.exited(pods, "j-w-0", "u1", 1, now=1.0) == []
    assert domain.exited({}, "j-w-0", "u1", 1, now=1.0) == []


def test_simulated_pods_finish_on_time_and_restart_with_the_same_duration():
    pods = {"a": pod("a", finishes_at=10.0, exit_code=1, policy="OnFailure"), "b": pod("b", finishes_at=20.0)}
    assert domain.advance(pods, now=9.0) == []
    [report] = domain.advance(pods, now=10.0)
    assert (report.pod, report.phase, report.restarts) == ("a", "Running", 1)
    assert pods["a"].finishes_at == 20.0
    assert [(r.pod, r.phase) for r in domain.advance(pods, now=20.0)] == [("a", "Running"), ("b", "Succeeded")]


def test_a_simulated_pod_found_due_late_ended_at_its_due_time_unless_it_stood_still_past_it():
    """The finish timer fired at 50 (the agent's store was away): the pods ended at 10 and 20, not
    at 50, which a freeze-aware count of copies relies on; a pod that stood still (frozen, its node
    down) until 15 ended no earlier than 15."""
    pods = {"a": pod("a", finishes_at=10.0), "b": pod("b", finishes_at=20.0)}
    assert [(r.pod, r.at) for r in domain.advance(dict(pods), now=50.0)] == [("a", 10.0), ("b", 20.0)]
    assert [(r.pod, r.at) for r in domain.advance(dict(pods), now=50.0, still_until=15.0)] == [("a", 15.0), ("b", 20.0)]
    [report] = domain.exited(pods, "a", "u1", 0, now=12.0)
    assert report.at == 12.0  # an exit is dated when it happened, however late it is recorded


def test_a_repeated_start_of_the_same_incarnation_changes_nothing():
    pods: dict = {}
    assert [r.phase for r in domain.start(pods, pod())] == ["Running"]
    assert domain.start(pods, pod()) == []
    assert [r.phase for r in domain.stop(pods, "j-w-0")] == ["Deleted"] and domain.stop(pods, "j-w-0") == []


def test_pod_hostnames_become_loopback_and_other_values_are_left_alone():
    env = {
        "MASTER_ADDR": "hj-trainer-0-master-0.hj-trainer-0",
        "MASTER_PORT": "23456",
        "VC_WORKER_HOSTS": "j-worker-0.j,j-worker-1.j",
        "PEER_ADDR": "10.1.2.3",
        "MODULE": "torch.distributed",
        "VC_MASTER_HOSTS": "localhost",
    }
    assert domain.local_env(env) == {**env, "MASTER_ADDR": "127.0.0.1", "VC_WORKER_HOSTS": "127.0.0.1,127.0.0.1"}


WORLD_ENV = {
    "MASTER_ADDR": "ddp-job-0-worker-0.ddp-job-0",
    "MASTER_PORT": "29518",
    "VC_WORKER_HOSTS": "ddp-job-0-worker-0.ddp-job-0,ddp-job-1-worker-0.ddp-job-1,ddp-job-1-worker-1.ddp-job-1",
    "SOME_ADDR": "10.0.0.9",
    "NOTE": "ddp-job-0-worker-0.ddp-job-0",
}


def test_the_pods_a_world_env_names_as_hosts_are_found_in_every_host_variable():
    assert domain.pod_hosts(WORLD_ENV) == {"ddp-job-0-worker-0", "ddp-job-1-worker-0", "ddp-job-1-worker-1"}
    assert domain.pod_hosts({"MASTER_ADDR": "127.0.0.1", "PATH": "/bin"}) == set()


def test_a_pod_hostname_resolves_to_the_address_of_the_node_its_pod_runs_on():
    # Two hosts: this one (10.1.0.2) runs job-1's pods, the other (10.2.0.2) job-0's master.
    addresses = {"ddp-job-0-worker-0": "10.2.0.2", "ddp-job-1-worker-0": "10.1.0.2", "ddp-job-1-worker-1": "10.1.0.2"}
    assert domain.resolve_hosts(WORLD_ENV, addresses, here="10.1.0.2") == {
        **WORLD_ENV,
        "MASTER_ADDR": "10.2.0.2",
        "VC_WORKER_HOSTS": "10.2.0.2,127.0.0.1,127.0.0.1",  # a peer on this machine: loopback
    }


def test_every_pod_on_one_machine_or_of_unknown_address_is_loopback_as_before():
    same = {"ddp-job-0-worker-0": "10.1.0.2", "ddp-job-1-worker-0": "10.1.0.2"}  # worker-1's agent says nothing
    resolved = domain.resolve_hosts(WORLD_ENV, same, here="10.1.0.2")
    assert resolved == domain.local_env(WORLD_ENV)
    assert resolved["VC_WORKER_HOSTS"] == "127.0.0.1,127.0.0.1,127.0.0.1"


def test_restart_back_off_doubles_up_to_thirty_seconds():
    assert [restart_delay(n) for n in (1, 2, 3, 4, 5, 6, 7)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


@pytest.mark.parametrize("policy", ["Never", "Always"])
def test_how_a_container_ended_is_reported_whether_it_restarts_or_not(policy):
    # A container restarted in place after an OOM kill keeps it as its last state (kubectl's lastState).
    pods = {"j-w-0": pod(policy=policy)}
    [report] = domain.exited(pods, "j-w-0", "u1", 137, now=5.0, reason="OOMKilled")
    assert (report.exit_code, report.reason) == (137, "OOMKilled")
