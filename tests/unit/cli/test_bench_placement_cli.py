"""``hyperjob bench placement``: the JSON contract, the plot, and bad input named."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hyperjob.cli.main import main

NODES = "sn,cpu_milli,memory_mib,gpu,model\nn-a,32000,131072,4,V100\nn-b,64000,262144,2,T4\n"
PODS = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np-share,4000,8192,1,500,\n"
    "p-one,8000,16384,1,1000,\np-two,12000,32768,2,1000,V100\np-cpu,6000,8192,0,0,\n"
)
KEYS = {
    "gpuAllocationPercent",
    "gpuFragmentationPercent",
    "totalGpus",
    "podsScheduled",
    "podsSkipped",
    "policy",
    "seed",
    "seconds",
}


@pytest.fixture
def files(tmp_path):
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "pods.csv").write_text(PODS)
    return tmp_path


def bench(files, *args):
    return CliRunner().invoke(
        main, ["bench", "placement", "--nodes", str(files / "nodes.csv"), "--pods", str(files / "pods.csv"), *args]
    )


def test_json_has_the_contracts_keys_and_131_points(files):
    result = bench(files, "--seed", "3", "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert KEYS <= set(data)
    assert (data["policy"], data["seed"], data["totalGpus"]) == ("gpufrag", 3, 6)
    assert len(data["gpuAllocationPercent"]) == len(data["gpuFragmentationPercent"]) == 131


def test_several_policies_give_a_list_and_one_plot(files):
    result = bench(files, "--policy", "fgd,bestfit", "--policy", "random", "-o", "json", "--plot", str(files / "p.png"))
    assert result.exit_code == 0, result.output
    assert [d["policy"] for d in json.loads(result.output)] == ["fgd", "bestfit", "random"]
    assert (files / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_conf_file_is_replayed_under_its_name(files):
    (files / "mine.conf").write_text(
        'actions: "allocate"\ntiers:\n- plugins: [{name: predicates}, {name: gpubestfit}]\n'
    )
    result = bench(files, "--conf", str(files / "mine.conf"), "--demand", "0.5")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1].startswith("mine.conf")


@pytest.mark.parametrize(
    ("args", "pods", "message"),
    [
        (["--policy", "tetris"], PODS, "--policy: unknown policy 'tetris'"),
        (["--policy", "fgd", "--conf", "CONF"], PODS, "--conf and --policy: give one or the other"),
        ([], PODS.replace("p-one,8000", "p-one,eight"), "pods.csv line 3: cpu_milli: not a number: 'eight'"),
        (["--conf", "CONF"], PODS, "unknown plugin 'nosuch'"),
    ],
    ids=["unknown-policy", "conf-and-policy", "bad-csv", "bad-conf"],
)
def test_bad_input_is_a_usage_error_naming_it(files, args, pods, message):
    (files / "pods.csv").write_text(pods)
    (files / "bad.conf").write_text('actions: "allocate"\ntiers:\n- plugins: [{name: nosuch}]\n')
    result = bench(files, *[str(files / "bad.conf") if a == "CONF" else a for a in args])
    assert result.exit_code == 1  # kubectl's exit code for every error, usage errors too
    assert message in result.output
