"""``hyperjob admin``: operations on the running services themselves."""

from __future__ import annotations

import asyncio
import sys
import time

import click

from hyperjob import events
from hyperjob.events import subjects
from hyperjob.events.access import OPERATOR

from .client import connect
from .config import resolve_endpoints


@click.group()
def admin() -> None:
    """Operate the running services (rebuild a service's state from its log)."""


@admin.command()
@click.argument("service", required=False)
def rebuild(service: str | None) -> None:
    """Rebuild SERVICE's state (a service such as job-controller, or one instance such as
    job-controller-cluster-a; every instance when omitted): each forgets its documents in Redis
    and puts them back from its changelog in JetStream, then goes on."""

    async def work() -> bool:
        client = await connect(resolve_endpoints(as_user=OPERATOR))  # commanding services is the operator's
        try:
            instances = await client.instances()
            chosen = sorted(
                name for name, started in instances.items() if service is None or service in (name, started.service)
            )
            if not chosen:
                click.echo(
                    f"error: no running instance of {service!r} (running: {', '.join(sorted(instances))})", err=True
                )
                return False
            for instance in chosen:
                command = events.AdminCommand(
                    event_id=events.new_request_id(),
                    occurred_at=time.time(),
                    producer="hyperjob-cli",
                    instance=instance,
                    action="rebuild",
                )
                await client.bus.publish(subjects.admin(instance), events.encode(command), msg_id=command.event_id)
                click.echo(f"{instance}: rebuild requested")
            return True
        finally:
            await client.close()

    sys.exit(0 if asyncio.run(work()) else 1)
