import msgspec


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    cluster: str
    nats_url: str = "nats://127.0.0.1:4222"
    redis_url: str = "redis://127.0.0.1:6379/0"
    log_level: str = "INFO"
    schedule_period: str = "1s"
    # Volcano volcano-scheduler.conf text; empty means Volcano's default conf.
    scheduler_conf: str = ""
    labels: dict[str, str] = {}
    # Declared network bandwidth (Gb/s) from this cluster to others: a HyperJob spanning clusters
    # prefers the best-connected ones.
    links: dict[str, float] = {}
    # A node whose last heartbeat is older than this is NotReady: nothing new lands on it and its
    # pods are evicted with reason nodeDown.
    node_timeout: float = 10.0
    # How often node health is re-read from the node-agents' telemetry (GPU and fabric faults
    # taint a node against new GPU / multi-node pods); 0 turns health checks off.
    health_period: float = 5.0
    # Telemetry older than this says nothing about a node any more (its agent stopped reporting
    # it): the node counts as healthy again, as a node without telemetry does.
    telemetry_max_age: float = 120.0
