import msgspec


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    nats_url: str = "nats://127.0.0.1:4222"
    redis_url: str = "redis://127.0.0.1:6379/0"
    log_level: str = "INFO"
    # How often HyperJobs that could not be split yet (no room now) are planned again, in seconds.
    replan_period: float = 2.0
    # Failovers (children moved off a lost cluster) at most this many at once, then this many per
    # second (Kubernetes' node-eviction rate limit): a mass failover, if it must happen, goes slowly.
    failover_burst: int = 20
    failover_rate: float = 1.0
