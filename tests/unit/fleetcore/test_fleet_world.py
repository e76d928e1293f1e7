"""HyperJob-level mpi and tensorflow plugins: every child of a split sees one world — one MPI hostfile
and MPI_HOST listing every worker in every cluster with its slots, one TF_CONFIG cluster spec with
world-wide task indexes — computed by each child's jobcore from the world the splitter writes on it."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from hyperjob import api, fleetcore
from hyperjob import jobcore as jc
from hyperjob.fleetcore import SplitPlan, child_jobs, plan_split
from tests.unit.fleetcore.fleet_builders import ABC_CLUSTERS, conceptual, job_spec, rjob, task, upstream

QUEUES = {"default": "Open"}
MPI = [
    "--master=launcher",
    "--worker=worker",
    "--hostfile=/etc/mpi/hostfile",
    "--slots-per-worker=2",
    "--mpi-implementation=MPICH",
]
SPLIT = {"clusters": [{"name": "a", "replicas": 3}, {"name": "b", "replicas": 2}]}


def children(hyperjob: api.HyperJob) -> dict[str, jc.JobRecord]:
    """Each child admitted as its cluster's job-controller would, from the manifest the splitter sends."""
    plan = plan_split(hyperjob, ABC_CLUSTERS)
    assert isinstance(plan, SplitPlan), plan
    return {c.name: jc.admit(api.decode(api.encode(c.job)), QUEUES, 0.0) for c in child_jobs(hyperjob, plan)}


def env_files(records: dict[str, jc.JobRecord], pod: str) -> jc.PodPatch:
    child = next(name for name in records if pod.startswith(name + "-"))
    return jc.pod_patch(records[child], pod)


def mpi_hyperjob(template_plugins: dict[str, list[str]] | None = None) -> api.HyperJob:
    template = job_spec(task("launcher", 1, gpus=0), task("worker", 4), plugins=template_plugins)
    return upstream("pi", rjob("job", template, split=SPLIT), plugins={"mpi": MPI})


def test_the_launcher_sees_every_worker_of_every_cluster_with_its_slots():
    records = children(mpi_hyperjob())
    assert [[t.name, t.replicas] for r in records.values() for t in r.spec.tasks] == [
        ["launcher", 1],
        ["worker", 2],
        ["worker", 2],
    ]
    workers = [
        "pi-job-0-worker-0.pi-job-0",
        "pi-job-0-worker-1.pi-job-0",
        "pi-job-1-worker-0.pi-job-1",
        "pi-job-1-worker-1.pi-job-1",
    ]
    launcher = env_files(records, "pi-job-0-launcher-0")
    assert launcher.env["MPI_HOST"] == ",".join(workers)
    assert launcher.files["/etc/mpi/hostfile"] == "".join(f"{w}:2\n" for w in workers)
    assert "MPI_HOST" not in env_files(records, "pi-job-1-worker-0").env


@pytest.mark.parametrize("pod", ["pi-job-0-launcher-0", "pi-job-0-worker-1", "pi-job-1-worker-0"])
def test_every_pod_sees_the_world_wide_svc_view(pod):
    patch = env_files(children(mpi_hyperjob()), pod)
    assert patch.env["VC_LAUNCHER_HOSTS"] == "pi-job-0-launcher-0.pi-job-0"
    assert patch.env["VC_WORKER_NUM"] == "4"
    assert patch.files["/etc/volcano/worker.host"].splitlines()[-1] == "pi-job-1-worker-1.pi-job-1"


def test_children_carry_ssh_and_svc_but_not_the_templates_own_mpi_plugin():
    records = children(mpi_hyperjob({"mpi": ["--master=launcher"]}))
    for record in records.values():  # child 1 has no launcher: the job plugin would be rejected there
        assert set(record.spec.plugins) == {"ssh", "svc"}
        assert record.world is not None and record.world.hyperjob == "pi"


