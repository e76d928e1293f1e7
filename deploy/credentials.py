#!/usr/bin/env python3
"""Credentials (and optionally TLS certificates) for docker-compose.yml: run it once, on the host,
with the project's Python, before ``docker compose up``:

    .venv/bin/python deploy/credentials.py deploy/secrets            # users and passwords
    .venv/bin/python deploy/credentials.py --tls deploy/secrets      # and a CA, server certificates

It writes into DIR (0700; kept: a second run adds what is missing and changes no password):

- ``credentials.json`` (0600): every identity's password (``hyperjob.testkit.auth``);
- ``nats.conf`` (0600): nats-server's listeners, JetStream on ``/data`` and one user per identity
  with its permissions (``events.access``), plus a ``tls`` block with ``--tls``;
- ``users.acl`` (0644: passwords as SHA-256 only; the Redis image reads it as its own user): one
  Redis user per identity (``store.acl``), ``default`` off, and ``probe`` for the health check;
- ``<service>.env`` (0600, read by compose on the host): the service's ``NATS_URL``/``REDIS_URL``
  with its own credentials; ``streams.env`` the operator's, for the one-shot stream declaration;
- ``cli.env``, ``operator.env`` (0600): the host CLI's URLs (``set -a; . deploy/secrets/cli.env``);
- with ``--tls``: ``ca.pem``, ``server.pem``, ``server-key.pem`` (openssl; names ``nats``, ``redis``,
  ``localhost``, ``127.0.0.1``), and the URLs become ``tls://`` and ``rediss://``.

The clusters are compose's: ``cluster-a`` and ``cluster-b`` (``--clusters`` for others).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from hyperjob.events.services import CLUSTER_SERVICES, FLEET_SERVICES
from hyperjob.testkit.auth import Auth, make_certificates, system_identities, write_private

# compose service -> its identity (the service instance's name)
GLOBAL = {s.name: s.name for s in FLEET_SERVICES}
PER_CLUSTER = tuple(s.name for s in CLUSTER_SERVICES)


def compose_services(clusters: list[str]) -> dict[str, str]:
    services = dict(GLOBAL)
    for cluster in clusters:
        suffix = cluster.removeprefix("cluster-")
        services |= {f"{role}-{suffix}": f"{role}-{cluster}" for role in PER_CLUSTER}
    return services | {"dashboard": "dashboard", "streams": "operator"}


def nats_conf(auth: Auth, tls: bool) -> str:
    lines = [
        'listen: "0.0.0.0:4222"',
        'http: "0.0.0.0:8222"',
        'server_name: "nats"',
        'jetstream: {"store_dir": "/data"}',
        f"authorization: {json.dumps(auth.nats_authorization())}",
    ]
    if tls:
        files = {"cert_file": "/etc/nats/server.pem", "key_file": "/etc/nats/server-key.pem"}
        lines.append(f"tls: {json.dumps({**files, 'ca_file': '/etc/nats/ca.pem', 'timeout': 5})}")
    return "\n".join(lines) + "\n"


def redis_acl(auth: Auth) -> str:
    return auth.redis_acl_file() + "user probe on nopass resetkeys -@all +ping\n"


def urls(auth: Auth, identity: str, nats_host: str, redis_host: str, ca: str | None) -> str:
    """An env file: the identity's URLs; with TLS (``ca``: where its reader finds the CA) the
    servers' certificates are checked against that CA (nats-py reads SSL_CERT_FILE)."""
    if ca is None:
        nats_url = auth.nats_url(f"nats://{nats_host}", identity)
        return f"NATS_URL={nats_url}\nREDIS_URL={auth.redis_url(f'redis://{redis_host}/0', identity)}\n"
    nats_url = auth.nats_url(f"tls://{nats_host}", identity)
    redis_url = auth.redis_url(f"rediss://{redis_host}/0?ssl_ca_certs={ca}", identity)
    return f"NATS_URL={nats_url}\nREDIS_URL={redis_url}\nSSL_CERT_FILE={ca}\n"


def generate(directory: Path, clusters: list[str], tls: bool) -> Auth:
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / "credentials.json"
    auth = Auth.load(path) if path.is_file() else Auth()
    for identity in system_identities(clusters):
        auth.add(identity)
    auth.save(path)
    write_private(directory / "nats.conf", nats_conf(auth, tls).encode())
    (directory / "users.acl").write_text(redis_acl(auth))
    os.chmod(directory / "users.acl", 0o644)
    inside = "/etc/hyperjob/ca.pem" if tls else None  # where compose.tls.yml mounts the CA
    for service, identity in compose_services(clusters).items():
        write_private(directory / f"{service}.env", urls(auth, identity, "nats:4222", "redis:6379", inside).encode())
    nats_port, redis_port = os.environ.get("HYPERJOB_NATS_PORT", "4222"), os.environ.get("HYPERJOB_REDIS_PORT", "6379")
    host_ca = str(directory.resolve() / "ca.pem") if tls else None
    for identity in ("cli", "operator"):
        text = urls(auth, identity, f"127.0.0.1:{nats_port}", f"127.0.0.1:{redis_port}", host_ca)
        write_private(directory / f"{identity}.env", text.encode())
    if tls:
        make_certificates(directory)
    return auth


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--tls", action="store_true", help="also a CA and server certificates; tls:// and rediss://")
    parser.add_argument("--clusters", default="cluster-a,cluster-b", help="comma-separated (compose's two)")
    args = parser.parse_args(argv)
    generate(args.directory, [c for c in args.clusters.split(",") if c], args.tls)
    print(f"credentials in {args.directory}; the host CLI: set -a; . {args.directory}/cli.env; set +a")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
