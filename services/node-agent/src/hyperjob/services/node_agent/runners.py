"""The seam between the agent's pod bookkeeping and whatever runs a pod's container on the host.

Two implementations: ``execpods.ProcessRunner`` (``mode: exec``, a local process) and
``containerpods.PodmanRunner`` (``mode: container``, an OCI container through podman). The agent
decides (``domain``) and the runner only runs: it starts and stops what it is told, and awaits
``on_exit(pod, uid, exit_code, reason)`` when a container ends by itself (never when it is stopped).

``gpu_assignment`` is pure on purpose: which devices a pod sees is decided from its binding
alone, so the same function can be checked on a machine with real GPUs.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Literal, Protocol

from hyperjob import events

from . import domain

OnExit = Callable[[str, str, int, str], Coroutine[None, None, None]]
RunnerKind = Literal["exec", "container"]


class PodRunner(Protocol):
    async def launch(self, msg: events.PodStart, restarts: int = 0) -> None:
        """Start (or restart in place) the container of ``msg.pod`` and watch it."""

    async def kill(self, pod: str, grace: float | None = None) -> None:
        """Stop the pod's container (SIGTERM, SIGKILL after its grace period, or after ``grace``
        when that is shorter: a fence) and leave nothing of it running. Idempotent."""

    async def freeze(self, pod: str) -> bool:
        """Stop the pod's container where it stands, without ending it (SIGSTOP to its process
        group, ``podman pause``): it makes no progress and writes nothing until ``thaw``. False
        when it could not be frozen (the agent then kills it: it must not run on)."""

    async def thaw(self, pod: str) -> None:
        """Let a frozen pod's container run on from where it stood (SIGCONT, ``podman unpause``)."""

    async def recover(self, pods: Mapping[str, domain.RunningPod]) -> dict[str, events.PodStart]:
        """After an agent restart: take back what is left of ``pods`` (the agent's table).

        Returns the pods watched again, each with what started it (for restarts in place); the
        agent reports the others lost. Whatever runs for no pod of ``pods`` is stopped."""

    async def close(self) -> None:
        """The agent is stopping: start nothing more and stop watching."""


def gpu_assignment(devices: Sequence[int], kind: RunnerKind, nvml_gpus: bool) -> tuple[dict[str, str], list[str]]:
    """The env and the podman arguments that give a pod exactly the GPUs of its binding.

    A process (exec) sees every GPU of the host, so it is narrowed by ``CUDA_VISIBLE_DEVICES``
    (CUDA) and ``NVIDIA_VISIBLE_DEVICES`` (NVIDIA's container tools), both naming the host's
    indexes. A container is given only its devices, through CDI (``nvidia.com/gpu=<index>``), where
    NVML reports GPUs; inside it they are numbered from 0, so no index is put in its env. A pod
    without devices gets neither (not a GPU pod, or a binding made before devices were recorded).
    """
    if not devices:
        return {}, []
    if any(index < 0 for index in devices):
        raise ValueError(f"devices: GPU indexes must be >= 0, got {list(devices)}")
    if kind == "exec":
        visible = ",".join(str(index) for index in devices)
        return {"CUDA_VISIBLE_DEVICES": visible, "NVIDIA_VISIBLE_DEVICES": visible}, []
    if not nvml_gpus:
        return {}, []
    return {}, [arg for index in devices for arg in ("--device", f"nvidia.com/gpu={index}")]