def test_the_world_is_part_of_the_childs_template_hash():
    hyperjob = mpi_hyperjob()
    plan = plan_split(hyperjob, ABC_CLUSTERS)
    assert isinstance(plan, SplitPlan)
    renamed = msgspec.structs.replace(plan.children[1], name="pi-job-9")
    moved = msgspec.structs.replace(plan, children=(plan.children[0], renamed))
    before = {c.name: c.template_hash for c in child_jobs(hyperjob, plan)}
    after = {c.name: c.template_hash for c in child_jobs(hyperjob, moved)}
    assert before["pi-job-0"] != after["pi-job-0"]  # same spec and offset, another world


def test_no_world_without_a_world_plugin():
    hyperjob = upstream(
        "p",
        rjob(
            "job",
            job_spec(task("worker", 4)),
            split={"clusters": [{"name": "a", "replicas": 2}, {"name": "b", "replicas": 2}]},
        ),
        plugins={"pytorch": ["--master=worker"]},
    )
    plan = plan_split(hyperjob, ABC_CLUSTERS)
    assert isinstance(plan, SplitPlan)
    assert fleetcore.world_of(hyperjob, plan) is None
    assert all(api.WORLD_ANNOTATION not in c.job.metadata.annotations for c in child_jobs(hyperjob, plan))


TF_TEMPLATE = job_spec(task("chief", 1), task("ps", 2, gpus=0), task("worker", 4))


def tf_records() -> dict[str, jc.JobRecord]:
    hyperjob = conceptual(
        "tf",
        TF_TEMPLATE,
        {"strategy": "ByCluster", "clusters": [{"name": "a", "replicas": 4}, {"name": "b", "replicas": 3}]},
        plugins={"tensorflow": ["--port=5000"]},
    )
    return children(hyperjob)


def test_every_pod_of_a_split_tensorflow_hyperjob_sees_one_cluster_spec():
    records = tf_records()
    pods = [f"{name}-{t.name}-{i}" for name, r in records.items() for t in r.spec.tasks for i in range(t.replicas)]
    configs = {pod: json.loads(env_files(records, pod).env["TF_CONFIG"]) for pod in pods}
    clusters = {json.dumps(c["cluster"]) for c in configs.values()}
    assert len(clusters) == 1  # one world
    cluster = configs[pods[0]]["cluster"]
    assert cluster["worker"] == [
        "tf-job-0-worker-0.tf-job-0:5000",
        "tf-job-1-worker-0.tf-job-1:5000",
        "tf-job-1-worker-1.tf-job-1:5000",
        "tf-job-1-worker-2.tf-job-1:5000",
    ]
    assert cluster["ps"] == ["tf-job-0-ps-0.tf-job-0:5000", "tf-job-0-ps-1.tf-job-0:5000"]
    for pod, config in configs.items():  # each pod is the world's entry at its own task and index
        task_type, index = config["task"]["type"], config["task"]["index"]
        child, _, _ = pod.rpartition(f"-{task_type}-")
        assert config["cluster"][task_type][index] == f"{pod}.{child}:5000"
    assert sorted(c["task"]["index"] for c in configs.values() if c["task"]["type"] == "worker") == [0, 1, 2, 3]


def test_a_hyperjob_may_not_mix_world_plugins_with_custom_hostnames():
    template: dict[str, Any] = job_spec(task("chief", 1), task("worker", 2))
    template["tasks"][1]["template"]["spec"]["hostname"] = "w"
    with pytest.raises(api.ManifestError) as error:
        upstream("tf", rjob("job", template), plugins={"tensorflow": []})
    assert error.value.path == "$.spec.replicatedJobs[0].templateSpec.tasks[1].template.spec.hostname"


