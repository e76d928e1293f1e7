"""The DDP example in container mode: the same HyperJob (``ddp_kit``), its pods podman containers
of an image with PyTorch's CPU build (``torch_image``), ``ddp_train.py`` given to them as a
read-only ``hostPath`` volume, on the host's network (``127.0.0.1`` is every rank's master, as in
exec mode), two clusters of container-mode agents under ``hyperjob up``. Asserted as in exec mode,
and no container is left once the job is done.

The clusters are named for this test run (container names are per agent and pod, and another run
on this machine may use the example's ``cluster-a``). A cold machine builds the image first
(about 90 s: the host's pip downloads the wheels, the build installs them offline); it is cached
in podman's storage after that."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.containers import ddp_kit, podman_kit, torch_image
from tests.e2e.conftest import running_system

pytestmark = [
    pytest.mark.containers,
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(900),  # a cold machine builds the base and the torch image first
    pytest.mark.skipif(shutil.which("podman") is None, reason="podman is not installed (make container-tools)"),
]

CLUSTERS = (f"hj27d{os.getpid()}-a", f"hj27d{os.getpid()}-b")


@pytest.fixture(scope="module")
def image() -> str:
    return torch_image.ensure_or_skip()


def up_config() -> dict[str, Any]:
    config = yaml.safe_load(ddp_kit.CONFIG.read_text())
    for cluster, name in zip(config["clusters"], CLUSTERS, strict=True):
        cluster |= {"name": name, "mode": "container"}
    return config


def containers_left() -> list[str]:
    return podman_kit.containers_of_clusters(CLUSTERS)


def test_ddp_in_containers_over_two_clusters_trains_one_model_on_every_rank(image: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "up.yaml").write_text(yaml.safe_dump(up_config()))
    env = {"CONTAINERS_CONF": str(podman_kit.CONTAINERS_CONF)}  # the agents pass it on to podman
    try:
        with running_system(home, 2, "--config", str(home / "up.yaml"), "--no-dashboard", env=env) as cli:
            manifest = ddp_kit.in_containers(ddp_kit.example(), image, CLUSTERS)
            hyperjob = ddp_kit.run_to_the_end(cli, ddp_kit.write(manifest, tmp_path))
            lines = ddp_kit.rank_lines(cli)
            cli.wait_for("every container to be removed", lambda: not containers_left(), timeout=60)
    finally:
        for name in containers_left():  # whatever happened: nothing of this run stays
            podman_kit.podman("rm", "--force", name, check=False)
    print("\n".join(f"{pod}: {line}" for pod, line in sorted(lines.items())))
    ddp_kit.assert_one_model_trained(hyperjob, lines, CLUSTERS)
