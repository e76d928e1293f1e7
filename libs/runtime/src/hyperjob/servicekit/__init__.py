"""What every service shares: settings from the environment, the runtime (its own state in
memory, batched consumers, watches of latest values, rounds and timers on an injected clock, the
one atomic commit with dedup markers, outbox and changelog), and the live process.

Services build on this and stay thin: a ``build(settings, runtime)`` that declares tables,
inputs, rounds and timers, and handlers that decide with the pure cores. The same ``build``
runs live (``servicekit.process.run_service``, the only part that opens NATS and Redis) and
inside ``hyperjob simulate``.
"""

from . import answers
from .changelog import parse_state_subject, state_subject
from .config import SettingsError, instance_name, load_settings
from .invariants import InvariantError, present
from .projection import Projection, Table
from .runtime import Reaction, Runtime
from .timers import AsyncioTimers, Clock, Rank, Timers, WallClock, Work

__all__ = [
    "AsyncioTimers",
    "Clock",
    "InvariantError",
    "Projection",
    "Rank",
    "Reaction",
    "Runtime",
    "SettingsError",
    "Table",
    "Timers",
    "WallClock",
    "Work",
    "answers",
    "instance_name",
    "load_settings",
    "parse_state_subject",
    "present",
    "state_subject",
]
