"""Volcano's mpi, tensorflow and ray job plugins, table-tested against Volcano's own tests and code
(``pkg/controllers/job/plugins/distributed-framework/{mpi,tensorflow,ray}/*_test.go``), plus the
strict parsing of every plugin's flags (``api.plugin_flags``)."""

from __future__ import annotations

import json
import re

import pytest

from hyperjob import api
from hyperjob import jobcore as jc
from tests.unit.jobcore.jobcore_builders import QUEUES, job, task


def record(*tasks, plugins, name="job", **kw) -> jc.JobRecord:
    return jc.admit(job(*tasks, plugins=plugins, name=name), QUEUES, 0.0, **kw)


def patch(rec: jc.JobRecord, pod: str) -> jc.PodPatch:
    return jc.pod_patch(rec, pod)


# --------------------------------------------------------------------------------------------- mpi
@pytest.mark.parametrize(("args", "port"), [([], 22), (["--port=5000"], 5000)], ids=["add-port", "add-5000-port"])
def test_mpi_opens_the_ssh_port_on_every_pod(args, port):  # mpi_test.go TestMpi
    rec = record(task("master", 1), task("worker", 2), plugins={"mpi": args})
    for pod in ("job-master-0", "job-worker-1"):
        assert patch(rec, pod).ports == {"mpijob-port": port}
    pod = jc.decide(rec, jc.PodGroupAdmitted(), 0.0)[0].pods["job-worker-0"]
    assert pod.run.ports == {"mpijob-port": port}


def test_mpi_does_not_open_a_port_the_container_already_has():
    t = task("master", 1)
    t["template"]["spec"]["containers"][0]["ports"] = [{"name": "ssh", "containerPort": 22}]
    pod = jc.decide(record(t, task("worker", 1), plugins={"mpi": []}), jc.PodGroupAdmitted(), 0.0)[0].pods[
        "job-master-0"
    ]
    assert pod.run.ports == {"ssh": 22}


@pytest.mark.parametrize(
    ("tasks", "pod", "expected"),
    [
        ([task("master", 1)], "job-master-0", None),
        ([task("master", 1), task("worker", 0)], "job-master-0", ""),
        ([task("master", 1), task("worker", 2)], "job-master-0", "job-worker-0.job,job-worker-1.job"),
        ([task("master", 1), task("worker", 1)], "job-worker-0", None),
        ([task("master", 1), task("worker", 3, template_hostname="w", template_subdomain="s")], "job-master-0", "w.s"),
    ],
    ids=[
        "no-worker-task",
        "worker-with-0-replicas",
        "valid-worker",
        "worker-pod-has-no-MPI_HOST",
        "worker-hostname-is-one-host",
    ],
)
def test_mpi_host_on_the_master_only(tasks, pod, expected):  # mpi_test.go TestMpiWithEmptyWorker
    env = patch(record(*tasks, plugins={"mpi": []}), pod).env
    assert env.get("MPI_HOST") == expected


def test_mpi_names_its_tasks_with_flags_and_brings_ssh_and_svc():
    rec = record(
        task("mpimaster", 1), task("mpiworker", 2), plugins={"mpi": ["--master=mpimaster", "--worker=mpiworker"]}
    )
    assert set(rec.spec.plugins) == {"mpi", "ssh", "svc"}
    result = patch(rec, "job-mpimaster-0")
    assert result.env["MPI_HOST"] == "job-mpiworker-0.job,job-mpiworker-1.job"
    assert result.files["/etc/volcano/mpiworker.host"] == "job-mpiworker-0.job\njob-mpiworker-1.job"


def test_mpi_without_its_master_task_is_rejected_as_volcanos_webhook_does():
    with pytest.raises(api.ManifestError, match="mpi master task 'master' was not found") as error:
        record(task("launcher", 1), task("worker", 1), plugins={"mpi": []})
    assert error.value.path == "$.spec.plugins.mpi"


