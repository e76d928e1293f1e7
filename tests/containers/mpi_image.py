"""The image the container-mode MPI test runs: the local base (``podman_kit.ensure_base_image``)
plus mpi4py and MPICH from their PyPI wheels (``images/mpi.Containerfile``), at the versions
``constraints.txt`` pins, cached in podman's storage under a tag keyed by its recipe. The wheels
come from the host's pip (``pip download``), so the build reaches no registry."""

from __future__ import annotations

import re

from tests.containers import podman_kit

CONTAINERFILE = podman_kit.HERE / "images" / "mpi.Containerfile"


def pinned(package: str) -> str:
    """The version ``constraints.txt`` pins for ``package`` (what the exec-mode test runs)."""
    found = re.search(rf"^{package}==(\S+)$", (podman_kit.REPO / "constraints.txt").read_text(), re.MULTILINE)
    if found is None:
        raise LookupError(f"constraints.txt pins no {package}")
    return found.group(1)


MPI4PY_VERSION = pinned("mpi4py")
MPICH_VERSION = pinned("mpich")
# mpi4py's wheels are per CPython: fetch those of the base image's python3 (Debian bookworm's),
# whatever Python the host's pip runs on.
BASE_PYTHON = "3.11"
DOWNLOAD = ("--only-binary=:all:", "--python-version", BASE_PYTHON)
PACKAGES = (f"mpi4py=={MPI4PY_VERSION}", f"mpich=={MPICH_VERSION}")


def ensure_mpi_image() -> str:
    """The image's name, built unless podman already has it (``podman_kit.ensure_wheel_image``)."""
    return podman_kit.ensure_wheel_image(
        "hyperjob-test-mpi",
        f"{MPI4PY_VERSION}-{MPICH_VERSION}",
        CONTAINERFILE,
        [*DOWNLOAD, *PACKAGES],
        {"MPI4PY_VERSION": MPI4PY_VERSION, "MPICH_VERSION": MPICH_VERSION},
    )
