"""Kubeflow's MPIJob, PyTorchJob and TFJob: translated into the Volcano Job their operator gang-schedules
with Volcano (mpi-operator ``pkg/controller/podgroup.go``, ``mpi_job_controller.go``; training-operator
``pytorch/envvar.go``, ``tensorflow/tensorflow.go``), and what their pods see."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import yaml

from hyperjob import api, simulator
from hyperjob import jobcore as jc

GUIDE = pathlib.Path(__file__).parent / "data" / "mpijob-volcano-hpc-guide.yaml"
QUEUES = {"default": "Open", "research": "Open"}


def guide() -> dict[str, Any]:
    return yaml.safe_load(GUIDE.read_text())


def decoded(document: dict[str, Any]) -> api.Job:
    job = api.decode(document)
    assert isinstance(job, api.Job)
    return job


def simulate(document: dict[str, Any], gpus: int) -> dict[str, Any]:
    scenario = {
        "apiVersion": "hyperjob.io/v1alpha1",
        "kind": "Scenario",
        "metadata": {"name": "mpijob"},
        "spec": {
            "clusters": [
                {
                    "name": "c",
                    "nodes": [
                        {
                            "name": "n",
                            "count": 1,
                            "allocatable": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": str(gpus)},
                        }
                    ],
                }
            ],
            "events": [{"at": "0s", "create": document}],
            "until": "30s",
        },
    }
    return json.loads(simulator.to_json(simulator.run(yaml.safe_dump(scenario))))


# ---------------------------------------------------------------------------------- the guide's MPIJob
def test_the_guides_mpijob_is_one_gang_of_a_launcher_and_four_one_gpu_workers():
    job = decoded(guide())
    assert [(t.name, t.replicas) for t in job.spec.tasks] == [("launcher", 1), ("worker", 4)]
    assert job.spec.min_available == 5  # the operator's PodGroup: NUM(workers) + 1
    worker = job.spec.tasks[1].template.spec.containers[0]
    assert worker.resources.requests == {"nvidia.com/gpu": 1}  # requests default to limits
    assert job.spec.plugins == {
        "mpi": [
            "--master=launcher",
            "--worker=worker",
            "--hostfile=/etc/mpi/hostfile",
            "--slots-per-worker=1",
            "--mpi-implementation=OpenMPI",
        ],
        "ssh": ["--ssh-key-file-path=/root/.ssh"],
        "svc": [],
    }
    assert job.metadata.annotations["hyperjob.io/source-kind"] == "kubeflow.org/v2beta1/MPIJob"


def test_the_guides_mpijob_runs_as_one_gang_where_it_fits():
    out = simulate(guide(), gpus=4)
    assert [(p["name"], p["phase"]) for p in out["pods"]] == [("tensorflow-benchmarks-launcher-0", "Running")] + [
        (f"tensorflow-benchmarks-worker-{i}", "Running") for i in range(4)
    ]
    assert out["podGroups"][0]["minMember"] == 5


def test_the_guides_mpijob_stays_wholly_pending_where_its_gang_cannot_fit():
    out = simulate(guide(), gpus=3)
    assert out["pods"] == []  # not even the launcher, which needs no GPU
    assert (out["podGroups"][0]["phase"], out["jobs"][0]["phase"]) == ("Pending", "Pending")
    assert out["podGroups"][0]["minResources"]["nvidia.com/gpu"] == 4


def test_the_launcher_sees_the_operators_environment_and_hostfile():
    record = jc.admit(decoded(guide()), QUEUES, 0.0)
    launcher = jc.decide(record, jc.PodGroupAdmitted(), 0.0)[0].pods["tensorflow-benchmarks-launcher-0"]
    hosts = [f"tensorflow-benchmarks-worker-{i}.tensorflow-benchmarks" for i in range(4)]
    assert launcher.run.env["MPI_HOST"] == ",".join(hosts)
    assert launcher.run.files["/etc/mpi/hostfile"] == "".join(f"{h} slots=1\n" for h in hosts)
    assert {
        k: launcher.run.env[k]
        for k in (
            "K_MPI_JOB_ROLE",
            "OMPI_MCA_orte_default_hostfile",
            "OMPI_MCA_orte_keep_fqdn_hostnames",
            "OMPI_MCA_orte_set_default_slots",
            "NVIDIA_VISIBLE_DEVICES",
        )
    } == {
        "K_MPI_JOB_ROLE": "launcher",
        "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
        "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
        "OMPI_MCA_orte_set_default_slots": "1",
        "NVIDIA_VISIBLE_DEVICES": "",
    }
    assert launcher.run.command[:2] == ["mpirun", "--allow-run-as-root"]
    assert launcher.run.restart_policy == "OnFailure" and "/root/.ssh/id_rsa" in launcher.run.files


def test_workers_run_sshd_and_see_no_hostfile():
    record = jc.decide(jc.admit(decoded(guide()), QUEUES, 0.0), jc.PodGroupAdmitted(), 0.0)[0]
    worker = record.pods["tensorflow-benchmarks-worker-2"]
    assert (worker.run.command, worker.run.restart_policy) == (["/usr/sbin/sshd", "-De"], "Never")
    assert worker.run.env["K_MPI_JOB_ROLE"] == "worker" and "MPI_HOST" not in worker.run.env
    assert worker.run.ports == {"mpijob-port": 22} and worker.scheduling.request["nvidia.com/gpu"] == 1


@pytest.mark.parametrize(
    ("implementation", "line", "env"),
    [
        ("MPICH", "h:2\n", {"HYDRA_HOST_FILE": "/etc/mpi/hostfile"}),
        ("Intel", "h:2\n", {"I_MPI_HYDRA_HOST_FILE": "/etc/mpi/hostfile", "I_MPI_PERHOST": "2"}),
    ],
    ids=["mpich", "intel"],
)
def test_mpi_implementation_sets_hostfile_format_and_env(implementation, line, env):
    document = guide()
    document["spec"] |= {"mpiImplementation": implementation, "slotsPerWorker": 2}
    record = jc.decide(jc.admit(decoded(document), QUEUES, 0.0), jc.PodGroupAdmitted(), 0.0)[0]
    launcher = record.pods["tensorflow-benchmarks-launcher-0"]
    assert launcher.run.files["/etc/mpi/hostfile"].splitlines()[0].endswith(line.strip().removeprefix("h"))
    assert env.items() <= launcher.run.env.items()


def test_scheduling_policy_sets_gang_queue_and_priority_class():
    document = guide()
    document["spec"]["runPolicy"]["schedulingPolicy"] = {
        "minAvailable": 3,
        "queue": "research",
        "priorityClass": "high",
    }
    spec = decoded(document).spec
    assert (spec.min_available, spec.queue, spec.priority_class_name) == (3, "research", "high")


def test_queue_annotation_is_the_fallback_queue():
    document = guide()
    document["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": "research"}
    assert decoded(document).spec.queue == "research"


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (lambda s: s["runPolicy"].update(backoffLimit=2), "$.spec.runPolicy.backoffLimit"),
        (lambda s: s["runPolicy"].update(activeDeadlineSeconds=60), "$.spec.runPolicy.activeDeadlineSeconds"),
        (lambda s: s["runPolicy"].update(suspend=True), "$.spec.runPolicy.suspend"),
        (
            lambda s: s["runPolicy"].update(schedulingPolicy={"scheduleTimeoutSeconds": 5}),
            "$.spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds",
        ),
        (
            lambda s: s["runPolicy"].update(schedulingPolicy={"minResources": {"cpu": 1}}),
            "$.spec.runPolicy.schedulingPolicy.minResources",
        ),
        (
            lambda s: s["runPolicy"].update(schedulingPolicy={"minAvailable": 9}),
            "$.spec.runPolicy.schedulingPolicy.minAvailable",
        ),
        (lambda s: s.update(runLauncherAsWorker=True), "$.spec.runLauncherAsWorker"),
        (lambda s: s.update(launcherCreationPolicy="WaitForWorkersReady"), "$.spec.launcherCreationPolicy"),
        (lambda s: s["mpiReplicaSpecs"]["Launcher"].update(replicas=2), "$.spec.mpiReplicaSpecs[Launcher].replicas"),
        (
            lambda s: s["mpiReplicaSpecs"]["Worker"].update(restartPolicy="ExitCode"),
            "$.spec.mpiReplicaSpecs[Worker].restartPolicy",
        ),
        (lambda s: s["mpiReplicaSpecs"].pop("Launcher"), "$.spec.mpiReplicaSpecs[Launcher]"),
        (lambda s: s.update(gpus=4), "$.spec"),  # v1alpha1's field: unknown in v2beta1
        (
            lambda s: s["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"].update(
                limits={"nvidia.com/gpu": "lots"}
            ),
            "$.spec.mpiReplicaSpecs[Worker].template.spec.containers[0].resources",
        ),
    ],
    ids=[
        "backoffLimit",
        "activeDeadlineSeconds",
        "suspend",
        "scheduleTimeoutSeconds",
        "minResources",
        "minAvailable-over-replicas",
        "runLauncherAsWorker",
        "WaitForWorkersReady",
        "two-launchers",
        "ExitCode",
        "no-launcher",
        "unknown-field",
        "bad-quantity-names-the-replica",
    ],
)
def test_fields_not_honoured_are_rejected_by_name(change, path):
    document = guide()
    change(document["spec"])
    with pytest.raises(api.ManifestError) as error:
        api.decode(document)
    assert error.value.path.startswith(path)


# ----------------------------------------------------------------------------------------- PyTorchJob
PYTORCH = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: mnist}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: pytorch
            image: pytorch-mnist
            ports: [{name: pytorchjob-port, containerPort: 29500}]
            resources: {limits: {nvidia.com/gpu: 1}}
    Worker:
      replicas: 3
      template:
        spec:
          containers:
          - {name: pytorch, image: pytorch-mnist, resources: {limits: {nvidia.com/gpu: 1}}}
"""


