"""The MPI pi example in container mode: the same HyperJob (a Kubeflow MPIJob as its template,
``examples/exec/hyperjob-mpi-pi.yaml``), its pods podman containers of an image with mpi4py and
MPICH from their PyPI wheels (``mpi_image``), the launcher, worker and program given to them as a
read-only ``hostPath`` volume, on the host's network (as in exec mode, the workers ask the launcher
for their MPI proxy over TCP), two clusters of container-mode agents under ``hyperjob up``.
Asserted as in exec mode (``tests/e2e/test_hpc_frameworks.py``), and no container is left once
the job is done.

The clusters are named for this test run, as in ``test_ddp_containers``. A cold machine builds
the image first (the host's pip downloads the two wheels, the build installs them offline); it is
cached in podman's storage after that."""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.containers import ddp_kit, mpi_image, podman_kit
from tests.e2e.conftest import REPO, Cli, running_system
from tests.e2e.test_hpc_frameworks import MPI_EXAMPLE, finished, free_port

pytestmark = [
    pytest.mark.containers,
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(900),  # a cold machine builds the base and the MPI image first
    pytest.mark.skipif(shutil.which("podman") is None, reason="podman is not installed (make container-tools)"),
]

CLUSTERS = (f"hj27m{os.getpid()}-a", f"hj27m{os.getpid()}-b")
SCRIPTS = "/mpi"  # where the pods see examples/exec
PI_LINE = re.compile(r"^pi = (?P<pi>[\d.]+) \(error \S+\) from (?P<ranks>\d+) ranks$", re.MULTILINE)
RANK_LINE = re.compile(r"^rank (\d+)/8 on \S+ cluster (\S+): partial", re.MULTILINE)


@pytest.fixture(scope="module")
def image() -> str:
    try:
        return mpi_image.ensure_mpi_image()
    except subprocess.CalledProcessError as error:  # the host's pip has no wheels to give
        pytest.skip(f"no MPI image: pip download {' '.join(mpi_image.PACKAGES)} failed: {error.stderr!r}")


def up_config() -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load(ddp_kit.CONFIG.read_text())  # the example's up-exec.yaml
    for cluster, name in zip(config["clusters"], CLUSTERS, strict=True):
        cluster |= {"name": name, "mode": "container"}
    return config


def in_containers(image: str, port: int) -> dict[str, Any]:
    """The example with the MPI image, its scripts mounted read-only, split over this run's clusters."""
    manifest: dict[str, Any] = yaml.safe_load(MPI_EXAMPLE.read_text())
    specs = manifest["spec"]["template"]["spec"]["mpiReplicaSpecs"]
    commands = {
        "Launcher": ["python3", f"{SCRIPTS}/mpi_launcher.py", f"--port={port}", f"{SCRIPTS}/mpi_pi.py"],
        "Worker": ["python3", f"{SCRIPTS}/mpi_worker.py", f"--port={port}"],
    }
    for role, command in commands.items():
        pod = specs[role]["template"]["spec"]
        [container] = pod["containers"]
        script = command[1].removeprefix(f"{SCRIPTS}/")
        assert container["command"][1] == f"examples/exec/{script}", "the example's scripts moved: update this test"
        container |= {
            "image": image,
            "command": command,
            "volumeMounts": [{"name": "mpi", "mountPath": SCRIPTS, "readOnly": True}],
        }
        pod["volumes"] = [{"name": "mpi", "hostPath": {"path": str(REPO / "examples" / "exec")}}]
    for split, name in zip(manifest["spec"]["splitPolicy"]["clusters"], CLUSTERS, strict=True):
        split["name"] = name
    return manifest


def containers_left() -> list[str]:
    return podman_kit.containers_of_clusters(CLUSTERS)


def run_to_the_end(cli: Cli, manifest: Path) -> tuple[str, dict[str, Any], str]:
    """Apply the HyperJob, wait until it ends: its phase, its view and the launcher's log."""
    cli.run("apply", "-f", str(manifest))
    phase = cli.wait_for("the MPI HyperJob to finish", lambda: finished(cli, "hyperjobs", "mpi-pi"), timeout=240)
    return phase, cli.json("get", "hyperjobs", "mpi-pi"), cli.run("logs", "mpi-pi-job-0-launcher-0").stdout


def test_mpi_in_containers_over_two_clusters_computes_pi_on_every_rank(image: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "up.yaml").write_text(yaml.safe_dump(up_config()))
    (tmp_path / "mpi-pi.yaml").write_text(yaml.safe_dump(in_containers(image, free_port())))
    env = {"CONTAINERS_CONF": str(podman_kit.CONTAINERS_CONF)}  # the agents pass it on to podman
    try:
        with running_system(home, 2, "--config", str(home / "up.yaml"), "--no-dashboard", env=env) as cli:
            phase, hyperjob, log = run_to_the_end(cli, tmp_path / "mpi-pi.yaml")
            workers = {
                pod: cli.run("logs", pod, check=False).stdout
                for pod in ("mpi-pi-job-0-worker-0", "mpi-pi-job-1-worker-1")
            }
            cli.wait_for("every container to be removed", lambda: not containers_left(), timeout=60)
    finally:
        for name in containers_left():  # whatever happened: nothing of this run stays
            podman_kit.podman("rm", "--force", name, check=False)
    print(log)  # the launcher's: every rank, its pod and cluster; pi
    assert phase == "Completed", log
    assert hyperjob["status"]["placement"] == {CLUSTERS[0]: 3, CLUSTERS[1]: 2}
    # One MPI world of 4 workers x 2 slots over both clusters' containers.
    ranks = dict(RANK_LINE.findall(log))
    assert sorted(ranks, key=int) == [str(r) for r in range(8)], log
    assert set(ranks.values()) == set(CLUSTERS)
    [pi] = PI_LINE.finditer(log)
    assert pi["ranks"] == "8"
    assert abs(float(pi["pi"]) - math.pi) < 1e-6, pi[0]
    for pod, worker in workers.items():
        assert "running MPI proxy" in worker, f"{pod}: {worker}"
