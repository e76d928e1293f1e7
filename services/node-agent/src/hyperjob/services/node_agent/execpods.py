"""Exec mode: a pod's container command runs as a local process.

Each pod gets a sandbox ``<work_dir>/<cluster>/<pod>/``: its plugin files under ``files/`` (an
absolute path such as ``/etc/volcano/trainer.host`` lands at ``files/etc/volcano/trainer.host``;
``HYPERJOB_FILES_ROOT`` names that directory) and its output, stdout and stderr interleaved and
appended across restarts, in ``log`` — which ``hyperjob logs POD`` shows. The process gets the
agent's basic environment (``config.INHERITED``) and then the pod's full env (job plugins and the
cross-cluster training env), with pod hostnames mapped to 127.0.0.1 (``domain.local_env``), and
runs in its own process group so that killing it (eviction, delete) kills its children too:
SIGTERM, then SIGKILL after the grace period. A GPU pod sees only the devices of its binding
(``runners.gpu_assignment``). An agent that restarts cannot re-attach to processes it did not
start: ``recover`` kills what is left of them and the agent reports those pods lost.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import IO

import structlog

from hyperjob import events

from . import domain
from .runners import OnExit, gpu_assignment

EXIT_NOT_FOUND, EXIT_NOT_EXECUTABLE = 127, 126  # what a shell or container runtime reports
log = structlog.get_logger("node-agent")


def sandbox(work_dir: str, cluster: str, pod: str) -> Path:
    return Path(work_dir).resolve() / cluster / pod


def prepare_sandbox(work_dir: str, cluster: str, msg: events.PodStart) -> tuple[Path, Path]:
    """The pod's sandbox, made, with its plugin files written under ``files/`` (module doc); both
    paths. Shared by the exec and container runtimes."""
    box = sandbox(work_dir, cluster, msg.pod)
    files = box / "files"
    for path, content in msg.files.items():
        target = files / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    box.mkdir(parents=True, exist_ok=True)
    return box, files


class ProcessRunner:
    """The processes of one agent's pods, keyed by pod name (a ``runners.PodRunner``);
    ``on_exit(pod, uid, code, reason)`` is awaited when a process ends by itself (not when it is killed)."""

    def __init__(
        self, cluster: str, work_dir: str, cwd: str, base_env: dict[str, str], kill_grace: float, on_exit: OnExit
    ) -> None:
        self.cluster = cluster
        self.work_dir = work_dir
        self.cwd = cwd or None
        self.base_env = base_env
        self.kill_grace = kill_grace
        self.on_exit = on_exit
        self.procs: dict[str, asyncio.subprocess.Process] = {}
        self.watchers: dict[str, asyncio.Task[None]] = {}
        self.closed = False

    async def launch(self, msg: events.PodStart, restarts: int = 0) -> None:
        """Start (or restart in place) the container of ``msg.pod`` and watch it."""
        if self.closed:
            return  # the agent is stopping: what has not started stays down
        box, files = prepare_sandbox(self.work_dir, self.cluster, msg)
        env = {
            **self.base_env,
            **domain.local_env(msg.env),
            **gpu_assignment(msg.devices, "exec", nvml_gpus=False)[0],
            "HOSTNAME": msg.pod,
            "HYPERJOB_POD": msg.pod,
            "HYPERJOB_POD_DIR": str(box),
            "HYPERJOB_FILES_ROOT": str(files),
        }
        with open(box / "log", "ab") as out:
            out.write(f"--- hyperjob: {msg.pod} started on {msg.node} (restart {restarts}) ---\n".encode())
            out.flush()
            proc = await self._spawn([*msg.command, *msg.args], env, out)
        if isinstance(proc, int):
            self.watchers[msg.pod] = asyncio.create_task(self.on_exit(msg.pod, msg.uid, proc, "StartError"))
            return
        self.procs[msg.pod] = proc
        (box / "pid").write_text(str(proc.pid))  # lets a restarted agent kill what it can no longer watch
        self.watchers[msg.pod] = asyncio.create_task(self._watch(msg.pod, msg.uid, proc))

    async def _spawn(self, argv: list[str], env: dict[str, str], out: IO[bytes]) -> asyncio.subprocess.Process | int:
        """The process, or the exit code a container runtime gives a command it cannot start."""
        if not argv:
            log.warning("pod_has_no_command")
            return EXIT_NOT_FOUND
        try:
            return await asyncio.create_subprocess_exec(
                *argv,
                env=env,
                cwd=self.cwd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        except FileNotFoundError:
            return EXIT_NOT_FOUND
        except PermissionError:
            return EXIT_NOT_EXECUTABLE

    async def _watch(self, pod: str, uid: str, proc: asyncio.subprocess.Process) -> None:
        code = await proc.wait()
        if self.procs.get(pod) is not proc:
            return  # killed on purpose: the stop already reported it
        del self.procs[pod]
        # A signal death is reported as 128 + signal, as shells and the kubelet do.
        code = code if code >= 0 else 128 - code
        await self.on_exit(pod, uid, code, "Completed" if code == 0 else "Error")

    async def kill(self, pod: str, grace: float | None = None) -> None:
        """Stop the pod's process group: SIGTERM, SIGKILL after the grace period (``grace`` when
        shorter). Idempotent."""
        proc = self.procs.pop(pod, None)
        watcher = self.watchers.pop(pod, None)
        limit = self.kill_grace if grace is None else min(grace, self.kill_grace)
        if proc is not None and proc.returncode is None:
            signal_group(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), limit)
            except TimeoutError:
                signal_group(proc.pid, signal.SIGKILL)
                await proc.wait()
        if watcher is not None and watcher is not asyncio.current_task():
            watcher.cancel()

    async def freeze(self, pod: str) -> bool:
        proc = self.procs.get(pod)
        if proc is not None and proc.returncode is None:
            signal_group(proc.pid, signal.SIGSTOP)  # cannot be caught or ignored
        return True

    async def thaw(self, pod: str) -> None:
        proc = self.procs.get(pod)
        if proc is not None and proc.returncode is None:
            signal_group(proc.pid, signal.SIGCONT)

    async def recover(self, pods: Mapping[str, domain.RunningPod]) -> dict[str, events.PodStart]:
        """Kill what is left of the processes of ``pods`` (their pid files): none is watched again."""
        for name in sorted(pods):
            pid_file = sandbox(self.work_dir, self.cluster, name) / "pid"
            pid = pid_file.read_text().strip() if pid_file.is_file() else ""
            if pid.isdigit():
                signal_group(int(pid), signal.SIGKILL)
        return {}

    async def close(self) -> None:
        """Kill every process and stop every watcher, including one waiting to restart its pod."""
        self.closed = True
        for pod in sorted({*self.procs, *self.watchers}):
            await self.kill(pod)


def signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:  # already gone
        pass


def log_path(work_dir: str, cluster: str, pod: str) -> Path:
    return sandbox(work_dir, cluster, pod) / "log"


def restart_delay(restarts: int) -> float:
    """Back-off before restarting a container in place: 1 s, 2 s, 4 s ... at most 30 s (CrashLoopBackOff)."""
    return float(min(30, 2 ** max(0, restarts - 1)))