@pytest.mark.parametrize(("pod", "rank"), [("mnist-master-0", "0"), ("mnist-worker-0", "1"), ("mnist-worker-2", "3")])
def test_pytorchjob_pods_get_the_operators_rendezvous_env(pod, rank):
    job = decoded(yaml.safe_load(PYTORCH))
    assert job.spec.min_available == 4 and job.spec.plugins["pytorch"] == [
        "--master=master",
        "--worker=worker",
        "--port=29500",
        "--nproc-per-node=auto",
    ]
    record = jc.decide(jc.admit(job, QUEUES, 0.0), jc.PodGroupAdmitted(), 0.0)[0]
    env = record.pods[pod].run.env
    assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["WORLD_SIZE"], env["RANK"], env["PYTHONUNBUFFERED"]) == (
        "mnist-master-0.mnist",
        "29500",
        "4",
        rank,
        "1",
    )
    assert job.spec.tasks[0].policies == [api.LifecyclePolicy(event="TaskCompleted", action="CompleteJob")]


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (
            lambda s: s.update(elasticPolicy={"minReplicas": 3, "maxReplicas": 2}),
            "$.spec.elasticPolicy.minReplicas",
        ),
        (lambda s: s.update(nprocPerNode="many"), "$.spec.nprocPerNode"),
        (
            lambda s: s["pytorchReplicaSpecs"]["Master"].update(replicas=2),
            "$.spec.pytorchReplicaSpecs[Master].replicas",
        ),
    ],
    ids=["elastic-min-over-max", "nprocPerNode-not-a-number", "two-masters"],
)
def test_pytorchjob_fields_not_honoured_are_rejected(change, path):
    document = yaml.safe_load(PYTORCH)
    change(document["spec"])
    with pytest.raises(api.ManifestError) as error:
        api.decode(document)
    assert error.value.path == path


