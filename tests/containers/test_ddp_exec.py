"""A real distributed training across two clusters: ``examples/exec/hyperjob-ddp.yaml`` through
``hyperjob up`` with the exec-mode agents of ``examples/exec/up-exec.yaml`` (``ddp_kit`` says what
is asserted).

Needs torch in the project's venv (``make torch``: ``pip install torch==2.13.0``, PyTorch's CPU
build, about 40 s from the local index; ``make test-containers`` does it first). Without torch it
skips. It runs with the container tests rather than in ``make test`` because of that install: the
test itself takes about a minute once torch is there, and needs neither root nor podman."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from tests.containers import ddp_kit
from tests.e2e.conftest import running_system

pytestmark = [
    pytest.mark.containers,
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None,
        reason="torch is not installed in this venv: `make torch` installs it (pip install torch==2.13.0)",
    ),
]


def venv_env() -> dict[str, str]:
    """The pods' ``python3`` is this venv's (the one with torch), as with the venv activated: exec
    pods inherit the agent's PATH and VIRTUAL_ENV, which inherit up's."""
    bin_dir = str(Path(sys.executable).parent)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "VIRTUAL_ENV": str(Path(bin_dir).parent)}


def test_ddp_over_two_clusters_trains_one_model_on_every_rank(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with running_system(home, 2, "--config", str(ddp_kit.CONFIG), "--no-dashboard", env=venv_env()) as cli:
        hyperjob = ddp_kit.run_to_the_end(cli, ddp_kit.write(ddp_kit.example(), tmp_path))
        lines = ddp_kit.rank_lines(cli)
    print("\n".join(f"{pod}: {line}" for pod, line in sorted(lines.items())))
    ddp_kit.assert_one_model_trained(hyperjob, lines)
