"""The image the container-mode DDP test runs: the local base (``podman_kit.ensure_base_image``)
plus PyTorch's CPU build (``images/torch.Containerfile``), cached in podman's storage under a tag
keyed by its recipe. The wheels come from the host's pip (``pip download``, from wherever the host
installs torch from: this machine's disk), so the build reaches no registry."""

from __future__ import annotations

import hashlib

from tests.containers import podman_kit

TORCH_VERSION = "2.13.0"
CONTAINERFILE = podman_kit.HERE / "images" / "torch.Containerfile"


def tag(base: str) -> str:
    recipe = f"{base}\n{TORCH_VERSION}\n{CONTAINERFILE.read_text()}"
    return f"localhost/hyperjob-test-torch:{TORCH_VERSION}-{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"


def ensure_torch_image() -> str:
    """The image's name, built unless podman already has it (raises ``PodmanError`` or
    ``CalledProcessError`` when it cannot be built)."""
    base = podman_kit.ensure_base_image()
    name = tag(base)
    if podman_kit.image_exists(name):
        return name
    podman_kit.build_with_wheels(
        name, CONTAINERFILE, [f"torch=={TORCH_VERSION}"], {"BASE": base, "TORCH_VERSION": TORCH_VERSION}
    )
    return name
