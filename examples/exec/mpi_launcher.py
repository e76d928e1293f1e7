"""The MPI launcher of an exec-mode HyperJob: ``mpirun`` over workers in several clusters, without ssh.

On Kubernetes, ``mpirun`` starts an MPI proxy on each worker over ssh (the workers run ``sshd``). Exec-mode
pods are local processes with no sshd, so this runs MPICH's ``mpirun -launcher manual``: it prints the
command of each worker's proxy instead of running it, and this script hands each worker its command
over TCP (``mpi_worker.py`` asks, then runs it). The hostfile is the HyperJob's one world
(``HYDRA_HOST_FILE``, written by the mpi plugin: every worker of every cluster with its slots), so
proxy *i* belongs to the *i*-th host of that file.

    mpi_launcher.py --port=PORT PROGRAM [ARGS...]    # PROGRAM runs on every rank, with this Python
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

LAUNCH, LAUNCH_END = "HYDRA_LAUNCH: ", "HYDRA_LAUNCH_END"


def read_hostfile() -> list[tuple[str, int]]:
    """(host, slots) of every worker, from the file the mpi plugin wrote (under the pod's files root)."""
    path = os.environ.get("HYDRA_HOST_FILE", "/etc/mpi/hostfile")
    text = (Path(os.environ.get("HYPERJOB_FILES_ROOT", "/")) / path.lstrip("/")).read_text()
    hosts = []
    for line in text.splitlines():
        if not line.strip():
            continue
        host, _, rest = line.strip().partition(" ")  # Open MPI: "host slots=N"
        host, _, slots = host.partition(":")          # MPICH, Intel MPI: "host:N"
        hosts.append((host, int(slots or rest.removeprefix("slots=") or 1)))
    return hosts


def mpirun() -> str:
    found = shutil.which("mpirun", path=str(Path(sys.executable).parent)) or shutil.which("mpirun")
    if found is None:
        sys.exit("mpirun not found: install the mpich wheel (make install) next to this Python")
    return found


def serve(port: int, proxies: dict[str, list[str]]) -> None:
    """Give each worker that asks its proxy's command, then stop listening."""
    left = dict(proxies)
    with socket.create_server(("0.0.0.0", port), reuse_port=False) as server:
        while left:
            conn, _ = server.accept()
            with conn:
                pod = conn.makefile().readline().strip()
                host = next((h for h in left if h.startswith(pod + ".")), None)
                conn.sendall((json.dumps(left.pop(host) if host else None) + "\n").encode())
                print(f"launcher: {pod} takes the MPI proxy of {host}" if host else f"launcher: {pod} is no worker",
                      flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("program", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    hosts = read_hostfile()
    hostfile = Path(os.environ.get("HYPERJOB_POD_DIR", ".")) / "hostfile"
    hostfile.write_text("".join(f"{host}:{slots}\n" for host, slots in hosts))
    ranks = sum(slots for _, slots in hosts)
    print(f"launcher: {ranks} ranks on {len(hosts)} workers: {', '.join(h for h, _ in hosts)}", flush=True)
    program = [sys.executable, str(Path(options.program[0]).resolve()), *options.program[1:]]
    # -genvnone: each rank keeps its own pod's environment (its proxy's), not the launcher's.
    command = [mpirun(), "-launcher", "manual", "-f", str(hostfile), "-n", str(ranks), "-genvnone", *program]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    assert proc.stdout is not None
    launches = []
    for line in proc.stdout:
        if line.startswith(LAUNCH):
            launches.append(line[len(LAUNCH):].split())
        elif line.strip() == LAUNCH_END:
            break
        else:
            print(line, end="", flush=True)
    proxies = {host: argv for (host, _), argv in zip(hosts, launches, strict=True)}
    threading.Thread(target=serve, args=(options.port, proxies), daemon=True).start()
    for line in proc.stdout:
        print(line, end="", flush=True)
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
