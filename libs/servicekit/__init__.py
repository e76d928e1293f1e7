"""What every service shares: settings from the environment, the idempotent handler pipeline
(decode → load → decide → one atomic write with the dedup marker → publish → ack), periodic work,
and the process lifecycle (telemetry, connections, clean shutdown on SIGTERM/SIGINT).

Services build on this and stay thin: they register handlers and tickers, nothing else.
"""

from .config import SettingsError, load_settings
from .runtime import Cause, Reaction, Runtime, emit
from .process import run_service

__all__ = ["Cause", "Reaction", "Runtime", "SettingsError", "emit", "load_settings", "run_service"]
