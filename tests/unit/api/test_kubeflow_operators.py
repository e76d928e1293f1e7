"""The Kubeflow kinds as their operators define them (issue 29): every ``cleanPodPolicy``, an empty
``runPolicy``, training-operator's ``kubeflow.org/v1`` MPIJob, PyTorchJob ``nprocPerNode`` and
``elasticPolicy`` (training-operator release-1.9 ``pytorch/envvar.go``, ``elastic.go``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from hyperjob import api, simulator
from hyperjob import jobcore as jc

QUEUES = {"default": "Open"}
MPIJOB_V2 = """
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: pi}
spec:
  slotsPerWorker: 1
  runPolicy: {cleanPodPolicy: Running}
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers: [{name: mpi, image: mpi-pi, command: [mpirun, -n, "2", /home/mpiuser/pi]}]
    Worker:
      replicas: 2
      template:
        spec:
          containers: [{name: mpi, image: mpi-pi, resources: {limits: {cpu: 1}}}]
"""
# training-operator release-1.9 examples/mpi/tensorflow-mnist.yaml, cut down.
MPIJOB_V1 = MPIJOB_V2.replace("kubeflow.org/v2beta1", "kubeflow.org/v1")


def decoded(text: str, change=lambda spec: None) -> api.Job:
    document = yaml.safe_load(text)
    change(document["spec"])
    job = api.decode(document)
    assert isinstance(job, api.Job)
    return job


@pytest.mark.parametrize("policy", ["None", "All", "Running"])
@pytest.mark.parametrize("kind", ["MPIJob", "PyTorchJob", "TFJob"])
def test_every_clean_pod_policy_is_carried_to_the_job_controller(kind, policy):
    text = {"MPIJob": MPIJOB_V2, "PyTorchJob": PYTORCH, "TFJob": TFJOB}[kind]
    job = decoded(text, lambda spec: spec.update(runPolicy={"cleanPodPolicy": policy}))
    assert job.metadata.annotations[api.CLEAN_POD_POLICY_ANNOTATION] == policy  # jobcore cleans the pods so


@pytest.mark.parametrize("kind", ["MPIJob", "PyTorchJob", "TFJob"])
def test_an_empty_run_policy_is_the_default(kind):
    text = {"MPIJob": MPIJOB_V2, "PyTorchJob": PYTORCH, "TFJob": TFJOB}[kind]
    assert decoded(text, lambda spec: spec.update(runPolicy={})) == decoded(
        text, lambda spec: spec.pop("runPolicy", None)
    )


# ------------------------------------------------------------------------------------ v1 MPIJob
def test_a_v1_mpijob_runs_as_the_v2beta1_one_and_says_which_it_was():
    v1, v2 = decoded(MPIJOB_V1), decoded(MPIJOB_V2)
    assert v1.metadata.annotations["hyperjob.io/source-kind"] == "kubeflow.org/v1/MPIJob"
    assert v1.spec == v2.spec


def test_a_v1_mpijobs_top_level_clean_pod_policy_is_accepted():
    job = decoded(MPIJOB_V1, lambda spec: (spec.pop("runPolicy"), spec.update(cleanPodPolicy="None")))
    assert [t.name for t in job.spec.tasks] == ["launcher", "worker"]
    assert job.metadata.annotations[api.CLEAN_POD_POLICY_ANNOTATION] == "None"


def test_a_v1_main_container_must_be_the_workers_first():
    with pytest.raises(api.ManifestError) as error:
        decoded(MPIJOB_V1, lambda spec: spec.update(mainContainer="sidecar"))
    assert error.value.path == "$.spec.mainContainer"
    assert decoded(MPIJOB_V1, lambda spec: spec.update(mainContainer="mpi")).spec.tasks


def test_v2beta1_fields_are_unknown_in_v1():
    with pytest.raises(api.ManifestError) as error:
        decoded(MPIJOB_V1, lambda spec: spec.update(mpiImplementation="Intel"))
    assert error.value.path == "$.spec"
    assert "mpiImplementation" in error.value.message


# --------------------------------------------------------------------------------- nprocPerNode
PYTORCH = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: mnist}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers: [{name: pytorch, image: mnist, resources: {limits: {nvidia.com/gpu: 8}}}]
    Worker:
      replicas: 3
      template:
        spec:
          containers: [{name: pytorch, image: mnist, resources: {limits: {nvidia.com/gpu: 8}}}]
"""
TFJOB = """
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: dist}
spec:
  tfReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers: [{name: tensorflow, image: tf}]
"""


def pod_env(job: api.Job, pod: str) -> dict[str, str]:
    record = jc.decide(jc.admit(job, QUEUES, 0.0), jc.PodGroupAdmitted(), 0.0)[0]
    return record.pods[pod].run.env


@pytest.mark.parametrize(
    ("nproc", "world"), [("8", "32"), ("auto", "4"), ("gpu", "4"), (None, "4")], ids=["8", "auto", "gpu", "unset"]
)
def test_world_size_is_pods_times_processes_per_pod(nproc, world):
    job = decoded(PYTORCH, lambda spec: spec.update(nprocPerNode=nproc) if nproc else None)
    env = pod_env(job, "mnist-worker-1")
    assert (env["WORLD_SIZE"], env["RANK"], env["PET_NODE_RANK"]) == (world, "2", "2")
    assert (env["PET_NPROC_PER_NODE"], env["PET_NNODES"]) == (nproc or "auto", "4")


