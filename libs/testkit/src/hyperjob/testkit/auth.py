"""The credentials of one system and what the servers make of them (ADR 0006).

Every service instance, every person with the CLI and the operator is an ``Identity``: a NATS user
whose publish permissions are its role's grant (``events.access.nats_permissions``) and a Redis
ACL user limited to its own keys (``store.acl.redis_acl``). ``Auth`` holds the identities and
their generated passwords; it renders

- the ``authorization`` block of nats-server's config (``nats_authorization``), and
- a Redis ACL file (``redis_acl_file``: passwords as SHA-256, the ``default`` user off),

and gives each identity its URLs (``nats_url``/``redis_url``: ``scheme://name:password@host``,
which nats-py and redis-py both read).

Invariants: the credentials file and the rendered server files are written with mode 0600 (in a
0700 directory), a password once generated is kept (a server that restarts with the same data sees
the same users), and nothing here connects anywhere. Anyone who can read the credentials file can
act as any identity of the system: it is the operator's, as a kubeconfig is.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import TypedDict

import msgspec

from hyperjob.events import access
from hyperjob.events.access import OPERATOR, Identity, with_credentials
from hyperjob.events.services import CLUSTER_SERVICES, FLEET_SERVICES
from hyperjob.store.acl import redis_acl

__all__ = [
    "APISERVER",
    "CLI_USER",
    "OPERATOR",
    "Auth",
    "Identity",
    "make_certificates",
    "system_identities",
    "with_credentials",
    "write_private",
]

CLI_USER = "cli"  # the person at the CLI of `hyperjob up`: submits, deletes, commands, reads
DASHBOARD = "dashboard"  # reads only
APISERVER = "apiserver"  # the Kubernetes API: sends requests for the people it serves
GLOBAL_ROLES: tuple[access.Role, ...] = tuple(s.name for s in FLEET_SERVICES)
CLUSTER_ROLES: tuple[access.Role, ...] = tuple(s.name for s in CLUSTER_SERVICES)


class NatsUser(TypedDict):
    """One user of nats-server's ``authorization`` block."""

    user: str
    password: str
    permissions: dict[str, dict[str, list[str]]]


class NatsAuthorization(TypedDict):
    """nats-server's ``authorization`` block, as ``Auth.nats_authorization`` writes it."""

    users: list[NatsUser]


def system_identities(clusters: Iterable[str]) -> list[Identity]:
    """Everyone of a system with these clusters: each service instance (the apiserver's
    included), the operator, the CLI's user and the dashboard."""
    identities = [Identity(name=role, role=role) for role in GLOBAL_ROLES]
    for cluster in clusters:
        identities += [Identity(name=f"{role}-{cluster}", role=role, cluster=cluster) for role in CLUSTER_ROLES]
    return [
        *identities,
        Identity(name=OPERATOR, role="operator"),
        Identity(name=CLI_USER, role="user"),
        Identity(name=DASHBOARD, role="user", verbs=()),
    ]


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` readable by its owner only (0600, in a 0700 directory), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = path.with_name(path.name + ".tmp")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(partial, 0o600)
    partial.replace(path)


class Auth(msgspec.Struct, kw_only=True):
    """The identities of one system and their passwords; ``prefix`` is the Redis key prefix the
    services use (``RedisStore``'s ``hj``)."""

    identities: list[Identity] = []
    passwords: dict[str, str] = {}
    prefix: str = "hj"

    @classmethod
    def generate(cls, identities: Iterable[Identity], prefix: str = "hj") -> Auth:
        auth = cls(prefix=prefix)
        for identity in identities:
            auth.add(identity)
        return auth

    @classmethod
    def load(cls, path: Path) -> Auth:
        return msgspec.json.decode(path.read_bytes(), type=cls)

    def save(self, path: Path) -> None:
        write_private(path, msgspec.json.format(msgspec.json.encode(self)))

    def add(self, identity: Identity) -> bool:
        """Add (or redefine) an identity, generating its password once; True when anything changed."""
        known = self.identity(identity.name)
        if known == identity:
            return False
        self.identities = [i for i in self.identities if i.name != identity.name] + [identity]
        self.passwords.setdefault(identity.name, secrets.token_hex(24))
        return True

    def identity(self, name: str) -> Identity | None:
        return next((i for i in self.identities if i.name == name), None)

    def password(self, name: str) -> str:
        if name not in self.passwords:
            raise KeyError(f"no identity {name!r} (known: {', '.join(sorted(self.passwords))})")
        return self.passwords[name]

    def nats_url(self, url: str, name: str) -> str:
        return with_credentials(url, name, self.password(name))

    def redis_url(self, url: str, name: str) -> str:
        return with_credentials(url, name, self.password(name))

    # -- what the servers read --------------------------------------------------------------------

    def nats_authorization(self) -> NatsAuthorization:
        """nats-server's ``authorization`` block: one user per identity with its permissions."""
        durables = [d for i in self.identities for d in i.durables]
        users = [
            NatsUser(user=i.name, password=self.passwords[i.name], permissions=i.nats_permissions(durables))
            for i in self.identities
        ]
        return {"users": users}

    def redis_acl_file(self) -> str:
        """A redis-server ``aclfile``: the ``default`` (anonymous) user off, one user per identity
        with its key patterns and commands; passwords stored as their SHA-256 only."""
        lines = ["user default off resetkeys resetchannels -@all"]
        for i in self.identities:
            password = self.passwords[i.name]
            rules = redis_acl(i.role, password, prefix=self.prefix, cluster=i.cluster, instance=i.name)
            digest = "#" + hashlib.sha256(password.encode()).hexdigest()
            rules = [digest if rule == f">{password}" else rule for rule in rules if rule != "reset"]
            lines.append(" ".join(["user", i.name, *rules]))
        return "\n".join(lines) + "\n"


def make_certificates(directory: Path) -> None:
    """``ca.pem`` and one server certificate (``server.pem``, ``server-key.pem``) for every name the
    servers answer to — ``nats``, ``redis`` (compose), ``localhost``, ``127.0.0.1`` — made with the
    ``openssl`` command. Kept when they exist."""
    if (directory / "server.pem").exists():
        return
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "825", "-subj", "/CN=hyperjob-ca",
            "-keyout", "ca-key.pem", "-out", "ca.pem")  # fmt: skip
    (directory / "san.ext").write_text("subjectAltName=DNS:nats,DNS:redis,DNS:localhost,IP:127.0.0.1\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=hyperjob", "-keyout", "server-key.pem",
            "-out", "server.csr")  # fmt: skip
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem", "-CAcreateserial",
            "-days", "825", "-extfile", "san.ext", "-out", "server.pem")  # fmt: skip
    os.chmod(directory / "ca-key.pem", 0o600)
    # The Redis image reads the key as its own user: readable, in a directory (0700) that is not.
    os.chmod(directory / "server-key.pem", 0o644)
