"""A child the splitter withdraws for a gang retry stops taking the room it was promised, so the
HyperJob's new plan (its children named as before) can go back to that cluster once it has room
(issue 28, found under ``--chaos`` with Incremental dispatch). Driven through the real splitter by
the simulator, in virtual time."""

from __future__ import annotations

from hyperjob import simulator

# blocker (a plain Job held to a by its node selector) and patient (preferring a, Incremental) are
# submitted together: the splitter plans patient on a before a's summary shows blocker there, the
# global scheduler finds no room for it on a and asks for a new plan (a gang retry), and patient
# waits for a, the only cluster tried for its first 60 s. blocker ends at 16 s.
SCENARIO = """\
apiVersion: hyperjob.io/v1alpha1
kind: Scenario
metadata: {name: gang-retry-room}
spec:
  clusters:
  - name: a
    nodes:
    - {name: a-node, allocatable: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8"}, labels: {site: a}}
  - name: b
    nodes:
    - {name: b-node, allocatable: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8"}, labels: {site: b}}
  events:
  - at: 0s
    create:
      apiVersion: batch.volcano.sh/v1alpha1
      kind: Job
      metadata: {name: blocker}
      spec:
        minAvailable: 8
        tasks:
        - name: burn
          replicas: 8
          template:
            metadata:
              annotations: {hyperjob.io/sim-duration: 15s}
            spec:
              restartPolicy: Never
              nodeSelector: {site: a}
              containers:
              - {name: main, image: burn, resources: {requests: {cpu: "4", nvidia.com/gpu: "1"}}}
  - at: 0s
    create:
      apiVersion: batch.volcano.sh/v1alpha1
      kind: HyperJob
      metadata: {name: patient}
      spec:
        clusterAffinity:
          preferred:
          - {weight: 50, preference: {clusterNames: [a]}}
        dispatch: {strategy: Incremental, initialClusters: 1, widenAfter: 60s}
        template:
          apiVersion: batch.volcano.sh/v1alpha1
          kind: Job
          spec:
            minAvailable: 8
            tasks:
            - name: trainer
              replicas: 8
              template:
                spec:
                  containers:
                  - {name: trainer, image: train, resources: {requests: {cpu: "4", nvidia.com/gpu: "1"}}}
  until: 90s
"""


def test_a_child_withdrawn_by_a_gang_retry_no_longer_holds_its_room_against_its_own_new_plan() -> None:
    result = simulator.run(SCENARIO)
    pods = [p for p in result["pods"] if p["job"] == "patient-job-0"]
    assert len(pods) == 8 and {p["node"] for p in pods} == {"a-node"}  # not widened to b after 60 s
    assert max(p["startedAt"] for p in pods) < 60.0  # on a once blocker had ended, before the widening
    [patient] = [h for h in result["hyperJobs"] if h["name"] == "patient"]
    assert patient["placement"] == {"a": 8}
