"""``hyperjob user``: the people who use a system that ``hyperjob up`` runs with authentication.

Each person is an identity of their own: a NATS user allowed to publish only the requests of the
verbs they were given (``apply``, ``delete``, ``command``; none: read only), in the namespaces they
were given (``--namespaces team-a,team-b``; by default every namespace, and the cluster-scoped
Queues and PriorityClasses with them), and a Redis user that only reads. NATS refuses anything
else, whatever the client sends. ``HYPERJOB_USER=NAME`` makes the CLI act as NAME;
``hyperjob user add NAME -o env`` prints the URLs for another machine or program.
"""

from __future__ import annotations

import re

import click

from hyperjob.events.access import USER_VERBS, user_subjects
from hyperjob.testkit.auth import Identity

from .config import endpoints_file, resolve_endpoints
from .up import UpError, grant

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
@click.option(
    "--namespaces",
    default="*",
    show_default=True,
    help="where NAME may act, comma-separated ('*': every namespace, and cluster-scoped kinds)",
)
@click.option("-o", "--output", type=click.Choice(["text", "env"]), default="text")
def add(name: str, verbs: str, namespaces: str, output: str) -> None:
    """Add (or change the verbs or namespaces of) the user NAME; a running system knows it at once."""
    if not NAME.match(name) or len(name) > 63:
        raise click.BadParameter("lower-case letters, digits and '-', at most 63", param_hint="NAME")
    chosen = tuple(v.strip() for v in verbs.split(",") if v.strip())
    unknown = sorted(set(chosen) - set(USER_VERBS))
    if unknown:
        raise click.BadParameter(f"{', '.join(unknown)} unknown (known: {', '.join(USER_VERBS)})", param_hint="--verbs")
    where = tuple(sorted({n.strip() for n in namespaces.split(",") if n.strip()}))
    if not where:
        raise click.BadParameter("name at least one namespace, or '*' for every one", param_hint="--namespaces")
    try:
        user_subjects(chosen, where)
    except ValueError as exc:
        raise click.BadParameter(str(exc).partition(": ")[2], param_hint="--namespaces") from None
    scoped = None if "*" in where else where
    try:
        auth = grant(Identity(name=name, role="user", verbs=chosen, namespaces=scoped), people_only=True)
    except UpError as exc:
        raise click.ClickException(str(exc)) from None
    if output == "env":
        if not endpoints_file().is_file():
            raise click.ClickException("no running system: the URLs are known once `hyperjob up` runs")
        endpoints = resolve_endpoints(as_user=name)
        click.echo(f"NATS_URL={endpoints.nats_url}\nREDIS_URL={endpoints.redis_url}")
        return
    assert auth.identity(name) is not None
    place = "in every namespace" if scoped is None else f"in namespace{'s' * (len(scoped) > 1)} {', '.join(scoped)}"
    may = f"{', '.join(chosen)} {place}" if chosen else "only read"
    click.echo(f"user {name} may {may}; act as it with HYPERJOB_USER={name}")
