"""Separate hosts on one machine: each a network namespace joined to the root namespace by a veth
pair, so a host reaches NATS and Redis only over its link and taking the link down is a real
partition. Everything made here is removed when the block ends, whatever happened: the processes
left in a namespace (an agent's pods outlive it, as they would on a real host) are killed by id
(``ip netns pids``), then the namespace, which takes its veth pair with it.

Needs root and ``ip`` (iproute2)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ETC_NETNS = Path("/etc/netns")  # per-namespace files over /etc's, as ``ip netns exec`` has them


@dataclass
class Host:
    """One namespace: ``address`` is its own end of the link, ``gateway`` the root namespace's end
    (where the control plane listens for it)."""

    netns: str
    node: str
    link: str  # the root side of the veth pair: down is a cut cable
    address: str
    gateway: str
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def inode(self) -> int:
        """The namespace's identity, as ``/proc/PID/ns/net`` names it (``net:[INODE]``)."""
        return os.stat(f"/run/netns/{self.netns}").st_ino

    def set_link(self, up: bool) -> None:
        ip("link", "set", self.link, "up" if up else "down")

    def spawn(self, argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
        """Run ``argv`` inside this host (its output in ``log``); stopped when the hosts go.

        Its network and its ``/etc/hosts`` are the host's own, as ``ip netns exec`` would make
        them, but not its ``/sys``: ``ip netns exec`` mounts the namespace's sysfs there, without
        the cgroup filesystems, and a container-mode agent's podman could then create no container
        ("no cgroup mount found")."""
        hosts = ETC_NETNS / self.netns / "hosts"  # a routed host's (``_route``)
        command = ["nsenter", f"--net=/run/netns/{self.netns}", "--"]
        if hosts.exists():
            command += ["unshare", "--mount", "--", "sh", "-c", f'mount --bind {hosts} /etc/hosts && exec "$@"', "sh"]
        command += argv
        with open(log, "wb") as out:
            proc = subprocess.Popen(command, env=env, stdout=out, stderr=out)
        self.processes.append(proc)
        return proc


def ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


@contextlib.contextmanager
def hosts(count: int, tag: str, routed: bool = False) -> Iterator[list[Host]]:
    """``count`` hosts named ``<tag>-host-<i>``, each on its own /30 in 10.227.0.0/16 (the block
    chosen by this process's id, so concurrent test runs on one machine do not collide).

    ``routed``: the hosts also reach each other, as a fleet's hosts do: each routes the block
    through its gateway, whose end of the link forwards (that link's own ``forwarding``, not
    the machine's), and the machine's hostname resolves inside each host to the host's own
    address (``/etc/netns/<netns>/hosts``, which ``ip netns exec`` mounts as ``/etc/hosts``), as a
    real host's name resolves to its address: gloo and NCCL pick their interface from it."""
    block = os.getpid() % 250
    made: list[Host] = []
    try:
        for i in range(count):
            base = 4 * i
            host = Host(
                netns=f"{tag}-host-{i}",
                node=f"{tag}-host-{i}",
                link=f"hj{os.getpid() % 100000}r{i}",
                address=f"10.227.{block}.{base + 2}",
                gateway=f"10.227.{block}.{base + 1}",
            )
            ip("netns", "add", host.netns)
            made.append(host)
            _wire(host)
            if routed:
                _route(host, f"10.227.{block}.0/24")
        yield made
    finally:
        for host in made:
            _tear_down(host)


def _wire(host: Host) -> None:
    inner = f"{host.link[:-2]}n{host.link[-1]}"
    ip("link", "add", host.link, "type", "veth", "peer", "name", inner)
    ip("link", "set", inner, "netns", host.netns)
    ip("addr", "add", f"{host.gateway}/30", "dev", host.link)
    ip("link", "set", host.link, "up")
    ip("-n", host.netns, "addr", "add", f"{host.address}/30", "dev", inner)
    ip("-n", host.netns, "link", "set", inner, "up")
    ip("-n", host.netns, "link", "set", "lo", "up")


def _route(host: Host, block: str) -> None:
    Path(f"/proc/sys/net/ipv4/conf/{host.link}/forwarding").write_text("1")
    ip("-n", host.netns, "route", "add", block, "via", host.gateway)
    etc = ETC_NETNS / host.netns
    etc.mkdir(parents=True, exist_ok=True)
    (etc / "hosts").write_text(f"127.0.0.1 localhost\n{host.address} {socket.gethostname()}\n")


def _tear_down(host: Host) -> None:
    for proc in host.processes:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in host.processes:
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    # What the agents left (their pods): only processes in this test's own namespace.
    for _ in range(3):
        pids = subprocess.run(["ip", "netns", "pids", host.netns], capture_output=True, text=True, check=False)
        alive = [int(pid) for pid in pids.stdout.split()]
        if not alive:
            break
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
    subprocess.run(["ip", "netns", "del", host.netns], capture_output=True, check=False)
    subprocess.run(["ip", "link", "del", host.link], capture_output=True, check=False)  # gone with its peer
    shutil.rmtree(ETC_NETNS / host.netns, ignore_errors=True)


def processes_in(token: str) -> dict[int, int]:
    """The live processes whose command line holds ``token``: pid → network namespace inode."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if token.encode() not in (proc / "cmdline").read_bytes():
                continue
            if (proc / "stat").read_text().split(") ", 1)[-1].startswith("Z"):
                continue  # a zombie only waits for its parent to reap it
            found[int(proc.name)] = int(os.readlink(proc / "ns" / "net").split("[")[1].rstrip("]"))
        except (OSError, IndexError, ValueError):
            continue
    return found
