from typing import Literal

import msgspec


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    cluster: str
    mode: Literal["simulate"] = "simulate"
    nats_url: str = "nats://127.0.0.1:4222"
    redis_url: str = "redis://127.0.0.1:6379/0"
    log_level: str = "INFO"
    # Simulated fleet: how many nodes, each with this allocatable and these labels.
    nodes: int = 4
    node_prefix: str = ""
    allocatable: dict[str, str | int | float] = msgspec.field(
        default_factory=lambda: {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"})
    labels: dict[str, str] = {}
    # A pod without a hyperjob.io/sim-duration annotation succeeds after this (seconds or 30s/5m).
    pod_duration: str = "30s"
    heartbeat_period: float = 2.0
    tick_period: float = 0.5
