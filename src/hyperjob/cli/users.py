"""``hyperjob user``: the people who use a system that ``hyperjob up`` runs with authentication.

Each person is an identity of their own: a NATS user allowed to publish only the requests of the
verbs they were given (``apply``, ``delete``, ``command``; none: read only) and a Redis user that
only reads. NATS refuses anything else, whatever the client sends. ``HYPERJOB_USER=NAME`` makes
the CLI act as NAME; ``hyperjob user add NAME -o env`` prints the URLs for another machine or
program.
"""

from __future__ import annotations

import re

import click

from hyperjob.events.access import USER_VERBS

from .config import endpoints_file, resolve_endpoints
from .up import Identity, UpError, grant

NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@click.group()
def user() -> None:
    """People who use this system: each its own NATS and Redis user (ADR 0006)."""


@user.command("add")
@click.argument("name")
@click.option(
    "--verbs",
    default=",".join(USER_VERBS),
    show_default=True,
    help=f"what NAME may do, comma-separated, of {', '.join(USER_VERBS)} ('' : read only)",
)
@click.option("-o", "--output", type=click.Choice(["text", "env"]), default="text")
def add(name: str, verbs: str, output: str) -> None:
    """Add (or change the verbs of) the user NAME; a running system knows it at once."""
    if not NAME.match(name) or len(name) > 63:
        raise click.BadParameter("lower-case letters, digits and '-', at most 63", param_hint="NAME")
    chosen = tuple(v.strip() for v in verbs.split(",") if v.strip())
    unknown = sorted(set(chosen) - set(USER_VERBS))
    if unknown:
        raise click.BadParameter(f"{', '.join(unknown)} unknown (known: {', '.join(USER_VERBS)})", param_hint="--verbs")
    try:
        auth = grant(Identity(name=name, role="user", verbs=chosen), people_only=True)
    except UpError as exc:
        raise click.ClickException(str(exc)) from None
    if output == "env":
        if not endpoints_file().is_file():
            raise click.ClickException("no running system: the URLs are known once `hyperjob up` runs")
        endpoints = resolve_endpoints(as_user=name)
        click.echo(f"NATS_URL={endpoints.nats_url}\nREDIS_URL={endpoints.redis_url}")
        return
    assert auth.identity(name) is not None
    click.echo(f"user {name} may {', '.join(chosen) or 'only read'}; act as it with HYPERJOB_USER={name}")
