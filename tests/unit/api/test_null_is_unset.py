"""A field written with no value (YAML null) is unset, as a Kubernetes API server reads it, for
every kind; and a path through a mapping names the key at fault (``mpiReplicaSpecs[Worker]``)."""

from __future__ import annotations

import pytest
import yaml

from hyperjob import api

MPIJOB = """
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: pi, labels: {team: a}}
spec:
  slotsPerWorker: 1
  runPolicy: {cleanPodPolicy: Running}
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers: [{name: launcher, image: mpi-pi, command: [mpirun, /home/mpiuser/pi]}]
    Worker:
      replicas: 2
      template:
        spec:
          containers: [{name: worker, image: mpi-pi, resources: {limits: {cpu: 1}}}]
"""


def mpijob() -> dict:
    return yaml.safe_load(MPIJOB)


def written_as_null(document: dict, *path: str | int) -> dict:
    """``document`` with the field at ``path`` written with no value (``field:``)."""
    *parents, field = path
    here = document
    for step in parents:
        here = here[step]
    here[field] = None
    return document


def without(document: dict, *path: str | int) -> dict:
    *parents, field = path
    here = document
    for step in parents:
        here = here[step]
    here.pop(field, None)
    return document


WORKER_CONTAINER = ("spec", "mpiReplicaSpecs", "Worker", "template", "spec", "containers", 0)


@pytest.mark.parametrize(
    "path",
    [
        (*WORKER_CONTAINER, "command"),
        (*WORKER_CONTAINER, "args"),
        (*WORKER_CONTAINER, "env"),
        ("spec", "runPolicy"),
        ("spec", "runPolicy", "cleanPodPolicy"),
        ("spec", "slotsPerWorker"),
        ("spec", "mpiReplicaSpecs", "Worker", "replicas"),
        ("spec", "mpiReplicaSpecs", "Worker", "template", "metadata"),
        ("metadata", "labels"),
        ("metadata", "namespace"),
    ],
    ids=lambda path: ".".join(str(step) for step in path[-2:]),
)
def test_an_mpijob_field_written_with_no_value_is_unset(path):
    assert api.decode(written_as_null(mpijob(), *path)) == api.decode(without(mpijob(), *path))


JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: j}
spec:
  minAvailable: 1
  plugins: {svc: []}
  policies: [{event: PodEvicted, action: RestartJob}]
  tasks:
  - name: t
    replicas: 1
    template:
      spec:
        containers: [{name: c, image: busybox, command: [sleep, "1"]}]
"""
QUEUE = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: q}
spec: {weight: 2, capability: {cpu: 4}}
"""


@pytest.mark.parametrize(
    ("text", "path"),
    [
        (JOB, ("spec", "plugins")),
        (JOB, ("spec", "policies")),
        (JOB, ("spec", "minAvailable")),
        (JOB, ("spec", "tasks", 0, "template", "spec", "containers", 0, "command")),
        (QUEUE, ("spec", "capability")),
        (QUEUE, ("spec",)),
    ],
    ids=["job-plugins", "job-policies", "job-minAvailable", "job-command", "queue-capability", "queue-spec"],
)
def test_a_volcano_field_written_with_no_value_is_unset(text, path):
    written = written_as_null(yaml.safe_load(text), *path)
    assert api.decode(written) == api.decode(without(yaml.safe_load(text), *path))


def test_a_null_field_in_yaml_text_loads_as_unset():
    text = MPIJOB.replace("command: [mpirun, /home/mpiuser/pi]}]", "command: }]").replace(
        "runPolicy: {cleanPodPolicy: Running}", "runPolicy:"
    )
    (job,) = api.load(text)
    assert isinstance(job, api.Job)
    assert job.spec.tasks[0].template.spec.containers[0].command == []


def test_a_required_field_written_with_no_value_is_still_required():
    with pytest.raises(api.ManifestError) as error:
        api.decode(written_as_null(mpijob(), "spec", "mpiReplicaSpecs", "Worker", "template"))
    assert error.value.path == "$.spec.mpiReplicaSpecs[Worker]"
    assert "template" in error.value.message


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (
            lambda d: d["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0].update(command=5),
            "$.spec.mpiReplicaSpecs[Worker].template.spec.containers[0].command",
        ),
        (
            lambda d: d["spec"]["mpiReplicaSpecs"]["Launcher"].update(replicas=-1),
            "$.spec.mpiReplicaSpecs[Launcher].replicas",
        ),
        (lambda d: d["metadata"]["labels"].update(team=7), "$.metadata.labels[team]"),
    ],
    ids=["worker-command", "launcher-replicas", "label-value"],
)
def test_an_error_inside_a_mapping_names_its_key(change, path):
    document = mpijob()
    change(document)
    with pytest.raises(api.ManifestError) as error:
        api.decode(document)
    assert error.value.path == path


def test_an_unknown_replica_type_is_named_in_the_message():
    document = mpijob()
    document["spec"]["mpiReplicaSpecs"]["Chief"] = document["spec"]["mpiReplicaSpecs"]["Worker"]
    with pytest.raises(api.ManifestError) as error:
        api.decode(document)
    assert error.value.path == "$.spec.mpiReplicaSpecs"
    assert "'Chief'" in error.value.message
