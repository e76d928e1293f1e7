"""The DDP example (``examples/exec/hyperjob-ddp.yaml``: PyTorch DDP on CPU, gloo, 4 ranks, 2 per
cluster) run through ``hyperjob up`` and judged from the pods' logs as a user reads them
(``hyperjob logs``): one world of four ranks over both clusters, every rank's loss fallen, and
the same weights, bit for bit, on every rank. Shared by the exec-mode and container-mode tests."""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.conftest import REPO, Cli

EXAMPLE = REPO / "examples" / "exec" / "hyperjob-ddp.yaml"
CONFIG = REPO / "examples" / "exec" / "up-exec.yaml"
EXAMPLE_CLUSTERS = ("cluster-a", "cluster-b")
# What ddp_train.py prints as its last line, one per rank.
RANK_LINE = re.compile(
    r"^rank (?P<rank>\d+)/(?P<world>\d+) cluster (?P<cluster>\S+): "
    r"loss (?P<first>[\d.]+) -> (?P<last>[\d.]+) weights (?P<digest>[0-9a-f]+) (?P<verdict>.+)$"
)
PODS = {  # pod → the index of its cluster in the split
    "ddp-train-job-0-worker-0": 0,
    "ddp-train-job-0-worker-1": 0,
    "ddp-train-job-1-worker-0": 1,
    "ddp-train-job-1-worker-1": 1,
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def example() -> dict[str, Any]:
    """The example as shipped, on a free port (another system on this machine may hold its own)."""
    manifest = yaml.safe_load(EXAMPLE.read_text())
    plugin = manifest["spec"]["plugins"]["pytorch"]
    assert "--port=29518" in plugin, "the example's rendezvous port changed: update this kit"
    manifest["spec"]["plugins"]["pytorch"] = [f"--port={free_port()}" if a.startswith("--port=") else a for a in plugin]
    return manifest


def write(manifest: dict[str, Any], tmp_path: Path) -> Path:
    path = tmp_path / "ddp.yaml"
    path.write_text(yaml.safe_dump(manifest))
    return path


def run_to_the_end(cli: Cli, manifest: Path) -> dict[str, Any]:
    """Apply the HyperJob and wait until it ends; its view."""
    cli.run("apply", "-f", str(manifest))
    return cli.wait_for(  # type: ignore[no-any-return]
        "the DDP HyperJob to finish",
        lambda: (h := cli.json("get", "hyperjobs", "ddp-train"))["phase"] in ("Completed", "Failed") and h,
        timeout=240,
    )


def rank_lines(cli: Cli) -> dict[str, dict[str, str]]:
    """Each pod's last ``rank ...`` line from ``hyperjob logs``, by pod name."""
    lines = {}
    for pod in PODS:
        output = cli.run("logs", pod, check=False)
        matches = [m for line in output.stdout.splitlines() if (m := RANK_LINE.match(line))]
        assert matches, f"{pod} printed no rank line; its log ends:\n{(output.stdout + output.stderr)[-2000:]}"
        lines[pod] = matches[-1].groupdict()
    return lines


def assert_one_model_trained(
    hyperjob: dict[str, Any], lines: dict[str, dict[str, str]], clusters: tuple[str, str] = EXAMPLE_CLUSTERS
) -> None:
    assert hyperjob["phase"] == "Completed", lines
    assert hyperjob["status"]["placement"] == {clusters[0]: 2, clusters[1]: 2}
    # One process group of four ranks spanning both clusters.
    assert sorted(line["rank"] for line in lines.values()) == ["0", "1", "2", "3"]
    assert {line["world"] for line in lines.values()} == {"4"}
    assert {pod: line["cluster"] for pod, line in lines.items()} == {pod: clusters[i] for pod, i in PODS.items()}
    # It learned: every rank's loss fell by well over two orders of magnitude.
    for pod, line in lines.items():
        assert float(line["last"]) < float(line["first"]) / 100, f"{pod}'s loss did not fall: {line}"
    # DDP kept the replicas in step: the same weights, bit for bit, on every rank.
    assert len({line["digest"] for line in lines.values()}) == 1, lines
    assert {line["verdict"] for line in lines.values()} == {"identical on every rank"}


def in_containers(manifest: dict[str, Any], image: str, clusters: tuple[str, str]) -> dict[str, Any]:
    """The example with the torch image, the script mounted read-only, split over ``clusters``."""
    job = manifest["spec"]["template"]["spec"]
    pod = job["tasks"][0]["template"]["spec"]
    [container] = pod["containers"]
    container |= {
        "image": image,
        "command": ["python3", "/ddp/ddp_train.py"],
        "volumeMounts": [{"name": "ddp", "mountPath": "/ddp", "readOnly": True}],
    }
    pod["volumes"] = [{"name": "ddp", "hostPath": {"path": str(REPO / "examples" / "exec")}}]
    for split, name in zip(manifest["spec"]["splitPolicy"]["clusters"], clusters, strict=True):
        split["name"] = name
    return manifest
