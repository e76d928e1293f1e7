"""Loading manifests: every kind, both HyperJob forms, and rejections that name the field."""

import textwrap

import pytest

from hyperjob import api
from hyperjob.api import ManifestError

JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: job1}
spec:
  minAvailable: 2
  queue: default
  tasks:
  - name: worker
    replicas: 2
    template:
      spec:
        containers:
        - name: main
          image: busybox
          resources: {requests: {cpu: "1", memory: 1Gi}}
"""

CONCEPTUAL = """
apiVersion: batch.volcano.sh/v1alpha1
kind: HyperJob
metadata: {name: llm}
spec:
  template:
    apiVersion: batch.volcano.sh/v1alpha1
    kind: Job
    spec:
      minAvailable: 64
      queue: global-ai
      tasks:
      - name: trainer
        replicas: 64
        template:
          spec:
            containers:
            - name: trainer
              image: example.com/llm-train:latest
              resources: {requests: {cpu: "8", memory: 64Gi, nvidia.com/gpu: "1"}}
            restartPolicy: OnFailure
  splitPolicy:
    strategy: ByCluster
    clusters:
    - {name: cluster-a, replicas: 32}
    - {name: cluster-b, replicas: 32}
"""

UPSTREAM = """
apiVersion: training.volcano.sh/v1alpha1
kind: HyperJob
metadata: {name: llm}
spec:
  minAvailable: 2
  maxDomains: 2
  plugins: {pytorch: ["--master=trainer", "--port=23456"]}
  replicatedJobs:
  - name: trainer
    replicas: 1
    clusterNames: [cluster-a, cluster-b]
    splitPolicy: {mode: static, accelerators: 64, acceleratorType: nvidia.com/gpu}
    templateSpec:
      queue: global-ai
      tasks:
      - name: trainer
        replicas: 64
        template:
          spec:
            containers:
            - name: trainer
              resources: {requests: {nvidia.com/gpu: "1"}}
