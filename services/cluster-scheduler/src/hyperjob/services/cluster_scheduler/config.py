import msgspec


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    cluster: str
    nats_url: str = "nats://127.0.0.1:4222"
    redis_url: str = "redis://127.0.0.1:6379/0"
    log_level: str = "INFO"
    schedule_period: str = "1s"
    # Volcano volcano-scheduler.conf text; empty means the live default: Volcano's default conf
    # plus the fragmentation-aware GPU scorer (``schedcore.LIVE_DEFAULT_CONF``).
    scheduler_conf: str = ""
    labels: dict[str, str] = {}
    # Declared network bandwidth (Gb/s) from this cluster to others: a HyperJob spanning clusters
    # prefers the best-connected ones.
    links: dict[str, float] = {}
    # Declared price per resource-hour (cpu per core, memory per GiB, others per unit): a HyperJob
    # with ``splitPolicy.prefer: cost`` chooses the plan that costs least.
    prices: dict[str, float] = {}
    # Data sets this cluster holds: a HyperJob naming them in ``dataSets`` prefers it.
    data_sets: list[str] = []
    # Bandwidth (Gb/s) to where data sets it does not hold live, e.g. {imagenet: 100}: of clusters
    # holding as many of a HyperJob's ``dataSets``, it prefers the better linked.
    data_links: dict[str, float] = {}
    # A node is NotReady once its agent's beats have not named it alive for this long, measured
    # against the newest beat this scheduler received (not the wall clock: a scheduler cut off
    # from the bus judges nothing). Its pods are then evicted with reason nodeDown.
    node_timeout: float = 10.0
    # When more than this share of the cluster's nodes goes NotReady at once, the scheduler
    # does not evict (Kubernetes' full-disruption rule: it is far likelier that the scheduler or
    # the bus is cut off than that most nodes died together).
    eviction_pause_share: float = 0.55