# --------------------------------------------------------------------------------------------- TFJob
TFJOB = """
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: dist}
spec:
  tfReplicaSpecs:
    PS:
      replicas: 2
      template:
        spec:
          containers: [{name: tensorflow, image: tf}]
    Worker:
      replicas: 2
      template:
        spec:
          containers: [{name: tensorflow, image: tf, resources: {limits: {nvidia.com/gpu: 1}}}]
    Chief:
      replicas: 1
      template:
        spec:
          containers: [{name: tensorflow, image: tf}]
"""


def test_tfjob_pods_share_one_cluster_spec_with_chief_first():
    job = decoded(yaml.safe_load(TFJOB))
    assert [t.name for t in job.spec.tasks] == ["chief", "ps", "worker"]
    record = jc.decide(jc.admit(job, QUEUES, 0.0), jc.PodGroupAdmitted(), 0.0)[0]
    config = json.loads(record.pods["dist-worker-1"].run.env["TF_CONFIG"])
    assert config == {
        "cluster": {
            "ps": ["dist-ps-0.dist:2222", "dist-ps-1.dist:2222"],
            "worker": ["dist-worker-0.dist:2222", "dist-worker-1.dist:2222"],
            "chief": ["dist-chief-0.dist:2222"],
        },
        "task": {"type": "worker", "index": 1},
    }
    assert record.pods["dist-worker-1"].run.restart_policy == "Never"