"""


def test_job_loads_with_typed_fields():
    [job] = api.load(JOB)
    assert isinstance(job, api.Job)
    assert job.spec.tasks[0].replicas == 2
    assert job.spec.tasks[0].template.spec.containers[0].resources.requests == {"cpu": "1", "memory": "1Gi"}


def test_conceptual_hyperjob_normalizes_to_one_replicated_job_named_job():
    [hyperjob] = api.load(CONCEPTUAL)
    assert isinstance(hyperjob, api.HyperJob)
    [rj] = hyperjob.spec.replicated_jobs
    assert rj.name == "job"
    assert rj.cluster_names == ["cluster-a", "cluster-b"]
    assert [(c.name, c.replicas) for c in rj.split_policy.clusters] == [("cluster-a", 32), ("cluster-b", 32)]


def test_upstream_hyperjob_keeps_its_fields():
    [hyperjob] = api.load(UPSTREAM)
    assert hyperjob.spec.min_available == 2 and hyperjob.spec.max_domains == 2
    assert hyperjob.spec.plugins == {"pytorch": ["--master=trainer", "--port=23456"]}
    assert hyperjob.spec.replicated_jobs[0].split_policy.accelerators == 64


def test_multi_document_yaml_loads_every_kind():
    queue = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: global-ai}\nspec: {weight: 2}\n"
    pc = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n"
    docs = api.load("\n---\n".join([queue, JOB, pc]))
    assert [type(d).__name__ for d in docs] == ["Queue", "Job", "PriorityClass"]


def replace(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


@pytest.mark.parametrize(
    ("text", "path", "words"),
    [
        (replace(JOB, "minAvailable: 2", "minAvailable: 2\n  bogus: 1"), "$.spec", "unknown field `bogus`"),
        (replace(JOB, "replicas: 2", "replicas: -2"), "$.spec.tasks[0].replicas", ">= 0"),
        (replace(JOB, "replicas: 2", "replicas: two"), "$.spec.tasks[0].replicas", "Expected `int`"),
        (
            replace(JOB, "minAvailable: 2", "minAvailable: 3"),
            "$.spec.minAvailable",
            "more than the job's total replicas",
        ),
        (
            replace(JOB, 'cpu: "1"', 'cpu: "lots"'),
            "$.spec.tasks[0].template.spec.containers[0].resources.requests.cpu",
            "not a quantity",
        ),
        (
            replace(
                CONCEPTUAL,
                "replicas: 32}\n    - {name: cluster-b, replicas: 32}",
                "replicas: 32}\n    - {name: cluster-b, replicas: 30}",
            ),
            "$.spec.splitPolicy.clusters",
            "add up to 62, but the template has 64",
        ),
        (
            replace(UPSTREAM, "accelerators: 64", "accelerators: 48"),
            "$.spec.replicatedJobs[0].splitPolicy.accelerators",
            "does not match",
        ),
        (
            replace(UPSTREAM, "replicas: 1\n", "replicas: 3\n"),
            "$.spec.replicatedJobs[0].replicas",
            "must be 1 or absent",
        ),
        (replace(JOB, "kind: Job", "kind: Jbo"), "$.kind", "unknown kind 'Jbo'"),
        ("spec: [\n", "$", "not valid YAML"),
    ],
    ids=[
        "unknown-field",
        "negative-replicas",
        "wrong-type",
        "min-available-too-big",
        "bad-quantity",
        "split-does-not-add-up",
        "accelerators-mismatch",
        "replicas-with-split",
        "unknown-kind",
        "malformed-yaml",
    ],
)
def test_bad_manifest_is_rejected_naming_the_field(text, path, words):
    with pytest.raises(ManifestError) as caught:
        api.load(text)
    assert caught.value.path == path
    assert words in caught.value.message


def test_duplicate_task_names_are_rejected():
    text = JOB + textwrap.indent("- name: worker\n  replicas: 1\n  template: {spec: {containers: [{name: c}]}}\n", "  ")
    with pytest.raises(ManifestError, match=r"\$\.spec\.tasks\[1\]\.name: duplicate task name 'worker'"):
        api.load(text)


def test_references_to_missing_cluster_and_closed_queue_name_the_field():
    [hyperjob] = api.load(CONCEPTUAL)
    with pytest.raises(ManifestError, match=r"splitPolicy\.clusters\[1\]\.name: cluster 'cluster-b' does not exist"):
        api.check_references(hyperjob, clusters={"cluster-a"}, queues={"global-ai": "Open"})
    with pytest.raises(ManifestError, match="queue 'global-ai' is Closed"):
        api.check_references(hyperjob, clusters={"cluster-a", "cluster-b"}, queues={"global-ai": "Closed"})
    api.check_references(hyperjob, clusters={"cluster-a", "cluster-b"}, queues={"global-ai": "Open"})


def test_encode_round_trips_a_manifest():
    [job] = api.load(JOB)
    assert api.decode(api.encode(job)) == job


def test_both_forms_read_the_hyperjob_wide_fields_alike():
    # One base declares them (minAvailable, maxDomains, plugins, childFailurePolicy): what the
    # conceptual form says of them reaches the normalized HyperJob as the upstream form's would.
    shared = (
        "  minAvailable: 2\n  maxDomains: 2\n  plugins: {pytorch: [--master=trainer, --port=23456]}\n"
        "  childFailurePolicy: RePlaceChild\n"
    )
    [conceptual] = api.load(replace(CONCEPTUAL, "spec:\n  template:", "spec:\n" + shared + "  template:"))
    [upstream] = api.load(
        replace(UPSTREAM, "  minAvailable: 2\n  maxDomains: 2\n", shared).replace(
            '  plugins: {pytorch: ["--master=trainer", "--port=23456"]}\n', "", 1
        )
    )
    fields = ("min_available", "max_domains", "plugins", "child_failure_policy")
    got = {f: getattr(conceptual.spec, f) for f in fields}
    assert got == {f: getattr(upstream.spec, f) for f in fields}
    assert got["child_failure_policy"] == "RePlaceChild" and got["max_domains"] == 2
    assert api.encode(conceptual)["spec"]["childFailurePolicy"] == "RePlaceChild"
