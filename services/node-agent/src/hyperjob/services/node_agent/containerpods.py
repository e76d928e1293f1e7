"""Container mode: a pod's main container runs as an OCI container through the podman CLI.

What the host needs: ``podman`` (4.3 or later) and an OCI runtime it can use. podman reads its
settings from ``containers.conf`` or the file ``CONTAINERS_CONF`` names in the agent's environment
(passed through unchanged); on machines where podman's default runtime (crun) cannot run (cgroups
in hybrid mode) set ``oci_runtime: runc`` (the default here), and where default ulimits cannot be
applied give podman ``default_ulimits = []``. The image is pulled as the main container's
``imagePullPolicy`` says (Kubernetes' default where none is given: ``Always`` for ``latest`` or no
tag, else ``IfNotPresent``; ``ensure_image``): a pull that fails, or an image absent under
``Never``, fails the pod with the kubelet's reason (``ErrImagePull``, ``ErrImageNeverPull``) and
podman's message. GPUs are given through CDI (``nvidia-ctk cdi generate``) where NVML reports them.

Each pod is one container ``hyperjob-<agent>-<pod>``, labelled with the agent, the pod and its
incarnation (uid), on the host's network (pods reach each other as exec-mode pods do, through
``domain.local_env``), with the plugin files bind-mounted read-only at their paths and its output
in ``<work_dir>/<cluster>/<pod>/log`` (podman's ``k8s-file`` format, kept after the container is
removed: ``hyperjob logs`` reads it). ``resources.limits`` become cgroup limits (``--cpus``,
``--memory``, no swap beyond it), so a container over its memory is OOM-killed and reported so;
``resources.requests`` are recorded as the kubelet records them (``--cpu-shares``, and
``--memory-reservation``, a soft limit).
The main container's ``volumeMounts`` are bind mounts: a ``hostPath`` volume the node's path, an
``emptyDir`` a directory of the pod's incarnation in its sandbox (kept across restarts in place,
removed when the pod ends or is stopped); a volume of any other source refuses the pod.

A watcher per pod waits for its container (``podman wait``), reads how it ended (``podman
inspect``: exit code, OOM kill), removes it and reports. podman is started by the standard
library's ``subprocess``, never by the event loop: a service runs on uvloop, and containers whose
podman, conmon and runc uvloop had spawned misbehaved (``sleep 5`` in one returned at once).
A container stopped on request is removed without a report. An agent that restarts lists its
containers by label and watches again those of the pods it still has (``recover``): nothing is
started twice and nothing is left behind.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
import structlog

from hyperjob import api, events

from . import domain
from .execpods import prepare_sandbox, sandbox
from .runners import OnExit, gpu_assignment

LABEL_AGENT, LABEL_POD, LABEL_UID = "io.hyperjob.agent", "io.hyperjob.pod", "io.hyperjob.uid"
EXIT_START_FAILED = 125  # podman's own code for "could not create or start the container"
EXIT_GONE = 137  # a container removed under us, whose end podman cannot tell: it was killed
VOLUMES = "volumes"  # a pod's emptyDir volumes, one directory each, in its sandbox
START_FILE = "start.json"  # what started the pod: a restarted agent restarts it in place from it
CPU_SHARES_PER_CPU = 1024  # the kubelet's cpu.shares of one requested CPU
MIN_CPU_SHARES = 2  # and its floor (a request of a few millicores)
log = structlog.get_logger("node-agent")


class PodmanFailed(RuntimeError):
    pass


def container_name(agent: str, pod: str) -> str:
    return f"hyperjob-{agent}-{pod}"


def limit_args(limits: Mapping[str, str | int | float]) -> list[str]:
    """``resources.limits`` as podman's cgroup limits: ``cpu`` a CPU quota (``--cpus``), ``memory``
    the memory maximum in bytes with no swap beyond it; other resources (GPUs) are not cgroup limits."""
    args = []
    if "cpu" in limits:
        cpus = _quantity(limits, "limits", "cpu")
        args += ["--cpus", f"{cpus:g}"]
    if "memory" in limits:
        memory = str(int(_quantity(limits, "limits", "memory")))
        args += ["--memory", memory, "--memory-swap", memory]
    return args


def request_args(requests: Mapping[str, str | int | float]) -> list[str]:
    """``resources.requests`` recorded in the container's cgroup, as the kubelet records them: ``cpu``
    its CPU weight against the node's other pods (``--cpu-shares``, 1024 a CPU, at least 2), ``memory``
    the memory the kernel tries to leave it under pressure (``--memory-reservation``, a soft limit)."""
    args = []
    if "cpu" in requests:
        shares = max(MIN_CPU_SHARES, int(_quantity(requests, "requests", "cpu") * CPU_SHARES_PER_CPU))
        args += ["--cpu-shares", str(shares)]
    if "memory" in requests:
        args += ["--memory-reservation", str(int(_quantity(requests, "requests", "memory")))]
    return args


def _quantity(resources: Mapping[str, str | int | float], kind: str, name: str) -> float:
    field = f"resources.{kind}.{name}"
    try:
        value = api.parse_quantity(resources[name])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{field}: {resources[name]!r} is not a quantity ({exc})") from None
    if value <= 0:
        raise ValueError(f"{field}: must be more than 0, got {resources[name]!r}")
    return value


def mount_args(mounts: Sequence[events.PodMount], empty_dirs: Path) -> list[str]:
    """The main container's ``volumeMounts`` as podman bind mounts: a ``hostPath`` volume the
    node's path, an ``emptyDir`` the pod's own directory ``empty_dirs/<volume>`` (made by the
    runner, removed with the pod). Other sources cannot be mounted here: the pod is refused."""
    args = []
    for index, mount in enumerate(mounts):
        field = f"volumeMounts[{index}]"
        if mount.source == "hostPath":
            host = str(Path(mount.host_path) / _sub_path(mount, field))
        elif mount.source == "emptyDir":
            host = str(empty_dirs / mount.volume / _sub_path(mount, field))
        else:
            raise ValueError(
                f"{field}: volume {mount.volume!r} is a {mount.source}; a container node mounts hostPath and emptyDir"
            )
        for name, path in (("mountPath", mount.mount_path), ("hostPath.path", host)):
            if not path.startswith("/") or ":" in path:  # podman's --volume separates with ':'
                raise ValueError(f"{field}.{name}: an absolute path without ':' is needed, got {path!r}")
        args += ["--volume", f"{host}:{mount.mount_path}" + (":ro" if mount.read_only else "")]
    return args


def _sub_path(mount: events.PodMount, field: str) -> str:
    """``subPath``: a relative path that stays inside the volume (Kubernetes' rule)."""
    if mount.sub_path.startswith("/") or ".." in Path(mount.sub_path).parts:
        raise ValueError(f"{field}.subPath: a relative path inside the volume is needed, got {mount.sub_path!r}")
    return mount.sub_path


def empty_dirs(mounts: Sequence[events.PodMount]) -> set[str]:
    """The directories of the pod's ``emptyDir`` volumes its main container mounts, relative to the
    pod's volumes (``<volume>`` or ``<volume>/<subPath>``: the kubelet makes a missing subPath)."""
    return {str(Path(mount.volume) / mount.sub_path) for mount in mounts if mount.source == "emptyDir"}


def run_args(
    msg: events.PodStart,
    *,
    agent: str,
    env: Mapping[str, str],
    files_root: Path,
    log_path: Path,
    grace: float,
    nvml_gpus: bool,
    volumes_root: Path,
) -> list[str]:
    """The ``podman run`` arguments of one pod (after the global options), built from the pod alone;
    its ``emptyDir`` volumes are directories under ``volumes_root``."""
    if not msg.image:
        raise ValueError("image: a container-mode pod needs an image")
    gpu_env, gpu_args = gpu_assignment(msg.devices, "container", nvml_gpus)
    args = [
        "run",
        "--detach",
        "--replace",  # a container of this pod left from before (ended, not yet removed) gives way
        "--name",
        container_name(agent, msg.pod),
        *(
            "--label",
            f"{LABEL_AGENT}={agent}",
            "--label",
            f"{LABEL_POD}={msg.pod}",
            "--label",
            f"{LABEL_UID}={msg.uid}",
        ),
        *("--network", "host", "--pull", "never", "--stop-timeout", str(round(grace))),
        *("--log-driver", "k8s-file", "--log-opt", f"path={log_path}"),
        *limit_args(msg.limits),
        *request_args(msg.requests),
        *gpu_args,
        *mount_args(msg.mounts, volumes_root),
    ]
    for path in sorted(msg.files):
        args += ["--volume", f"{files_root / path.lstrip('/')}:{path}:ro"]
    for key, value in {**env, **gpu_env}.items():
        args += ["--env", f"{key}={value}"]
    if msg.working_dir:
        args += ["--workdir", msg.working_dir]
    if msg.command:  # as Kubernetes: command replaces the image's entrypoint (and its CMD)
        args += ["--entrypoint", json.dumps(msg.command)]
    return [*args, msg.image, *msg.args]


def exit_of(inspected: Sequence[Mapping[str, Any]], kernel_log: str = "") -> tuple[int, str]:
    """``podman inspect`` of an ended container → (exit code, the kubelet's reason for it).

    podman knows of an OOM kill under cgroup v2; under cgroup v1 (as on the development machines)
    it says ``OOMKilled: false`` all the same, so a container killed by SIGKILL is also looked
    for in the kernel's log (``kernel_log``, dmesg's text), whose ``oom-kill:`` line names the
    container's memory cgroup."""
    if not inspected:
        raise ValueError("podman inspect: no container in the answer")
    container = inspected[0]
    state = container.get("State") or {}
    code = int(state.get("ExitCode", 0))
    killed = code == EXIT_GONE and oom_killed_in(kernel_log, str(container.get("Id", "")))
    if state.get("OOMKilled") or killed:
        return code or EXIT_GONE, "OOMKilled"
    return code, "Completed" if code == 0 else "Error"


def oom_killed_in(kernel_log: str, container_id: str) -> bool:
    """Does the kernel log record an OOM kill inside container ``container_id``'s memory cgroup?"""
    if not container_id:
        return False
    for line in kernel_log.splitlines():
        _, found, after = line.partition("oom-kill:")
        if found and container_id in after.partition("task_memcg=")[2].split(",", 1)[0]:
            return True
    return False


async def kernel_log() -> str:
    """The kernel's log (``dmesg``), or nothing where it cannot be read (no root, no dmesg)."""
    try:
        code, out = await run_command(["dmesg"])
    except OSError:
        return ""
    return out if code == 0 else ""


async def run_command(argv: list[str], cwd: Path | None = None) -> tuple[int, str]:
    """A short command's exit code and output (stdout, then stderr), spawned by ``subprocess`` in
    a worker thread (see the module's doc: not by the event loop)."""
    done = await asyncio.to_thread(
        subprocess.run, argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace", cwd=cwd
    )
    return done.returncode, done.stdout + done.stderr


async def exited(proc: subprocess.Popen[bytes]) -> int:
    """Wait for ``proc`` without a thread: its pidfd becomes readable when it ends. Cancelled, it
    kills ``proc``."""
    loop = asyncio.get_running_loop()
    pidfd = os.pidfd_open(proc.pid)
    ended: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not ended.done():
            ended.set_result(None)

    loop.add_reader(pidfd, readable)
    try:
        await ended
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)
        if proc.poll() is None:
            proc.kill()
            proc.wait()  # reaped at once: SIGKILL cannot be caught
    return proc.wait()


