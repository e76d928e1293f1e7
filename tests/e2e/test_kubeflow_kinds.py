"""Kubeflow's kinds managed by the kind applied (issue 29): apply, a server dry run, get, describe and
delete (by name and -f) all say ``mpijob``/``pytorchjob``/``tfjob``; ``delete -f`` deletes in the
reverse order of the file, waiting for each workload, so a Queue and the job that uses it go cleanly."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import Cli

pytestmark = pytest.mark.e2e

QUEUE = """apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: kf-q}
spec: {weight: 1}
"""
MPIJOB = """apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: kf-pi}
spec:
  runPolicy:
    cleanPodPolicy: None
    schedulingPolicy: {queue: kf-q}
  mpiReplicaSpecs:
    Launcher:
      template:
        metadata: {annotations: {hyperjob.io/sim-duration: 300s}}
        spec:
          containers: [{name: mpi, image: mpi-pi, command: [mpirun, pi], resources: {limits: {cpu: 1}}}]
    Worker:
      replicas: 1
      template:
        spec:
          containers: [{name: mpi, image: mpi-pi, command: null, resources: {limits: {cpu: 1}}}]
"""
PYTORCHJOB = """apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: kf-torch}
spec:
  nprocPerNode: "2"
  pytorchReplicaSpecs:
    Master:
      template:
        metadata: {annotations: {hyperjob.io/sim-duration: 300s}}
        spec:
          containers: [{name: pytorch, image: mnist, resources: {limits: {cpu: 1}}}]
"""


def test_kubeflow_jobs_are_applied_listed_described_and_deleted_by_their_kind(cli: Cli, tmp_path: Path) -> None:
    both = tmp_path / "mpi.yaml"
    both.write_text(QUEUE + "---\n" + MPIJOB)
    torch = tmp_path / "torch.yaml"
    torch.write_text(PYTORCHJOB)
    try:
        assert cli.run("apply", "-f", str(torch), "--dry-run=server").stdout == (
            "pytorchjob/kf-torch created (server dry run)\n"
        )
        assert cli.run("apply", "-f", str(torch)).stdout == "pytorchjob/kf-torch created\n"
        assert cli.run("apply", "-f", str(both)).stdout.splitlines() == ["queue/kf-q created", "mpijob/kf-pi created"]
        assert cli.run("apply", "-f", str(both), "--dry-run=server").stdout.splitlines() == [
            "queue/kf-q unchanged (server dry run)",
            "mpijob/kf-pi unchanged (server dry run)",
        ]
        listed = cli.run("get", "mpijobs").stdout.splitlines()
        assert listed[0].split() == ["NAME", "STATE", "AGE"]
        assert [line.split()[0] for line in listed[1:]] == ["kf-pi"]  # not the PyTorchJob
        assert [line.split()[0] for line in cli.run("get", "pytorchjob").stdout.splitlines()[1:]] == ["kf-torch"]
        state = cli.run("get", "mpijob", "kf-pi", "-o", "jsonpath={.status.conditions[-1:].type}").stdout.strip()
        assert state in ("Created", "Running")  # the operators' STATE, as kubectl get mpijobs reads it
        assert "kf-pi" in cli.run("describe", "mpijob", "kf-pi").stdout
        wrong = cli.run("describe", "tfjob", "kf-pi", check=False)
        assert (wrong.returncode, "not found" in wrong.stderr) == (1, True)
        wrong = cli.run("delete", "pytorchjob", "kf-pi", check=False)
        assert (wrong.returncode, wrong.stderr) == (1, "error: pytorchjob/kf-pi: PyTorchJob 'kf-pi' not found\n")
        assert cli.run("delete", "pytorchjob", "kf-torch").stdout.splitlines()[-1] == "pytorchjob/kf-torch deleted"
        deleted = cli.run("delete", "-f", str(both), check=False)
        assert (deleted.returncode, deleted.stderr) == (0, "")
        assert deleted.stdout.splitlines()[-2:] == ["mpijob/kf-pi deleted", "queue/kf-q deleted"]
    finally:
        cli.run("delete", "-f", str(both), "-f", str(torch), "--ignore-not-found", check=False)
    assert cli.run("get", "mpijobs").stdout.splitlines()[1:] == []


JOB = """apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: kf-user}
spec:
  queue: kf-q
  tasks:
  - name: w
    replicas: 1
    template:
      metadata: {annotations: {hyperjob.io/sim-duration: 300s}}
      spec: {containers: [{name: c, image: x, resources: {requests: {cpu: '1'}}}]}
"""


def test_a_file_that_applied_cleanly_deletes_cleanly_last_object_first(cli: Cli, tmp_path: Path) -> None:
    file = tmp_path / "queue-and-job.yaml"
    file.write_text(QUEUE + "---\n" + JOB)
    cli.run("apply", "-f", str(file))
    try:
        deleted = cli.run("delete", "-f", str(file), check=False)
        assert (deleted.returncode, deleted.stderr) == (0, "")
        assert deleted.stdout.splitlines() == ["job/kf-user deleting", "job/kf-user deleted", "queue/kf-q deleted"]
    finally:
        cli.run("delete", "-f", str(file), "--ignore-not-found", check=False)
    assert "kf-q" not in cli.run("get", "queues").stdout
