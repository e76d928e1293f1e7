import msgspec


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    cluster: str
    nats_url: str = "nats://127.0.0.1:4222"
    redis_url: str = "redis://127.0.0.1:6379/0"
    log_level: str = "INFO"
    # How often due policy timeouts (delayed actions) are looked for, in seconds.
    timer_period: float = 1.0