class PodmanRunner:
    """The containers of one agent's pods (a ``runners.PodRunner``), keyed by pod name."""

    def __init__(
        self,
        cluster: str,
        agent: str,
        work_dir: str,
        kill_grace: float,
        on_exit: OnExit,
        *,
        podman: str = "podman",
        oci_runtime: str = "runc",
        nvml_gpus: bool = False,
    ) -> None:
        self.cluster = cluster
        self.agent = agent
        self.work_dir = work_dir
        self.kill_grace = kill_grace
        self.on_exit = on_exit
        self.base = [podman, *(["--runtime", oci_runtime] if oci_runtime else [])]
        self.nvml_gpus = nvml_gpus
        self.running: dict[str, str] = {}  # pod -> uid of the incarnation whose container is watched
        self.graces: dict[str, float] = {}
        self.watchers: dict[str, asyncio.Task[None]] = {}
        self.closed = False

    async def podman(self, *args: str, check: bool = True) -> tuple[int, str]:
        """Run podman; its exit code and output (stderr appended). ``CONTAINERS_CONF`` and the rest
        of the agent's environment pass through."""
        # In the agent's own directory: conmon, which `podman run` leaves behind, writes a file
        # named ``oom`` into its working directory when its container is OOM-killed.
        home = sandbox(self.work_dir, self.cluster, "")
        home.mkdir(parents=True, exist_ok=True)
        code, output = await run_command([*self.base, *args], cwd=home)
        if check and code != 0:
            raise PodmanFailed(f"podman {' '.join(args[:2])} failed ({code}): {output.strip()[-500:]}")
        return code, output

    async def launch(self, msg: events.PodStart, restarts: int = 0) -> None:
        if self.closed:
            return
        box, files = prepare_sandbox(self.work_dir, self.cluster, msg)
        (box / START_FILE).write_bytes(msgspec.json.encode(msg))
        (box / "container").write_text(container_name(self.agent, msg.pod))  # `hyperjob logs` reads k8s-file
        grace = msg.grace_period if msg.grace_period is not None else self.kill_grace
        env = {**domain.local_env(msg.env), "HYPERJOB_POD": msg.pod, "HYPERJOB_FILES_ROOT": "/"}
        # An emptyDir lives as long as the incarnation: a container restarted in place finds its data.
        volumes = box / VOLUMES / msg.uid
        try:
            args = run_args(
                msg,
                agent=self.agent,
                env=env,
                files_root=files,
                log_path=box / "log",
                grace=grace,
                nvml_gpus=self.nvml_gpus,
                volumes_root=volumes,
            )
            for directory in empty_dirs(msg.mounts):  # after run_args checked their subPaths
                (volumes / directory).mkdir(parents=True, exist_ok=True)
            reason, output = await self.ensure_image(msg.image, msg.image_pull_policy)
            code = EXIT_START_FAILED if reason else 0
            if not reason:
                code, output = await self.podman(*args, check=False)
                reason = "StartError"
        except (ValueError, OSError) as exc:
            code, output, reason = EXIT_START_FAILED, str(exc), "StartError"
        if code != 0:
            log.warning("container_not_started", pod=msg.pod, code=code, reason=reason, output=output.strip()[-500:])
            await self.podman("rm", "--force", "--ignore", container_name(self.agent, msg.pod), check=False)
            self.watchers[msg.pod] = asyncio.create_task(self._ended(msg.pod, msg.uid, code, reason))
            return
        self._watch(msg.pod, msg.uid, grace)

    async def ensure_image(self, image: str, policy: str) -> tuple[str, str]:
        """Have ``image`` on this node as ``policy`` says (``api.pull_policy``): ("", "") when it
        is there, else the kubelet's reason and podman's (or the kubelet's) message. ``podman
        run`` itself never pulls (``--pull never``): its own failure would not say why."""
        policy = api.pull_policy(image, policy)
        present = (await self.podman("image", "exists", image, check=False))[0] == 0
        if present and policy != "Always":
            return "", ""
        if policy == "Never":
            return "ErrImageNeverPull", f'Container image "{image}" is not present with pull policy of Never'
        code, output = await self.podman("pull", "--quiet", image, check=False)
        return ("", "") if code == 0 else ("ErrImagePull", output.strip()[-500:])

    async def _ended(self, pod: str, uid: str, exit_code: int, reason: str) -> None:
        """Report the end of the pod's container; once it is not restarted in place, the pod's
        volumes go with it."""
        await self.on_exit(pod, uid, exit_code, reason)
        if pod not in self.running:
            self._remove_volumes(pod)

    def _remove_volumes(self, pod: str) -> None:
        shutil.rmtree(sandbox(self.work_dir, self.cluster, pod) / VOLUMES, ignore_errors=True)

    def _watch(self, pod: str, uid: str, grace: float) -> None:
        self.running[pod] = uid
        self.graces[pod] = grace
        self.watchers[pod] = asyncio.create_task(self._wait(pod, uid))

    async def _wait(self, pod: str, uid: str) -> None:
        name = container_name(self.agent, pod)
        waiting = subprocess.Popen(  # until the container ends; cancelled, it is killed
            [*self.base, "wait", name], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        await exited(waiting)
        if self.running.get(pod) != uid:
            return  # stopped on purpose: the stop already reported it
        code, output = await self.podman("inspect", "--type", "container", name, check=False)
        exit_code, reason = (EXIT_GONE, "Error")
        if code == 0:
            inspected = json.loads(output)
            exit_code, reason = exit_of(inspected)
            if exit_code == EXIT_GONE and reason != "OOMKilled":
                exit_code, reason = exit_of(inspected, await kernel_log())
        await self.podman("rm", "--force", "--ignore", name, check=False)
        if self.running.get(pod) != uid:
            return
        del self.running[pod]
        await self._ended(pod, uid, exit_code, reason)

    async def kill(self, pod: str, grace: float | None = None) -> None:
        self.running.pop(pod, None)
        own = self.graces.pop(pod, self.kill_grace)
        grace = own if grace is None else min(own, grace)
        watcher = self.watchers.pop(pod, None)
        if watcher is not None and watcher is not asyncio.current_task():
            watcher.cancel()
        # SIGTERM (the image's stop signal), SIGKILL once the grace period is up; then nothing left.
        await self.podman(
            "rm", "--force", "--ignore", "--time", str(round(grace)), container_name(self.agent, pod), check=False
        )
        self._remove_volumes(pod)

    async def freeze(self, pod: str) -> bool:
        if pod not in self.running:
            return True
        # The cgroup freezer: what runs inside stands still (a rootless podman on cgroup v1 cannot).
        code, output = await self.podman("pause", container_name(self.agent, pod), check=False)
        if code != 0:
            log.warning("pod_freeze_failed", pod=pod, output=output.strip()[-300:])
        return code == 0

    async def thaw(self, pod: str) -> None:
        if pod in self.running:
            await self.podman("unpause", container_name(self.agent, pod), check=False)

    async def recover(self, pods: Mapping[str, domain.RunningPod]) -> dict[str, events.PodStart]:
        _, output = await self.podman(
            "ps", "--all", "--filter", f"label={LABEL_AGENT}={self.agent}", "--format", "json"
        )
        adopted: dict[str, events.PodStart] = {}
        for container in json.loads(output or "[]"):
            labels = container.get("Labels") or {}
            pod, uid = labels.get(LABEL_POD, ""), labels.get(LABEL_UID, "")
            start = self._start_of(pod)
            # Paused: the agent before us froze it (cut off from the bus) and we cannot know whether
            # the fleet still holds it here; unpausing it could run a second copy, so it is lost.
            paused = str(container.get("State", "")).lower() == "paused"
            if pod in pods and pods[pod].uid == uid and start is not None and start.uid == uid and not paused:
                adopted[pod] = start
                grace = start.grace_period if start.grace_period is not None else self.kill_grace
                self._watch(pod, uid, grace)  # a container that ended meanwhile is reported at once
                continue
            log.info("orphan_container_removed", container=container.get("Names"), pod=pod, uid=uid, paused=paused)
            await self.kill(pod)
        return adopted

    def _start_of(self, pod: str) -> events.PodStart | None:
        path = sandbox(self.work_dir, self.cluster, pod) / START_FILE
        try:
            return msgspec.json.decode(path.read_bytes(), type=events.PodStart)
        except (OSError, msgspec.ValidationError, msgspec.DecodeError):
            return None

    async def close(self) -> None:
        """Stop watching; the containers keep running, for the agent that comes back to adopt."""
        self.closed = True
        for watcher in self.watchers.values():
            watcher.cancel()
        self.watchers.clear()
        self.running.clear()
