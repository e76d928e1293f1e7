"""Materialized state in Redis: versioned JSON documents, the handler's atomic dedup-and-write
(``apply``), and node resource accounting for gang binding; ``InMemoryStore`` with the same API.

Owns every Redis key under its prefix (layout in ``redis_store``). Invariants:

- a document's version starts at 1 and grows by one per write; conditional writes compare it;
- ``apply`` is one Lua script: the dedup marker, the version checks, the writes and the recorded
  outputs land together or not at all, so a redelivered event has exactly one effect;
- ``bind_gang`` is one Lua compare-and-set over every node a gang touches: all pods bind or none,
  and a node's used resources never exceed its allocatable, whatever runs concurrently;
- redis-py exceptions are translated into ``StoreError`` subclasses at this boundary.
"""

from .errors import StoreError, StoreUnavailableError, UnknownNodeError, VersionConflictError
from .memory import InMemoryStore
from .model import ApplyItem, ApplyResult, Binding, BindResult, Conflict, Doc, NodeUsage, Output, Write, encode_doc
from .protocol import Store
from .redis_store import MARKER_TTL, RedisStore
from .repos import Repository, Versioned

__all__ = [
    "MARKER_TTL", "ApplyItem", "ApplyResult", "BindResult", "Binding", "Conflict", "Doc", "InMemoryStore",
    "NodeUsage", "Output", "RedisStore", "Repository", "Store", "StoreError", "StoreUnavailableError",
    "UnknownNodeError", "Versioned", "VersionConflictError", "Write", "encode_doc"
]
