from typing import Literal

import msgspec


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    cluster: str
    nats_url: str = "nats://127.0.0.1:4222"
    redis_url: str = "redis://127.0.0.1:6379/0"
    log_level: str = "INFO"
    # The ssh plugin's key pairs: from the system's randomness (live), or derived from the job uid
    # (the simulator, whose output must be the same on every run).
    ssh_keys: Literal["random", "deterministic"] = "random"