def test_tfjob_master_is_the_chief_role():
    document = yaml.safe_load(TFJOB)
    document["spec"]["tfReplicaSpecs"]["Master"] = document["spec"]["tfReplicaSpecs"].pop("Chief")
    record = jc.decide(jc.admit(decoded(document), QUEUES, 0.0), jc.PodGroupAdmitted(), 0.0)[0]
    config = json.loads(record.pods["dist-master-0"].run.env["TF_CONFIG"])
    assert config["task"] == {"type": "chief", "index": 0} and config["cluster"]["chief"] == ["dist-master-0.dist:2222"]


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (lambda s: s.update(enableDynamicWorker=True), "$.spec.enableDynamicWorker"),
        (lambda s: s["tfReplicaSpecs"].update(Master=s["tfReplicaSpecs"]["Chief"]), "$.spec.tfReplicaSpecs[Master]"),
        (lambda s: s.update(schedulerName="volcano"), "$.spec"),
    ],
    ids=["dynamic-worker", "chief-and-master", "schedulerName-is-not-a-tfjob-field"],
)
def test_tfjob_fields_not_honoured_are_rejected(change, path):
    document = yaml.safe_load(TFJOB)
    change(document["spec"])
    with pytest.raises(api.ManifestError) as error:
        api.decode(document)
    assert error.value.path == path


# -------------------------------------------------------------------------- requests default to limits
@pytest.mark.parametrize(
    ("resources", "requests"),
    [
        ({"limits": {"nvidia.com/gpu": 2, "cpu": "4"}}, {"nvidia.com/gpu": 2, "cpu": "4"}),
        ({"limits": {"cpu": "4"}, "requests": {"cpu": "1"}}, {"cpu": "1"}),
        ({"limits": {"cpu": "4"}, "requests": {"memory": "1Gi"}}, {"cpu": "4", "memory": "1Gi"}),
        ({"requests": {"cpu": "1"}}, {"cpu": "1"}),
    ],
    ids=["limits-only", "explicit-request-kept", "missing-one-defaulted", "requests-only"],
)
def test_requests_default_to_limits_for_a_volcano_job(resources, requests):
    document = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {
            "tasks": [
                {
                    "name": "t",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "resources": resources}],
                            "initContainers": [{"name": "i", "resources": resources}],
                        }
                    },
                }
            ]
        },
    }
    spec = decoded(document).spec.tasks[0].template.spec
    assert spec.containers[0].resources.requests == requests == spec.init_containers[0].resources.requests


def test_a_request_above_its_limit_is_rejected():
    document = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {
            "tasks": [
                {
                    "name": "t",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "c", "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "2"}}}
                            ]
                        }
                    },
                }
            ]
        },
    }
    with pytest.raises(api.ManifestError) as error:
        api.decode(document)
    assert error.value.path == "$.spec.tasks[0].template.spec.containers[0].resources.requests.cpu"


def test_hyperjob_gpu_accelerators_count_limits_only_gpus():
    document = {
        "apiVersion": "training.volcano.sh/v1alpha1",
        "kind": "HyperJob",
        "metadata": {"name": "h"},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "r",
                    "splitPolicy": {"accelerators": 8, "acceleratorType": "nvidia.com/gpu"},
                    "templateSpec": {
                        "tasks": [
                            {
                                "name": "w",
                                "replicas": 8,
                                "template": {
                                    "spec": {
                                        "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]
                                    }
                                },
                            }
                        ]
                    },
                }
            ]
        },
    }
    assert isinstance(api.decode(document), api.HyperJob)
