"""An MPI worker of an exec-mode HyperJob: ask the launcher for this pod's MPI proxy, then become it.

Where a Kubernetes worker runs ``sshd`` for ``mpirun`` to log in, this asks the launcher
(``mpi_launcher.py``, at the launcher task's host from ``VC_LAUNCHER_HOSTS``, which the HyperJob's
world lists for every pod of every cluster) for the proxy command meant for this pod, and runs it in
place: the ranks it starts are processes of this pod, with this pod's environment.

    mpi_worker.py --port=PORT [--timeout=SECONDS]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time


def ask(host: str, port: int, pod: str, timeout: float) -> list[str] | None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=5) as conn:
                conn.sendall(f"{pod}\n".encode())
                return json.loads(conn.makefile().readline())  # type: ignore[no-any-return]
        except (OSError, ValueError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--timeout", type=float, default=120.0)
    options = parser.parse_args()
    pod, cluster = os.environ["HYPERJOB_POD"], os.environ.get("HYPERJOB_CLUSTER", "?")
    launcher = os.environ["VC_LAUNCHER_HOSTS"].split(",")[0]
    argv = ask(launcher, options.port, pod, options.timeout)
    if not argv:
        print(f"worker {pod}: the launcher has no proxy for this pod", flush=True)
        return 1
    print(f"worker {pod} in cluster {cluster}: running MPI proxy {argv[-1]}", flush=True)
    os.execv(argv[0], argv)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
