"""Job plugins env, svc, ssh and pytorch: each pod's env and files."""

from __future__ import annotations

import random

import pytest

from hyperjob import api
from hyperjob import jobcore as jc
from tests.unit.jobcore.jobcore_builders import QUEUES, job, task


def _record(*tasks, plugins, **kw) -> jc.JobRecord:
    return jc.admit(job(*tasks, plugins=plugins, name="mnist"), QUEUES, 0.0, **kw)


@pytest.mark.parametrize("index", [0, 2])
def test_env_plugin_sets_task_index(index):
    env, files = jc.pod_environment(_record(task("worker", 3), plugins={"env": []}), f"mnist-worker-{index}")
    assert env == {"VK_TASK_INDEX": str(index), "VC_TASK_INDEX": str(index)}
    assert files == {}


def test_svc_plugin_hosts_env_and_files():
    record = _record(task("ps-server", 2), task("worker", 1), plugins={"svc": []})
    env, files = jc.pod_environment(record, "mnist-worker-0")
    assert env == {
        "VC_PS_SERVER_HOSTS": "mnist-ps-server-0.mnist,mnist-ps-server-1.mnist",
        "VC_PS_SERVER_NUM": "2",
        "VC_WORKER_HOSTS": "mnist-worker-0.mnist",
        "VC_WORKER_NUM": "1",
    }
    assert files["/etc/volcano/ps_server.host"] == "mnist-ps-server-0.mnist\nmnist-ps-server-1.mnist"
    assert files["/etc/volcano/worker.host"] == "mnist-worker-0.mnist"
    assert files["/etc/volcano/VC_PS_SERVER_NUM"] == "2"


def test_svc_plugin_template_hostname_lists_one_host():
    record = _record(task("db", 3, template_hostname="database", template_subdomain="sub"), plugins={"svc": []})
    env, files = jc.pod_environment(record, "mnist-db-1")
    assert (env["VC_DB_HOSTS"], env["VC_DB_NUM"]) == ("database.sub", "1")


def test_svc_pods_get_hostname_and_subdomain():
    d = jc.decide(_record(task("worker", 1), plugins={"svc": []}), jc.PodGroupAdmitted(), 0.0)[0]
    pod = d.pods["mnist-worker-0"]
    assert (pod.hostname, pod.subdomain) == ("mnist-worker-0", "mnist")


def test_ssh_plugin_files_are_a_valid_deterministic_key_pair():
    record = _record(task("launcher", 1), task("worker", 2), plugins={"ssh": []})
    env, files = jc.pod_environment(record, "mnist-worker-1")
    assert env == {}
    assert set(files) == {
        "/root/.ssh/id_rsa",
        "/root/.ssh/id_rsa.pub",
        "/root/.ssh/authorized_keys",
        "/root/.ssh/config",
    }
    assert files["/root/.ssh/id_rsa"].startswith("-----BEGIN RSA PRIVATE KEY-----\n")
    assert files["/root/.ssh/id_rsa.pub"].startswith("ssh-rsa AAAAB3NzaC1yc2E")
    assert files["/root/.ssh/authorized_keys"] == files["/root/.ssh/id_rsa.pub"]
    assert files["/root/.ssh/config"] == (
        "StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n"
        "Host mnist-launcher-0\n  HostName mnist-launcher-0.mnist\n  Port 22\n"
        "Host mnist-worker-0\n  HostName mnist-worker-0.mnist\n  Port 22\n"
        "Host mnist-worker-1\n  HostName mnist-worker-1.mnist\n  Port 22\n"
    )
    again = _record(task("launcher", 1), task("worker", 2), plugins={"ssh": []})
    assert again.ssh == record.ssh  # same uid, same key: the simulator's output stays byte-identical


def test_ssh_key_is_rsa_2048_and_consistent():
    import base64

    pair = jc.generate_rsa_keypair(random.Random(7))
    blob = base64.b64decode(pair.public_key.split()[1])
    e_len = int.from_bytes(blob[11:15], "big")
    n_len = int.from_bytes(blob[15 + e_len : 19 + e_len], "big")
    n = int.from_bytes(blob[19 + e_len : 19 + e_len + n_len], "big")
    assert n.bit_length() == 2048
    assert int.from_bytes(blob[15 : 15 + e_len], "big") == 65537


def test_ssh_keygen_can_be_injected_and_path_flag_is_honoured():
    fake = jc.SshKeyPair(private_key="PRIVATE\n", public_key="ssh-rsa FAKE\n")
    record = _record(task("worker", 1), plugins={"ssh": ["--ssh-key-file-path=/home/u/.ssh"]}, keygen=lambda seed: fake)
    env, files = jc.pod_environment(record, "mnist-worker-0")
    assert files["/home/u/.ssh/id_rsa"] == "PRIVATE\n"
    assert files["/home/u/.ssh/authorized_keys"] == "ssh-rsa FAKE\n"


