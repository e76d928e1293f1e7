"""Materialized state in Redis: versioned JSON documents, the atomic commit (dedup markers,
version checks, bindings and the outputs to publish, all at once), sentinels that reveal a wiped
store, and node resource accounting; ``InMemoryStore`` with the same API.

Owns every Redis key under its prefix (layout in ``redis_store``). Invariants:

- a document's version starts at 1 and grows by one per write; conditional writes compare it;
- ``commit`` is one Lua script: markers, version checks, binds and unbinds, writes and the
  recorded outputs land together or not at all, so a redelivered event has exactly one effect;
- a bind never makes a node's used resources exceed its allocatable, whatever runs concurrently;
- a commit naming a sentinel fails (``wiped``) once the store lost that instance's state;
- redis-py exceptions are translated into ``StoreError`` subclasses at this boundary.

``RedisStore`` lives in ``store.redis_store`` (it imports redis); this package's top level
imports no I/O library, so in-process users (the simulator) do not pull redis in.
"""

from .errors import StoreError, StoreUnavailableError, UnknownNodeError, VersionConflictError
from .memory import InMemoryStore
from .model import (
    Binding,
    Commit,
    CommitResult,
    Doc,
    NodeUsage,
    Output,
    Unbind,
    Write,
    binding_kind,
    encode_doc,
    entry_of,
    parse_entry,
    render_entry,
)
from .protocol import Store

__all__ = [
    "Binding",
    "Commit",
    "CommitResult",
    "Doc",
    "InMemoryStore",
    "NodeUsage",
    "Output",
    "Store",
    "StoreError",
    "StoreUnavailableError",
    "Unbind",
    "UnknownNodeError",
    "VersionConflictError",
    "Write",
    "binding_kind",
    "encode_doc",
    "entry_of",
    "parse_entry",
    "render_entry",
]