@pytest.mark.parametrize(
    ("plugins", "path", "message"),
    [
        ({"mpi": ["--master=boss"]}, "$.spec.plugins.mpi", "mpi master task 'boss' was not found"),
        ({"mpi": ["--master=launcher", "--slots-per-worker=0"]}, "$.spec.plugins.mpi", "at least 1"),
        ({"tensorflow": ["--chef=x"]}, "$.spec.plugins.tensorflow[0]", "unknown flag --chef"),
        ({"pytorch": ["--worker=w"]}, "$.spec.plugins.pytorch[0]", "unknown flag --worker"),
        ({"ray": []}, "$.spec.plugins.ray", "unknown HyperJob plugin"),
    ],
    ids=["mpi-master-missing", "zero-slots", "tf-unknown-flag", "pytorch-hyperjob-flags", "ray-not-at-hyperjob-level"],
)
def test_hyperjob_plugins_are_validated(plugins, path, message):
    with pytest.raises(api.ManifestError, match=message) as error:
        upstream("h", rjob("job", job_spec(task("launcher", 1), task("worker", 2))), plugins=plugins)
    assert error.value.path == path


def test_a_forged_world_annotation_is_rejected_by_admission():
    job = api.decode(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {
                "name": "x",
                "annotations": {
                    api.WORLD_ANNOTATION: '{"hyperjob": "h", "plugins": {}, "children": [{"name": "y", "tasks": {}}]}'
                },
            },
            "spec": {"tasks": [task("worker", 1)]},
        }
    )
    assert isinstance(job, api.Job)
    with pytest.raises(api.ManifestError, match="has no child 'x'"):
        jc.admit(job, QUEUES, 0.0)


# ----------------------------------------------------------------- a Kubeflow job as the template
MPIJOB_TEMPLATE = {
    "apiVersion": "kubeflow.org/v2beta1",
    "kind": "MPIJob",
    "spec": {
        "slotsPerWorker": 1,
        "mpiImplementation": "MPICH",
        "mpiReplicaSpecs": {
            "Launcher": {"template": {"spec": {"containers": [{"name": "l", "image": "x", "command": ["mpirun"]}]}}},
            "Worker": {
                "replicas": 4,
                "template": {
                    "spec": {
                        "containers": [{"name": "w", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}]
                    }
                },
            },
        },
    },
}


def test_an_mpijob_template_spans_its_world_across_clusters():
    hyperjob = api.decode(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "HyperJob",
            "metadata": {"name": "kf"},
            "spec": {
                "template": MPIJOB_TEMPLATE,
                "splitPolicy": {
                    "strategy": "ByCluster",
                    "clusters": [{"name": "a", "replicas": 3}, {"name": "b", "replicas": 2}],
                },
            },
        }
    )
    assert isinstance(hyperjob, api.HyperJob)
    assert hyperjob.spec.plugins["mpi"][:2] == ["--master=launcher", "--worker=worker"]
    records = children(hyperjob)
    launcher = env_files(records, "kf-job-0-launcher-0")
    assert launcher.files["/etc/mpi/hostfile"].count(":1\n") == 4
    pod = jc.decide(records["kf-job-0"], jc.PodGroupAdmitted(), 0.0)[0].pods["kf-job-0-launcher-0"]
    assert pod.run.env["HYDRA_HOST_FILE"] == "/etc/mpi/hostfile"
    assert pod.run.files["/etc/mpi/hostfile"] == launcher.files["/etc/mpi/hostfile"]


def test_a_kubeflow_template_error_names_the_templates_field():
    template = json.loads(json.dumps(MPIJOB_TEMPLATE))
    template["spec"]["runPolicy"] = {"backoffLimit": 1}
    with pytest.raises(api.ManifestError) as error:
        api.decode(
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "HyperJob",
                "metadata": {"name": "kf"},
                "spec": {
                    "template": template,
                    "splitPolicy": {"strategy": "ByCluster", "clusters": [{"name": "a", "replicas": 5}]},
                },
            }
        )
    assert error.value.path == "$.spec.template.spec.runPolicy.backoffLimit"
