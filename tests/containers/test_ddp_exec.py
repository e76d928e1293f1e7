"""A real distributed training across two clusters: ``examples/exec/hyperjob-ddp.yaml`` (PyTorch
DDP on CPU, gloo, 4 ranks, 2 per cluster) through ``hyperjob up`` with the exec-mode agents of
``examples/exec/up-exec.yaml``, asserted from the pods' logs as a user reads them (``hyperjob
logs``): one world of four ranks over both clusters, the loss falls on every rank, and every rank
ends with the same weights, bit for bit.

Needs torch in the project's venv (``make torch``: ``pip install torch==2.13.0``, PyTorch's CPU
build, about 40 s from the local index; ``make test-containers`` does it first). Without torch it
skips. It runs with the container tests rather than in ``make test`` because of that install: the
test itself takes well under a minute once torch is there."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest

from tests.containers.podman_kit import free_port
from tests.e2e.conftest import REPO, Cli, running_system

pytestmark = [
    pytest.mark.containers,
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None,
        reason="torch is not installed in this venv: `make torch` installs it (pip install torch==2.13.0)",
    ),
]

EXAMPLE = REPO / "examples" / "exec" / "hyperjob-ddp.yaml"
CONFIG = REPO / "examples" / "exec" / "up-exec.yaml"
# What ddp_train.py prints as its last line, one per rank.
RANK_LINE = re.compile(
    r"^rank (?P<rank>\d+)/(?P<world>\d+) cluster (?P<cluster>\S+): "
    r"loss (?P<first>[\d.]+) -> (?P<last>[\d.]+) weights (?P<digest>[0-9a-f]+) (?P<verdict>.+)$"
)


def venv_env() -> dict[str, str]:
    """The pods' ``python3`` is this venv's (the one with torch), as with the venv activated: exec
    pods inherit the agent's PATH and VIRTUAL_ENV, which inherit up's."""
    bin_dir = str(Path(sys.executable).parent)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "VIRTUAL_ENV": str(Path(bin_dir).parent)}


def manifest(tmp_path: Path) -> Path:
    """The example as shipped, on a free port (another system on this machine may hold 29518)."""
    text = EXAMPLE.read_text()
    assert "--port=29518" in text, "the example's rendezvous port changed: update this test"
    path = tmp_path / "ddp.yaml"
    path.write_text(text.replace("--port=29518", f"--port={free_port()}"))
    return path


def rank_lines(cli: Cli) -> dict[str, dict[str, str]]:
    """Each pod's last ``rank ...`` line from ``hyperjob logs``, by pod name."""
    lines = {}
    for child in ("ddp-train-job-0", "ddp-train-job-1"):
        for index in (0, 1):
            pod = f"{child}-worker-{index}"
            matches = [m for line in cli.run("logs", pod).stdout.splitlines() if (m := RANK_LINE.match(line))]
            assert matches, f"{pod} printed no rank line"
            lines[pod] = matches[-1].groupdict()
    return lines


def test_ddp_over_two_clusters_trains_one_model_on_every_rank(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with running_system(home, 2, "--config", str(CONFIG), env=venv_env()) as cli:
        cli.run("apply", "-f", str(manifest(tmp_path)))
        hyperjob = cli.wait_for(
            "the DDP HyperJob to finish",
            lambda: (h := cli.json("get", "hyperjobs", "ddp-train"))["phase"] in ("Completed", "Failed") and h,
            timeout=180,
        )
        lines = rank_lines(cli)
    print("\n".join(f"{pod}: {line}" for pod, line in sorted(lines.items())))
    assert hyperjob["phase"] == "Completed", lines
    assert hyperjob["status"]["placement"] == {"cluster-a": 2, "cluster-b": 2}
    # One process group of four ranks spanning both clusters.
    assert sorted(line["rank"] for line in lines.values()) == ["0", "1", "2", "3"]
    assert {line["world"] for line in lines.values()} == {"4"}
    assert {pod: line["cluster"] for pod, line in lines.items()} == {
        "ddp-train-job-0-worker-0": "cluster-a",
        "ddp-train-job-0-worker-1": "cluster-a",
        "ddp-train-job-1-worker-0": "cluster-b",
        "ddp-train-job-1-worker-1": "cluster-b",
    }
    # It learned: every rank's loss fell by well over an order of magnitude.
    for pod, line in lines.items():
        assert float(line["last"]) < float(line["first"]) / 100, f"{pod}'s loss did not fall: {line}"
    # DDP kept the replicas in step: the same weights, bit for bit, on every rank.
    assert len({line["digest"] for line in lines.values()}) == 1, lines
    assert {line["verdict"] for line in lines.values()} == {"identical on every rank"}