def test_mpi_gets_ssh_and_svc():
    record = _record(
        task("mpimaster", 1),
        task("mpiworker", 2),
        plugins={"mpi": ["--master=mpimaster", "--worker=mpiworker"]},
        keygen=lambda seed: jc.SshKeyPair(private_key="k", public_key="p"),
    )
    env, files = jc.pod_environment(record, "mnist-mpiworker-1")
    assert "/root/.ssh/id_rsa" in files and env["VC_MPIWORKER_NUM"] == "2"


@pytest.mark.parametrize(
    ("pod", "rank"),
    [("mnist-master-0", "0"), ("mnist-worker-0", "1"), ("mnist-worker-2", "3")],
    ids=["master-rank-0", "first-worker-rank-1", "third-worker-rank-3"],
)
def test_pytorch_plugin(pod, rank):
    record = _record(task("master", 1), task("worker", 3), plugins={"pytorch": []})
    env, _ = jc.pod_environment(record, pod)
    assert env["MASTER_ADDR"] == "mnist-master-0.mnist"
    assert (env["MASTER_PORT"], env["WORLD_SIZE"], env["RANK"]) == ("23456", "4", rank)
    assert env["VC_WORKER_NUM"] == "3"  # pytorch brings svc along


def test_pytorch_plugin_arguments_name_the_tasks_and_port():
    record = _record(
        task("trainer", 1),
        task("helper", 2),
        task("side", 1),
        plugins={"pytorch": ["--master=trainer", "--worker=helper", "--port=29500"]},
    )
    env, _ = jc.pod_environment(record, "mnist-helper-1")
    assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["WORLD_SIZE"], env["RANK"]) == (
        "mnist-trainer-0.mnist",
        "29500",
        "3",
        "2",
    )
    side, _ = jc.pod_environment(record, "mnist-side-0")
    assert "RANK" not in side and side["WORLD_SIZE"] == "3"


def test_pytorch_with_two_masters_ranks_workers_after_all_masters():
    record = _record(task("master", 2), task("worker", 2), plugins={"pytorch": []})
    assert jc.pod_environment(record, "mnist-master-1")[0]["RANK"] == "1"
    assert jc.pod_environment(record, "mnist-worker-0")[0]["RANK"] == "2"


def test_pytorch_without_master_task_sets_nothing():
    record = _record(task("worker", 2), plugins={"pytorch": []})
    env, _ = jc.pod_environment(record, "mnist-worker-1")
    assert not {"MASTER_ADDR", "RANK", "WORLD_SIZE"} & set(env)


def test_hyperjob_rank_offset_and_world_size_hook():
    record = _record(
        task("master", 1),
        task("worker", 3),
        plugins={"pytorch": []},
        rank=jc.RankOverride(rank_offset=8, world_size=16),
    )
    env, _ = jc.pod_environment(record, "mnist-worker-1")
    assert (env["RANK"], env["WORLD_SIZE"]) == ("10", "16")


def test_extra_env_wins_over_plugins():
    record = _record(task("worker", 2), plugins={"env": []}, extra_env={"REGION": "eu"})
    env, _ = jc.pod_environment(record, "mnist-worker-1", extra_env={"VC_TASK_INDEX": "99"})
    assert env == {"VK_TASK_INDEX": "1", "VC_TASK_INDEX": "99", "REGION": "eu"}


def test_pod_records_carry_plugin_env_after_user_env():
    t = task("worker", 1)
    t["template"]["spec"]["containers"][0]["env"] = [
        {"name": "VC_TASK_INDEX", "value": "user"},
        {"name": "MINE", "value": "x"},
    ]
    record = jc.decide(_record(t, plugins={"env": [], "ssh": []}), jc.PodGroupAdmitted(), 0.0)[0]
    pod = record.pods["mnist-worker-0"]
    assert pod.run.env == {"MINE": "x", "VC_TASK_INDEX": "0", "VK_TASK_INDEX": "0"}
    assert "/root/.ssh/config" in pod.run.files


@pytest.mark.parametrize("name", ["mnist-worker-3", "mnist-nope-0", "other-worker-0", "mnist-worker-x"])
def test_unknown_pod_names_raise_key_error(name):
    with pytest.raises(KeyError):
        jc.pod_environment(_record(task("worker", 3), plugins={"env": []}), name)


def test_task_names_with_dashes_parse():
    record = _record(task("ps-server", 2), task("ps", 1), plugins={"env": []})
    assert jc.parse_pod_name(record, "mnist-ps-server-1")[0].name == "ps-server"
    assert jc.parse_pod_name(record, "mnist-ps-0")[0].name == "ps"


def test_unknown_plugins_are_rejected_by_admission():
    with pytest.raises(api.ManifestError):
        _record(task("w", 1), plugins={"horovod": []})
