"""A service instance's liveness, for whoever supervises it (``hyperjob up``, compose, Kubernetes).

While the instance is well — its event loop turns, its bus is connected (or reconnecting), every
consumer loop and watch runs — it rewrites a small JSON file every ``PERIOD`` seconds
(``HYPERJOB_LIVENESS_FILE``; nothing is written when unset)::

    {"instance": "splitter", "pid": 4242, "at": 1795462383.6, "bus": "connected", "members": 5}

A supervisor judges the file's age: older than ``STALE_AFTER`` seconds means hung or broken, and
the process should be restarted. ``python -m hyperjob.servicekit.liveness FILE [--max-age S]``
exits 0 when the file is fresh, 1 otherwise (a compose ``healthcheck``). A connection the bus
gives up on for good (nats-py closes it after an authorization error) ends the process with
``EXIT_BUS_LOST`` so that the supervisor restarts it at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only for the type: the healthcheck (``python -m``) stays a light import
    from .runtime import Runtime

__all__ = ["ENV", "EXIT_BUS_LOST", "PERIOD", "STALE_AFTER", "fresh", "report", "run"]

ENV = "HYPERJOB_LIVENESS_FILE"
PERIOD = 5.0
STALE_AFTER = 20.0
EXIT_BUS_LOST = 3


def report(runtime: Runtime) -> dict[str, object] | None:
    """The liveness record of ``runtime``, or ``None`` when something it needs has stopped."""
    connected = getattr(runtime.bus, "connected", True)
    members = runtime.members
    if runtime.started and not all(m.running for m in members):
        return None
    return {
        "instance": runtime.instance,
        "pid": os.getpid(),
        "at": time.time(),
        "bus": "connected" if connected else "reconnecting",
        "members": len(members),
        "metrics": runtime.metrics_url,  # servicekit.health's endpoints
    }


async def run(runtime: Runtime, path: Path, period: float = PERIOD) -> None:
    """Rewrite ``path`` every ``period`` while ``runtime`` is well (until cancelled)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        record = report(runtime)
        if record is not None:
            temporary = path.with_suffix(".tmp")
            temporary.write_text(json.dumps(record))
            temporary.replace(path)  # atomic: a reader never sees half a record
        else:
            runtime.log.warning("liveness_withheld", instance=runtime.instance)
        await asyncio.sleep(period)


def fresh(path: Path, max_age: float = STALE_AFTER) -> bool:
    """Whether ``path`` holds a liveness record younger than ``max_age`` seconds."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and time.time() - float(record.get("at", 0)) <= max_age


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="exit 0 if a service's liveness file is fresh")
    parser.add_argument("file", type=Path)
    parser.add_argument("--max-age", type=float, default=STALE_AFTER)
    args = parser.parse_args(argv)
    return 0 if fresh(args.file, args.max_age) else 1


if __name__ == "__main__":
    sys.exit(main())