@pytest.mark.parametrize(
    ("implementation", "text"),
    [
        ("OpenMPI", "job-worker-0.job slots=4\njob-worker-1.job slots=4\n"),
        ("MPICH", "job-worker-0.job:4\njob-worker-1.job:4\n"),
        ("Intel", "job-worker-0.job:4\njob-worker-1.job:4\n"),
    ],
)
def test_mpi_hostfile_extension_lists_workers_with_slots(implementation, text):
    args = ["--hostfile=/etc/mpi/hostfile", "--slots-per-worker=4", f"--mpi-implementation={implementation}"]
    rec = record(task("master", 1), task("worker", 2), plugins={"mpi": args})
    assert patch(rec, "job-master-0").files["/etc/mpi/hostfile"] == text
    assert "/etc/mpi/hostfile" not in patch(rec, "job-worker-0").files


# ------------------------------------------------------------------------------------- tensorflow
VOLCANO_TF_CLUSTER = (
    '{"cluster":{"ps":["train-123-ps-0.train-123:5000","train-123-ps-1.train-123:5000"],'
    '"worker":["train-123-worker-0.train-123:5000","train-123-worker-1.train-123:5000"],'
    '"chief":["train-123-chief-0.train-123:5000"]},'
)


@pytest.mark.parametrize(
    ("pod", "kind"),
    [("train-123-ps-0", "ps"), ("train-123-worker-0", "worker"), ("train-123-chief-0", "chief")],
    ids=["ps", "worker", "chief"],
)
def test_tf_config_is_byte_identical_to_volcanos(pod, kind):  # tensorflow_test.go TestTensorflow
    rec = record(
        task("ps", 2), task("worker", 2), task("chief", 1), plugins={"tensorflow": ["--port=5000"]}, name="train-123"
    )
    assert patch(rec, pod).env["TF_CONFIG"] == VOLCANO_TF_CLUSTER + f'"task":{{"type":"{kind}","index":0}}}}'


def test_tf_config_task_index_is_the_pod_index_and_unknown_tasks_keep_their_name():
    rec = record(task("ps", 1), task("worker", 3), task("side", 1), plugins={"tensorflow": []})
    config = json.loads(patch(rec, "job-worker-2").env["TF_CONFIG"])
    assert config["task"] == {"type": "worker", "index": 2}
    assert list(config["cluster"]) == ["ps", "worker"]  # empty roles are omitted; "side" is no role
    assert json.loads(patch(rec, "job-side-0").env["TF_CONFIG"])["task"] == {"type": "side", "index": 0}


def test_tf_role_names_come_from_flags():
    rec = record(
        task("server", 1),
        task("trainer", 2),
        plugins={"tensorflow": ["--ps=server", "--worker=trainer", "--evaluator=eval"]},
    )
    config = json.loads(patch(rec, "job-server-0").env["TF_CONFIG"])
    assert config == {
        "cluster": {"ps": ["job-server-0.job:2222"], "worker": ["job-trainer-0.job:2222", "job-trainer-1.job:2222"]},
        "task": {"type": "ps", "index": 0},
    }


def test_tf_standalone_job_gets_no_tf_config():
    assert "TF_CONFIG" not in patch(record(task("worker", 1), plugins={"tensorflow": []}), "job-worker-0").env


def test_tf_template_hostname_names_every_replica_alike():  # MakeDomainName, unlike the mpi plugin
    rec = record(
        task("ps", 2, template_hostname="ps", template_subdomain="tf"), task("worker", 1), plugins={"tensorflow": []}
    )
    assert json.loads(patch(rec, "job-worker-0").env["TF_CONFIG"])["cluster"]["ps"] == ["ps.tf:2222", "ps.tf:2222"]


# -------------------------------------------------------------------------------------------- ray
RAY_ARGS = ["--port=1234", "--dashboardPort=3456", "--clientPort=4567", "--head=test-head"]


def ray_task(name: str, container: str, replicas: int = 1) -> dict:
    t = task(name, replicas)
    t["template"]["spec"]["containers"][0]["name"] = container
    return t


def test_ray_head_runs_ray_start_head_and_opens_three_ports():  # ray_test.go, "only head task"
    rec = record(ray_task("test-head", "head"), plugins={"ray": RAY_ARGS}, name="ray-cluster-test")
    result = patch(rec, "ray-cluster-test-test-head-0")
    assert result.command == [
        "sh",
        "-c",
        "ray start --head --block --dashboard-host=0.0.0.0 --port=1234 "
        "--dashboard-port=3456 --ray-client-server-port=4567",
    ]
    assert result.ports == {"gcs": 1234, "dashboard": 3456, "client-server": 4567}
    pod = jc.decide(rec, jc.PodGroupAdmitted(), 0.0)[0].pods["ray-cluster-test-test-head-0"]
    assert pod.run.command == result.command and pod.run.ports == result.ports


