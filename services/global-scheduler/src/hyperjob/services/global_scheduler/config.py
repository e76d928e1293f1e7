import msgspec

from hyperjob import fleetcore


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    nats_url: str = "nats://127.0.0.1:4222"
    redis_url: str = "redis://127.0.0.1:6379/0"
    log_level: str = "INFO"
    # How often waiting owners and children are tried again (and sooner when something changes), in seconds.
    retry_period: float = 2.0
    # The fleet lease granted to every cluster it hears (issue 33, docs/reliability.md): a cluster
    # stops its children's pods this long after its last report the fleet heard; the fleet moves
    # them only after this plus fleetcore.LEASE_MARGIN (the splitter's 30 s silence).
    fleet_lease: float = fleetcore.FLEET_LEASE
