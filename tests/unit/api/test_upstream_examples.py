"""Upstream example manifests, vendored unchanged under ``data/upstream`` (each file's first line
names its repository, path and commit), through ``hyperjob apply --dry-run=client`` (issue 29):
each is valid, or refused naming the kind or field, for a reason docs/api-reference.md gives; and
each valid one runs whole in ``hyperjob simulate`` where there is room."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from hyperjob import simulator
from hyperjob.cli.main import main

UPSTREAM = Path(__file__).parent / "data" / "upstream"
VALID = "valid (dry run)"
# file → what the dry run says: VALID, or the refusal (kind or field, and why).
EXPECTED = {
    "mpi-operator--pi-pi.yaml": VALID,
    "mpi-operator--pi-pi-intel.yaml": VALID,  # worker `command:` written with no value
    "mpi-operator--pi-pi-mpich.yaml": VALID,
    "mpi-operator--tensorflow-benchmarks-tensorflow-benchmarks.yaml": VALID,
    "mpi-operator--horovod-tensorflow-mnist.yaml": VALID,
    "training-operator--mpi-tensorflow-mnist.yaml": VALID,  # kubeflow.org/v1 MPIJob
    "training-operator--mpi-tensorflow-mnist-elastic.yaml": VALID,  # v1, top-level cleanPodPolicy
    "training-operator--pytorch-simple.yaml": VALID,
    "training-operator--pytorch-cpu-demo-demo.yaml": VALID,  # nprocPerNode
    "training-operator--pytorch-elastic-echo-echo.yaml": VALID,  # elasticPolicy
    "training-operator--pytorch-elastic-imagenet-imagenet.yaml": VALID,  # elasticPolicy with metrics
    "training-operator--pytorch-mnist-v1-pytorch_job_mnist_gloo.yaml": VALID,
    "training-operator--tensorflow-simple.yaml": VALID,
    "training-operator--tensorflow-dist-mnist-tf_job_mnist.yaml": VALID,
    "training-operator--tensorflow-distribution_strategy-multi_worker_tfjob.yaml": VALID,  # cleanPodPolicy None
    "training-operator--xgboost-xgboostjob.yaml": "$.kind: unknown kind 'XGBoostJob' in 'kubeflow.org/v1'",
    "training-operator--paddlepaddle-simple-cpu.yaml": "$.kind: unknown kind 'PaddleJob' in 'kubeflow.org/v1'",
    "volcano--job.yaml": VALID,
    "volcano--integrations-mpi-mpi-example.yaml": VALID,
    "volcano--integrations-tensorflow-dist-mnist-tf-dist-mnist-example.yaml": VALID,
    "volcano--hierarchical-jobs-queues.yaml": "metadata.annotations.volcano.sh/hierarchy: hierarchical DRF",
    # Volcano's webhook denies it too (the example exists to show that).
    "volcano--invalid_jobs-minAvailable-webhook-deny.yaml": "$.spec.minAvailable: 5 is more than",
    # `priorityClass` is no PodSpec field: kubectl's strict field validation refuses it as well.
    "volcano--kubecon-2019-china-task-priority-elastic-job.yaml": "Object contains unknown field `priorityClass`",
}


def test_every_vendored_example_has_an_expectation():
    assert sorted(p.name for p in UPSTREAM.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_an_upstream_example_is_valid_or_refused_by_name(name):
    path = UPSTREAM / name
    assert path.read_text().startswith("# upstream: ")
    done = CliRunner().invoke(main, ["apply", "--dry-run=client", "-f", str(path)])
    said = done.output
    if EXPECTED[name] == VALID:
        assert done.exit_code == 0, said
        assert said.strip() and all(line.endswith(VALID) for line in said.splitlines())
    else:
        assert done.exit_code == 1
        assert EXPECTED[name] in said


def simulated(documents: list[dict]) -> dict:
    """The documents created at 1 s on one cluster of four 64-cpu, 8-GPU nodes, run to 60 s."""
    node = {"name": "n", "count": 4, "allocatable": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "8"}}
    scenario = {
        "apiVersion": "hyperjob.io/v1alpha1",
        "kind": "Scenario",
        "metadata": {"name": "upstream"},
        "spec": {
            "clusters": [{"name": "c", "nodes": [node]}],
            "events": [{"at": "1s", "create": document} for document in documents],
            "until": "60s",
        },
    }
    return json.loads(simulator.to_json(simulator.run(yaml.safe_dump(scenario))))


@pytest.mark.parametrize("name", sorted(n for n, said in EXPECTED.items() if said == VALID))
def test_a_valid_upstream_example_runs_whole_in_simulate(name):
    documents = [d for d in yaml.safe_load_all((UPSTREAM / name).read_text()) if d]
    out = simulated(documents)
    assert [e["reason"] for e in out["events"] if e["type"] == "Rejected"] == []
    assert out["jobs"] and {j["phase"] for j in out["jobs"]} == {"Running"}
    assert out["pods"] and {p["phase"] for p in out["pods"]} == {"Running"}