# ----------------------------------------------------------------------------------- elastic
# training-operator release-1.9 examples/pytorch/elastic/echo/echo.yaml
ELASTIC = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: echo}
spec:
  elasticPolicy: {rdzvBackend: c10d, minReplicas: 1, maxReplicas: 3, maxRestarts: 100}
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      template:
        metadata: {annotations: {hyperjob.io/sim-duration: 60s}}
        spec:
          containers:
          - name: pytorch
            image: kubeflow/pytorch-elastic-example-echo:latest
            command: [python, -m, torch.distributed.run, --rdzv_backend=c10d, ./echo.py]
            resources: {limits: {cpu: 4}}
"""


def test_an_elastic_pytorchjob_is_a_gang_of_min_replicas_growing_to_max():
    job = decoded(ELASTIC)
    assert [(t.name, t.replicas) for t in job.spec.tasks] == [("worker", 3)]
    assert (job.spec.min_available, job.spec.min_success) == (1, 1)
    env = pod_env(job, "echo-worker-2")
    assert {k: v for k, v in env.items() if k.startswith("PET_")} == {
        "PET_RDZV_ENDPOINT": "echo-worker-0.echo:23456",
        "PET_RDZV_BACKEND": "c10d",
        "PET_NNODES": "1:3",
        "PET_MAX_RESTARTS": "100",
        "PET_NPROC_PER_NODE": "auto",
    }


def test_an_elastic_pytorchjob_with_a_master_keeps_the_master_in_its_gang():
    job = decoded(PYTORCH, lambda spec: spec.update(elasticPolicy={"minReplicas": 2, "maxReplicas": 5}))
    assert [(t.name, t.replicas) for t in job.spec.tasks] == [("master", 1), ("worker", 5)]
    assert (job.spec.min_available, job.spec.min_success) == (3, None)


@pytest.mark.parametrize(
    ("policy", "bounds"),
    [({"maxReplicas": 4}, (4, 4)), ({"minReplicas": 2}, (2, 2)), ({}, (3, 3))],
    ids=["max-only", "min-only", "neither"],
)
def test_elastic_bounds_default_as_the_operator_does(policy, bounds):
    job = decoded(PYTORCH, lambda spec: spec.update(elasticPolicy=policy))
    assert (job.spec.min_available - 1, job.spec.tasks[1].replicas) == bounds


def in_a_hyperjob(template_text: str, change=lambda spec: None) -> dict[str, Any]:
    template = yaml.safe_load(template_text)
    template.pop("metadata")
    change(template["spec"])
    replicas = sum(r.get("replicas", 1) for r in template["spec"]["pytorchReplicaSpecs"].values())
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "HyperJob",
        "metadata": {"name": "h"},
        "spec": {
            "template": template,
            "splitPolicy": {"strategy": "ByCluster", "clusters": [{"name": "a", "replicas": replicas}]},
        },
    }


@pytest.mark.parametrize(
    ("text", "change", "path"),
    [
        (ELASTIC, lambda spec: None, "$.spec.template.spec.elasticPolicy"),
        (PYTORCH, lambda spec: spec.update(nprocPerNode="8"), "$.spec.template.spec.nprocPerNode"),
    ],
    ids=["elasticPolicy", "nprocPerNode-number"],
)
def test_what_a_hyperjobs_world_cannot_honour_is_refused_by_name_in_its_template(text, change, path):
    with pytest.raises(api.ManifestError) as error:
        api.decode(in_a_hyperjob(text, change))
    assert error.value.path == path


def test_nproc_per_node_auto_is_taken_in_a_hyperjob_template():
    hyperjob = api.decode(in_a_hyperjob(PYTORCH, lambda spec: spec.update(nprocPerNode="auto")))
    assert isinstance(hyperjob, api.HyperJob)
    assert hyperjob.spec.plugins["pytorch"] == ["--master=master", "--port=23456"]


def _run(events: list[dict[str, Any]]) -> dict[str, Any]:
    scenario = {
        "apiVersion": "hyperjob.io/v1alpha1",
        "kind": "Scenario",
        "metadata": {"name": "elastic"},
        "spec": {
            "clusters": [{"name": "c", "nodes": [{"name": "n", "allocatable": {"cpu": "8", "memory": "64Gi"}}]}],
            "events": events,
            "until": "30s",
        },
    }
    return json.loads(simulator.to_json(simulator.run(yaml.safe_dump(scenario))))


BLOCKER = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: blocker}
spec:
  tasks:
  - name: t
    replicas: 1
    template:
      metadata: {annotations: {hyperjob.io/sim-duration: 10s}}
      spec:
        restartPolicy: Never
        containers: [{name: c, image: busybox, resources: {limits: {cpu: 4}}}]
"""


def test_an_elastic_pytorchjob_starts_with_room_for_min_replicas_and_grows_when_room_appears():
    elastic = yaml.safe_load(ELASTIC)
    elastic["spec"]["elasticPolicy"]["maxReplicas"] = 2
    out = _run([{"at": "0s", "create": yaml.safe_load(BLOCKER)}, {"at": "1s", "create": elastic}])
    pods = {p["name"]: p for p in out["pods"]}
    blocker_done = pods["blocker-t-0"]["finishedAt"]
    assert pods["echo-worker-0"]["startedAt"] < blocker_done  # room for minReplicas: it starts at once
    assert pods["echo-worker-1"]["startedAt"] >= blocker_done  # the second when the blocker's room frees
    assert pods["echo-worker-1"]["phase"] == "Running"
