"""HyperJob driving end to end: the gang, failover timing, commands and deletion."""

from __future__ import annotations

from typing import Any

from hyperjob import simulator

HEAD = """\
apiVersion: hyperjob.io/v1alpha1
kind: Scenario
metadata: {name: hyperjob}
spec:
  clusters:
  - name: cluster-a
    nodes: [{name: a, allocatable: {cpu: "16", nvidia.com/gpu: "4"}}]
  - name: cluster-b
    nodes: [{name: b, allocatable: {cpu: "16", nvidia.com/gpu: "4"}}]
  - name: cluster-c
    nodes: [{name: c, allocatable: {cpu: "16", nvidia.com/gpu: "4"}}]
  events:
  - at: 0s
    create:
      apiVersion: batch.volcano.sh/v1alpha1
      kind: HyperJob
      metadata: {name: hj}
      spec:
        clusterNames: [cluster-a, cluster-b, cluster-c]
        template:
          apiVersion: batch.volcano.sh/v1alpha1
          kind: Job
          spec:
            tasks:
            - name: t
              replicas: 8
              template:
                spec:
                  containers: [{name: c, image: x, resources: {requests: {cpu: "1", nvidia.com/gpu: "1"}}}]
        splitPolicy:
          strategy: ByCluster
          clusters: [{name: cluster-a, replicas: 4}, {name: cluster-b, replicas: 4}]
"""


def run(events: str = "", until: str = "120s") -> dict[str, Any]:
    return simulator.run(HEAD + events + f"  until: {until}\n")


