"""Who is asking, and whether they may: bearer tokens per identity, decided as NATS decides.

A token is the identity's password in ``$HYPERJOB_HOME/credentials.json`` (ADR 0006: the services',
the operator's, the CLI's user's and the people ``hyperjob user add`` made), so a kubeconfig is
exactly as powerful as the NATS URL of the same identity. The file is read again whenever it
changes: a person added while the system runs is known at the next request.

A write is allowed when the identity's NATS permissions (``Identity.nats_permissions``, what
nats-server is configured with) let it publish the request's subject (``hj.manifest.apply.<ns>``
...): the same verbs and namespaces, decided by the same function. Every identity may read.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgspec

from hyperjob.events.access import Identity, matches


class Credentials(msgspec.Struct, kw_only=True):
    """What the apiserver reads of a credentials file (``hyperjob.testkit.auth.Auth`` writes it;
    the test kit is not in the image)."""

    identities: list[Identity] = []
    passwords: dict[str, str] = {}


class Tokens:
    """The identities of a credentials file, by the SHA-256 of their token."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: float | None = None
        self._by_digest: dict[str, Identity] = {}

    def identity(self, token: str) -> Identity | None:
        self._reload()
        return self._by_digest.get(_digest(token))

    def _reload(self) -> None:
        try:
            changed = self.path.stat().st_mtime
        except OSError:  # no credentials: nobody is known
            self._by_digest, self._seen = {}, None
            return
        if changed == self._seen:
            return
        auth = msgspec.json.decode(self.path.read_bytes(), type=Credentials)
        self._by_digest = {_digest(auth.passwords[i.name]): i for i in auth.identities if i.name in auth.passwords}
        self._seen = changed


def may_publish(identity: Identity, subject: str) -> bool:
    """Whether nats-server would let ``identity`` publish ``subject`` (its allow list, less its denials)."""
    publish = identity.nats_permissions()["publish"]
    if any(matches(p, subject) for p in publish.get("deny", [])):
        return False
    return any(matches(p, subject) for p in publish["allow"])


def bearer(header: str) -> str | None:
    scheme, _, token = header.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
