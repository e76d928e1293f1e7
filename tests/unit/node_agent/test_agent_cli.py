"""``hyperjob agent`` configures the node-agent through its settings; ``hyperjob logs`` finds a pod's log."""

import pytest
from click.testing import CliRunner

from hyperjob.cli import agent as agent_cli
from hyperjob.cli.config import load_config
from hyperjob.cli.main import main
from hyperjob.cli.up import _cluster_env
from hyperjob.client import ClientError, podlogs
from hyperjob.servicekit import load_settings
from hyperjob.services.node_agent.config import Settings


@pytest.fixture
def launched(monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setenv("NATS_URL", "nats://127.0.0.1:1")
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:2/0")
    monkeypatch.setenv("HYPERJOB_HOME", str(tmp_path))
    monkeypatch.setattr(agent_cli.os, "execve", lambda path, argv, env: seen.update(argv=argv, env=env))
    return seen


def test_agent_starts_a_simulated_fleet_of_the_given_shape(launched):
    result = CliRunner().invoke(
        main,
        [
            "agent",
            "--cluster",
            "big",
            "--nodes",
            "2000",
            "--gpus",
            "4",
            "--gpu-model",
            "B200",
            "--nodes-per-leaf",
            "16",
            "--fault",
            "silent@big-node-7,after=60",
        ],
    )
    assert result.exit_code == 0, result.output
    assert launched["argv"][1:] == ["-m", "hyperjob.services.node_agent"]
    settings = load_settings(Settings, "NODE_AGENT", environ=launched["env"])
    assert (settings.cluster, settings.mode, settings.nodes) == ("big", "simulate", 2000)
    assert settings.fleet_shape.gpu_model == "B200" and settings.fleet_shape.nodes_per_leaf == 16
    assert settings.allocatable["nvidia.com/gpu"] == "4"
    assert settings.faults == ["silent@big-node-7,after=60"]
    assert launched["env"]["NATS_URL"] == "nats://127.0.0.1:1"


def test_agent_in_exec_mode_for_named_nodes(launched, tmp_path):
    result = CliRunner().invoke(main, ["agent", "--cluster", "c1", "--exec", "--node-name", "gpu-host-7"])
    assert result.exit_code == 0, result.output
    settings = load_settings(Settings, "NODE_AGENT", environ=launched["env"])
    assert settings.mode == "exec" and settings.work_dir == str(tmp_path / "pods")
    assert settings.node_names == ["gpu-host-7"]


def test_a_bad_fault_is_rejected_before_anything_starts(launched):
    result = CliRunner().invoke(main, ["agent", "--cluster", "c1", "--fault", "melt@n1"])
    assert result.exit_code == 1 and "melt@n1" in result.output and not launched  # kubectl: 1 for every error


def test_logs_prints_the_pods_log_and_names_ambiguity(tmp_path, monkeypatch):
    monkeypatch.setenv("HYPERJOB_HOME", str(tmp_path))
    for cluster in ("a", "b"):
        (tmp_path / "pods" / cluster / "p-0").mkdir(parents=True)
        (tmp_path / "pods" / cluster / "p-0" / "log").write_text(f"hello from {cluster}\n")
    (tmp_path / "pods" / "a" / "q-0").mkdir()
    (tmp_path / "pods" / "a" / "q-0" / "log").write_text("only q\n")
    runner = CliRunner()
    assert runner.invoke(main, ["logs", "q-0"]).output == "only q\n"
    assert runner.invoke(main, ["logs", "p-0", "--cluster", "b"]).output == "hello from b\n"
    ambiguous = runner.invoke(main, ["logs", "p-0"])
    assert ambiguous.exit_code == 1 and "several clusters (a, b)" in ambiguous.output
    missing = runner.invoke(main, ["logs", "nope"])
    assert missing.exit_code == 1 and "no log for pod 'nope'" in missing.output


def test_agent_with_the_podman_runtime_runs_container_mode(launched):
    result = CliRunner().invoke(main, ["agent", "--cluster", "c1", "--runtime", "podman"])
    assert result.exit_code == 0, result.output
    settings = load_settings(Settings, "NODE_AGENT", environ=launched["env"])
    assert (settings.mode, settings.oci_runtime) == ("container", "runc")


def test_agent_refuses_a_runtime_for_a_simulated_fleet(launched):
    result = CliRunner().invoke(main, ["agent", "--cluster", "c1", "--simulate", "--runtime", "podman"])
    assert result.exit_code != 0 and "--runtime" in result.output and not launched


def test_logs_of_a_container_pod_are_its_output_without_podman_framing(tmp_path, monkeypatch):
    monkeypatch.setenv("HYPERJOB_HOME", str(tmp_path))
    box = tmp_path / "pods" / "a" / "c-0"
    box.mkdir(parents=True)
    (box / "container").write_text("hyperjob-node-agent-a-c-0")
    (box / "log").write_bytes(
        b"2026-11-27T22:00:00.000000001+00:00 stdout F hello world\n"
        b"2026-11-27T22:00:00.000000002+00:00 stderr P part\n"
        b"2026-11-27T22:00:00.000000003+00:00 stderr F ial line\n"
        b"2026-11-27T22:00:00.000000004+00:00 stdout F \n"
    )
    assert CliRunner().invoke(main, ["logs", "c-0"]).output == "hello world\npartial line\n\n"


def test_a_line_that_is_not_a_k8s_file_record_is_shown_as_is():
    assert podlogs.k8s_log_text(b"plain text\n") == b"plain text\n"


def test_up_config_mode_container_reaches_the_agent_and_a_bad_mode_names_the_field(tmp_path):
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text("clusters:\n- name: a\n  mode: container\n")
    bad.write_text("clusters:\n- name: a\n  mode: docker\n")
    [cluster] = load_config(str(good)).clusters
    settings = load_settings(Settings, "NODE_AGENT", environ=_cluster_env(cluster, "1s"))
    assert settings.mode == "container"
    with pytest.raises(ClientError, match=r"mode"):
        load_config(str(bad))
