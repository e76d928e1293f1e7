"""The image the container-mode DDP test runs: the local base (``podman_kit.ensure_base_image``)
plus PyTorch's CPU build (``images/torch.Containerfile``), cached in podman's storage under a tag
keyed by its recipe. The wheels come from the host's pip (``pip download``, from wherever the host
installs torch from: this machine's disk), so the build reaches no registry."""

from __future__ import annotations

import subprocess

import pytest

from tests.containers import podman_kit

TORCH_VERSION = "2.13.0"
CONTAINERFILE = podman_kit.HERE / "images" / "torch.Containerfile"


def ensure_torch_image() -> str:
    """The image's name, built unless podman already has it (``podman_kit.ensure_wheel_image``)."""
    return podman_kit.ensure_wheel_image(
        "hyperjob-test-torch",
        TORCH_VERSION,
        CONTAINERFILE,
        [f"torch=={TORCH_VERSION}"],
        {"TORCH_VERSION": TORCH_VERSION},
    )


def ensure_or_skip() -> str:
    """The torch image (built where absent), or the test skipped saying why there is none."""
    try:
        return ensure_torch_image()
    except subprocess.CalledProcessError as error:  # the host's pip has no torch to give
        pytest.skip(f"no torch image: pip download torch=={TORCH_VERSION} failed: {error.stderr!r}")
