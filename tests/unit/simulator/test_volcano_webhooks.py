"""Volcano's webhook and CRD checks, as ``hyperjob simulate`` meets them in ``create`` events.

Each manifest below is refused by Volcano or Kubernetes (volcano-sh/volcano ed72c7c81,
``pkg/webhooks/admission``; the CRDs' bounds), so it must be a ``Rejected`` event naming the field
and leave nothing behind. The first is ``example/invalid_jobs/duplicatedPolicyEvent-webhook-deny.yaml``
unchanged; it ran on main before issue 18.
"""

from __future__ import annotations

import textwrap

import pytest
import yaml

from hyperjob import simulator

DUPLICATED_POLICY_EVENT = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: test-job-webhook-disallow
spec:
  schedulerName: volcano
  minAvailable: 1
  tasks:
    - replicas: 2
      name: task-1
      template:
        metadata:
          name: web-1
        spec:
          containers:
            - image: nginx
              imagePullPolicy: IfNotPresent
              name: nginx
              resources:
                requests:
                  cpu: "1"
          restartPolicy: OnFailure
  policies:
    - event: PodFailed
      action: RestartJob
    - event: PodFailed  ## this job will be rejected because one event should not have different action
      action: AbortJob
"""


def job(name: str, spec_extra: str = "", task_extra: str = "", pod_extra: str = "") -> str:
    return f"""\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: {name}}}
spec:
{textwrap.indent(spec_extra, "  ")}  tasks:
  - name: w
    replicas: 2
{textwrap.indent(task_extra, "    ")}    template:
      spec:
{textwrap.indent(pod_extra, "        ")}        containers: [{{name: c, image: x}}]
"""


def queue(name: str, spec: str) -> str:
    return f"apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {{name: {name}}}\nspec: {spec}\n"


def scenario(manifest: str) -> str:
    document = {
        "apiVersion": "hyperjob.io/v1alpha1",
        "kind": "Scenario",
        "metadata": {"name": "webhooks"},
        "spec": {
            "clusters": [{"name": "c1", "nodes": [{"name": "n", "allocatable": {"cpu": "8", "memory": "8Gi"}}]}],
            "events": [{"at": "1s", "create": yaml.safe_load(manifest)}],
            "until": "5s",
        },
    }
    return yaml.safe_dump(document)


CASES = [
    (
        "duplicated-policy-event",
        DUPLICATED_POLICY_EVENT,
        "$.spec",
        "duplicate event PodFailed across different policies",
    ),
    (
        "duplicated-task-policy-event",
        job(
            "j",
            task_extra="policies:\n- {event: PodEvicted, action: RestartTask}\n"
            "- {events: [PodEvicted], action: AbortJob}\n",
        ),
        "$.spec.tasks[0]",
        "policies[1]: duplicate event PodEvicted",
    ),
    (
        "controller-event-in-a-policy",
        job("j", spec_extra="policies:\n- {event: PodRunning, action: AbortJob}\n"),
        "$.spec",
        "PodRunning is not an event a policy may name",
    ),
    (
        "event-policy-without-action",
        job("j", spec_extra="policies:\n- {event: PodFailed}\n"),
        "$.spec",
        "policies[0].action: SyncJob is not a policy action",
    ),
    (
        "duplicated-exit-code",
        job("j", spec_extra="policies:\n- {exitCode: 3, action: AbortJob}\n- {exitCode: 3, action: RestartJob}\n"),
        "$.spec",
        "duplicate exitCode 3",
    ),
    (
        "star-and-another-event",
        job("j", spec_extra="policies:\n- {event: '*', action: AbortJob}\n- {event: PodFailed, action: RestartJob}\n"),
        "$.spec",
        "event * leaves no room",
    ),
    ("replicas-over-int32", job("j", task_extra="replicas: 2147483648\n"), "$.spec.tasks[0].replicas", "<= 2147483647"),
    (
        "min-available-over-int32",
        job("j", spec_extra="minAvailable: 4294967296\n"),
        "$.spec.minAvailable",
        "<= 2147483647",
    ),
    ("depends-on-unknown-task", job("j", task_extra="dependsOn: {name: [db]}\n"), "$.spec", "'db' is not a task"),
    (
        "topology-policy-not-in-enum",
        job("j", task_extra="topologyPolicy: numa\n"),
        "$.spec.tasks[0].topologyPolicy",
        "",
    ),
    (
        "resource-claims",
        job("j", pod_extra="resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu-template}]\n"),
        "$.spec.tasks[0].template.spec",
        "resourceClaims: dynamic resource allocation is not supported",
    ),
    ("queue-weight-over-65535", queue("q", "{weight: 70000}"), "$.spec.weight", "<= 65535"),
    (
        "queue-guarantee-over-deserved",
        queue("q", "{guarantee: {resource: {cpu: 4}}, deserved: {cpu: 2}}"),
        "$.spec",
        "deserved.cpu: 2 must be ≥ guarantee.resource.cpu (4)",
    ),
    (
        "queue-deserved-over-capability",
        queue("q", "{deserved: {cpu: 8}, capability: {cpu: 4}}"),
        "$.spec",
        "must be ≤ capability.cpu",
    ),
    (
        "queue-hierarchy-weights-short",
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata:\n  name: q\n  annotations:\n"
        "    volcano.sh/hierarchy: root/sci\n    volcano.sh/hierarchy-weights: '1'\n",
        "$",
        "must have one weight per level",
    ),
    (
        "queue-hierarchy-weight-zero",
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata:\n  name: q\n  annotations:\n"
        "    volcano.sh/hierarchy: root/sci\n    volcano.sh/hierarchy-weights: 1/0\n",
        "$",
        "must be more than 0",
    ),
    (
        "queue-nodegroup-resource-limits",
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata:\n  name: q\n  annotations:\n"
        '    volcano.sh/nodegroup-resource-limits: \'{"g1": {"cpu": "100"}}\'\n',
        "$",
        "per-nodegroup queue limits are not supported",
    ),
    (
        "priority-class-above-user-range",
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: top}\nvalue: 1000000001\n",
        "$",
        "more than 1,000,000,000",
    ),
]


@pytest.mark.parametrize(("manifest", "path", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_volcano_refuses_it_so_simulate_rejects_it(manifest: str, path: str, fragment: str) -> None:
    result = simulator.run(scenario(manifest))
    rejected = [e for e in result["events"] if e["type"] == "Rejected"]
    assert len(rejected) == 1, result["events"]
    assert rejected[0]["reason"].startswith(path + ":"), rejected[0]["reason"]
    assert fragment in rejected[0]["reason"]
    assert result["jobs"] == [] and result["pods"] == []


def test_weight_zero_is_defaulted_to_one_as_volcanos_mutating_webhook_does() -> None:
    result = simulator.run(scenario(queue("q", "{weight: 0}")))
    assert [e for e in result["events"] if e["type"] == "Rejected"] == []