def jobs(result: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    return {j["name"]: (j["phase"], j["cluster"]) for j in result["jobs"]}


def hyperjob(result: dict[str, Any]) -> dict[str, Any]:
    return next(h for h in result["hyperJobs"] if h["name"] == "hj")


def test_children_bind_together_in_both_clusters() -> None:
    result = run()
    assert jobs(result) == {"hj-job-0": ("Running", "cluster-a"), "hj-job-1": ("Running", "cluster-b")}
    bound = {e["time"] for e in result["events"] if e["type"] == "PodBound"}
    assert len(bound) == 1
    assert hyperjob(result)["placement"] == {"cluster-a": 4, "cluster-b": 4}
    assert hyperjob(result)["splitCount"] == 2


def test_cluster_back_within_the_timeout_keeps_its_child() -> None:
    result = run("  - {at: 10s, clusterDown: {cluster: cluster-b}}\n  - {at: 30s, clusterUp: {cluster: cluster-b}}\n")
    assert jobs(result)["hj-job-1"] == ("Running", "cluster-b")
    assert [e["type"] for e in result["events"] if e["object"].startswith("cluster")] == ["ClusterDown", "ClusterUp"]


def test_lost_cluster_child_moves_after_thirty_seconds() -> None:
    result = run("  - {at: 10s, clusterDown: {cluster: cluster-b}}\n")
    assert jobs(result)["hj-job-1"] == ("Running", "cluster-c")
    moved = [
        e
        for e in result["events"]
        if e["object"] == "hj-job-1" and e["type"] == "PodGroupPhaseChanged" and e["cluster"] == "cluster-c"
    ]
    assert moved[0]["time"] == 40.0  # 30 s after its last report (9 s: at 10 s it is down before reporting)
    assert hyperjob(result)["placement"] == {"cluster-a": 4, "cluster-c": 4}
    moved_pods = [p for p in result["pods"] if p["job"] == "hj-job-1"]
    assert {(p["node"], p["restarts"]) for p in moved_pods} == {("c", 1)}


def test_abort_leaves_the_hyperjob_aborted_once_every_child_is() -> None:
    result = run("  - {at: 10s, command: {kind: HyperJob, name: hj, action: abort}}\n")
    assert {p for p, _ in jobs(result).values()} == {"Aborted"}
    assert hyperjob(result)["phase"] == "Aborted"
    assert hyperjob(result)["conditions"] == [{"type": "Failed", "status": "True", "reason": "ChildVCJobsAborted"}]
    assert result["pods"] == []


def test_restart_brings_every_child_back() -> None:
    result = run("  - {at: 10s, command: {kind: HyperJob, name: hj, action: restart}}\n")
    assert {p for p, _ in jobs(result).values()} == {"Running"}
    assert hyperjob(result)["phase"] == "Running"
    # Pods go at once in virtual time: the HyperJob shows Restarting at the command, then is
    # re-admitted within the instant and Running again once the children bind.
    phases = [(e["time"], e["phase"]) for e in result["events"] if e["type"] == "HyperJobPhaseChanged"]
    assert phases[-3:] == [(10.0, "Restarting"), (10.0, "Admitted"), (11.0, "Running")]
    assert {j["retryCount"] for j in result["jobs"]} == {1}


def test_delete_removes_every_child_everywhere() -> None:
    result = run("  - {at: 10s, delete: {kind: HyperJob, name: hj}}\n")
    assert result["hyperJobs"] == [] and result["jobs"] == [] and result["pods"] == [] and result["podGroups"] == []


def test_suspend_before_placement_places_nothing_until_resume() -> None:
    suspended = run("  - {at: 0s, command: {kind: HyperJob, name: hj, action: suspend}}\n")
    assert hyperjob(suspended)["phase"] == "Suspended" and suspended["jobs"] == []
    resumed = run(
        "  - {at: 0s, command: {kind: HyperJob, name: hj, action: suspend}}\n"
        "  - {at: 20s, command: {kind: HyperJob, name: hj, action: resume}}\n"
    )
    assert hyperjob(resumed)["phase"] == "Running"


PLAIN = """\
apiVersion: hyperjob.io/v1alpha1
kind: Scenario
metadata: {name: plain-failover}
spec:
  clusters:
  - name: cluster-a
    nodes: [{name: a, allocatable: {cpu: "4"}}]
  - name: cluster-b
    nodes: [{name: b, allocatable: {cpu: "2"}}]
  events:
  - at: 0s
    create:
      apiVersion: batch.volcano.sh/v1alpha1
      kind: Job
      metadata: {name: plain}
      spec:
        tasks:
        - name: w
          replicas: 2
          template:
            spec:
              containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
  - {at: 10s, clusterDown: {cluster: cluster-a}}
  until: 90s
"""


def test_plain_job_on_a_lost_cluster_is_placed_again_elsewhere() -> None:
    result = simulator.run(PLAIN)
    assert jobs(result) == {"plain": ("Running", "cluster-b")}
    assert {(p["node"], p["restarts"]) for p in result["pods"]} == {("b", 1)}


def test_plain_job_stays_when_no_other_cluster_can_take_it() -> None:
    result = simulator.run(
        PLAIN.replace('cpu: "2"', 'cpu: "1"').replace("replicas: 2", "replicas: 2\n          minAvailable: 2")
    )
    assert jobs(result)["plain"][1] == "cluster-a"


def test_sim_annotations_on_the_conceptual_template_job_reach_every_child() -> None:
    text = HEAD.replace(
        "          kind: Job\n          spec:\n            tasks:",
        "          kind: Job\n          metadata: {annotations: {hyperjob.io/sim-duration: 20s}}\n"
        "          spec:\n            tasks:",
    ).replace("containers: [", "restartPolicy: Never\n                  containers: [")
    result = simulator.run(text + "  until: 120s\n")
    assert {p for p, _ in jobs(result).values()} == {"Completed"}
    assert hyperjob(result)["phase"] == "Completed"
    assert hyperjob(result)["conditions"] == [
        {"type": "Completed", "status": "True", "reason": "AllChildVCJobsCompleted"}
    ]
    assert {p["finishedAt"] - p["startedAt"] for p in result["pods"]} == {20.0}


def test_plain_jobs_placed_in_one_round_see_each_others_room_taken() -> None:
    two = PLAIN.replace('cpu: "2"', 'cpu: "4"').replace("  - {at: 10s, clusterDown: {cluster: cluster-a}}\n", "")
    two = two.replace(
        "  until: 90s",
        """\
  - at: 0s
    create:
      apiVersion: batch.volcano.sh/v1alpha1
      kind: Job
      metadata: {name: second}
      spec:
        tasks:
        - name: w
          replicas: 3
          template:
            spec:
              containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
  until: 30s""",
    )
    two = two.replace("replicas: 2\n", "replicas: 3\n", 1)
    result = simulator.run(two)
    assert {name: cluster for name, (_, cluster) in jobs(result).items()} == {
        "plain": "cluster-a",
        "second": "cluster-b",
    }


def test_a_child_whose_name_is_taken_waits_and_the_plain_job_stays() -> None:
    squatter = (
        PLAIN.split("  events:\n")[1]
        .replace("name: plain", "name: hj-job-0")
        .replace("  - {at: 10s, clusterDown: {cluster: cluster-a}}\n", "")
        .replace("  until: 90s\n", "")
    )
    result = run(squatter)
    assert jobs(result) == {"hj-job-0": ("Running", "cluster-a")}
    assert next(j for j in result["jobs"])["hyperJob"] is None
    assert hyperjob(result)["phase"] == "Admitted" and hyperjob(result)["splitCount"] == 0


def test_a_lost_cluster_that_comes_back_after_the_move_does_not_change_the_status() -> None:
    # At 55 s cluster-b is back and terminates its copy of hj-job-1, which runs on cluster-c
    # since 40 s: that copy's news is not the child's.
    result = run("  - {at: 10s, clusterDown: {cluster: cluster-b}}\n  - {at: 55s, clusterUp: {cluster: cluster-b}}\n")
    assert jobs(result)["hj-job-1"] == ("Running", "cluster-c")
    phases = [(e["time"], e["phase"]) for e in result["events"] if e["type"] == "HyperJobPhaseChanged"]
    assert phases[-2:] == [(40.0, "Admitted"), (41.0, "Running")] and hyperjob(result)["phase"] == "Running"