def test_ray_worker_joins_the_head_pod():  # ray_test.go, "with worker task"
    rec = record(
        ray_task("head", "head"), ray_task("worker", "worker", 2), plugins={"ray": []}, name="ray-cluster-worker"
    )
    assert patch(rec, "ray-cluster-worker-worker-1").command == [
        "sh",
        "-c",
        "ray start --block --address=ray-cluster-worker-head-0.ray-cluster-worker:6379",
    ]


def test_ray_changes_only_containers_with_the_flagged_name():
    rec = record(ray_task("head", "main"), ray_task("worker", "main"), plugins={"ray": []})
    assert patch(rec, "job-head-0").command is None and patch(rec, "job-worker-0").command is None
    rec = record(
        ray_task("head", "main"),
        ray_task("worker", "main"),
        plugins={"ray": ["--headContainer=main", "--workerContainer=main"]},
    )
    assert patch(rec, "job-head-0").command is not None and patch(rec, "job-worker-0").command is not None


def test_ray_without_its_head_task_is_rejected():
    with pytest.raises(api.ManifestError, match="ray head task 'head' was not found"):
        record(ray_task("worker", "worker"), plugins={"ray": []})


# ---------------------------------------------------------------------------------------- flags
@pytest.mark.parametrize(
    ("plugin", "args", "expected"),
    [
        ("mpi", ["--port=5000"], {"port": "5000", "master": "master"}),
        ("mpi", ["-master", "launcher", "-port", "23"], {"master": "launcher", "port": "23"}),
        (
            "svc",
            ["--inject-hosts-env=false", "--disable-network-policy"],
            {"inject-hosts-env": "false", "disable-network-policy": "true"},
        ),
        ("ray", ["--dashboardPort=1"], {"dashboardPort": "1", "head": "head"}),
    ],
    ids=["equals", "go-style-separate-values", "booleans", "camel-case-names"],
)
def test_plugin_flags_parse_as_go_flag_does(plugin, args, expected):
    flags = api.plugin_flags(plugin, args, f"$.spec.plugins.{plugin}")
    assert expected.items() <= flags.items()


@pytest.mark.parametrize(
    ("plugin", "args", "where", "message"),
    [
        ("mpi", ["--slots=2"], "[0]", "unknown flag --slots"),
        ("mpi", ["--port=ssh"], "[0]", "not an integer"),
        ("mpi", ["--port"], "[0]", "needs a value"),
        ("svc", ["--inject-hosts-env=maybe"], "[0]", "not a boolean"),
        ("pytorch", ["--master=m", "trainer"], "[1]", "not a flag"),
        ("env", ["--x=1"], "[0]", "unknown flag --x (known: none)"),
    ],
    ids=["unknown", "bad-int", "missing-value", "bad-bool", "positional", "env-takes-none"],
)
def test_bad_plugin_flags_are_rejected_with_their_index(plugin, args, where, message):
    with pytest.raises(api.ManifestError, match=re.escape(message)) as error:
        api.plugin_flags(plugin, args, f"$.spec.plugins.{plugin}")
    assert error.value.path == f"$.spec.plugins.{plugin}{where}"


def test_bad_plugin_flags_reject_the_job_at_decode():
    with pytest.raises(api.ManifestError) as error:
        job(task("worker", 1), plugins={"svc": ["--publish-not-ready"]})
    assert error.value.path == "$.spec.plugins.svc[0]"


def test_svc_inject_hosts_env_false_keeps_the_files_only():
    rec = record(task("worker", 2), plugins={"svc": ["--inject-hosts-env=false"]})
    result = patch(rec, "job-worker-0")
    assert result.env == {} and result.files["/etc/volcano/worker.host"] == "job-worker-0.job\njob-worker-1.job"


def test_ssh_keys_given_as_flags_are_used():
    rec = record(task("worker", 1), plugins={"ssh": ["--ssh-private-key=PRIV", "--ssh-public-key=PUB"]})
    files = patch(rec, "job-worker-0").files
    assert (files["/root/.ssh/id_rsa"], files["/root/.ssh/authorized_keys"]) == ("PRIV", "PUB")
