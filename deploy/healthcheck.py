#!/usr/bin/env python3
"""Container health probe for the HyperJob services: ``hyperjob-healthcheck [URL]``.

Without URL: healthy when this container's service holds an established TCP connection to NATS
and one to Redis (the ports of ``NATS_URL`` and ``REDIS_URL``, the settings the service itself
reads; from the kernel's socket table of the container's network namespace, ``/proc/net/tcp`` and
``tcp6``), and both servers accept a new TCP connection from here within 1 s. So a service that
never connected, or is reconnecting, or is cut off from either server is unhealthy. What it cannot
see: a connection the kernel still lists as established after the path under it broke (until TCP
or the client's pings give up on it). The services' own /healthz will know better.

With URL: healthy when ``GET URL`` answers 2xx within 2 s. Once the services serve ``/healthz``,
compose switches to it in one place (the ``x-healthcheck`` block of docker-compose.yml).

Exit status 0 healthy, 1 unhealthy with the reason on stderr: what Docker and podman expect.
"""

from __future__ import annotations

import os
import socket
import sys
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

ESTABLISHED = "01"  # the kernel's TCP state code in /proc/net/tcp
DEFAULT_PORTS = {"nats": 4222, "tls": 4222, "redis": 6379, "rediss": 6379}
SOCKET_TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))


def server_ports(urls: str) -> set[int]:
    """The ports of a server URL, or of each in a comma-separated list (a NATS cluster's seeds)."""
    ports = set()
    for url in urls.split(","):
        parts = urlsplit(url.strip())
        ports.add(parts.port or DEFAULT_PORTS.get(parts.scheme, 0))
    return ports


def established_remote_ports(tables: tuple[Path, ...] = SOCKET_TABLES) -> set[int]:
    """Remote ports of this network namespace's established TCP connections."""
    ports = set()
    for table in tables:
        if not table.exists():
            continue
        for line in table.read_text().splitlines()[1:]:
            fields = line.split()
            remote, state = fields[2], fields[3]
            if state == ESTABLISHED:
                ports.add(int(remote.rsplit(":", 1)[1], 16))
    return ports


def reachable(urls: str) -> bool:
    """Whether any server of ``urls`` accepts a TCP connection within 1 s."""
    for url in urls.split(","):
        parts = urlsplit(url.strip())
        try:
            socket.create_connection((parts.hostname, parts.port or DEFAULT_PORTS.get(parts.scheme, 0)), 1).close()
            return True
        except OSError:
            continue
    return False


def connection_problems(environ: dict[str, str], connected: set[int]) -> list[str]:
    problems = []
    for variable, default in (("NATS_URL", "nats://127.0.0.1:4222"), ("REDIS_URL", "redis://127.0.0.1:6379")):
        url = environ.get(variable, default)
        if not server_ports(url) & connected:
            problems.append(f"the service holds no connection to {variable}={url}")
        elif not reachable(url):
            problems.append(f"{variable}={url} cannot be reached from here")
    return problems


def http_problems(url: str) -> list[str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:  # noqa: S310 - a URL compose gives
            return [] if 200 <= answer.status < 300 else [f"{url} answered {answer.status}"]
    except OSError as exc:
        return [f"{url}: {exc}"]


def main(argv: list[str]) -> int:
    problems = http_problems(argv[0]) if argv else connection_problems(dict(os.environ), established_remote_ports())
    for problem in problems:
        print(f"unhealthy: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
