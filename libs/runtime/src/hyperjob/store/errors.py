"""The store's one exception hierarchy; redis-py's exceptions never leave the package."""

from __future__ import annotations


class StoreError(Exception):
    """Base of every error the store raises."""


class StoreUnavailableError(StoreError):
    """Redis could not be reached or timed out. Transient: a handler should retry; the bus holds
    the message meanwhile without using up its deliveries (``bus.errors.is_dependency_down``)."""

    transient = True
    dependency_down = True


class VersionConflictError(StoreError):
    """``put_if_version``/``delete`` found ``actual`` where the caller expected ``expected``
    (0 = absent). The caller reloads and decides again, or drops a stale event."""

    transient = True

    def __init__(self, kind: str, name: str, expected: int, actual: int) -> None:
        super().__init__(f"{kind}/{name}: expected version {expected}, found {actual}")
        self.kind = kind
        self.name = name
        self.expected = expected
        self.actual = actual


class UnknownNodeError(StoreError):
    """Resource accounting was asked about a node that has no allocatable registered."""

    def __init__(self, cluster: str, node: str) -> None:
        super().__init__(f"unknown node {cluster}/{node}")
        self.cluster = cluster
        self.node = node
