"""``hyperjob kubeconfig``: a kubeconfig for the apiserver ``hyperjob up`` runs, so that ``kubectl``
and the Kubernetes client libraries reach HyperJob (docs/kubernetes-api.md).

The user's token is that identity's password (``credentials.json``: as powerful as its NATS URL);
the server's certificate is checked against the CA ``up`` made in ``$HYPERJOB_HOME/tls``.
``up`` writes the CLI user's to ``$HYPERJOB_HOME/kubeconfig`` (0600).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import click
import yaml

from hyperjob.testkit.auth import CLI_USER, Auth

from .config import credentials_file, home, services_file

CONTEXT = "hyperjob"


def tls_dir() -> Path:
    """The CA and the apiserver's certificate ``up`` makes (kept across runs)."""
    return home() / "tls"


def kubeconfig_file() -> Path:
    return home() / "kubeconfig"


def render(server: str, user: str, token: str, ca: bytes | None) -> dict[str, Any]:
    """A kubeconfig with one cluster, one user and one context (current), kubectl's shape."""
    cluster: dict[str, str] = {"server": server}
    if ca is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": user, "namespace": "default"}}],
        "current-context": CONTEXT,
        "preferences": {},
    }


def for_user(user: str, server: str | None = None) -> dict[str, Any]:
    """The kubeconfig of ``user`` for this home's apiserver; ``click.ClickException`` naming what
    is missing (no system, no such user)."""
    if server is None:
        try:
            server = json.loads(services_file().read_text()).get("apiserver", "")
        except (OSError, ValueError):
            server = ""
    if not server:
        raise click.ClickException(f"no apiserver is running in {home()}: start it with `hyperjob up`")
    if not credentials_file().is_file():
        raise click.ClickException(f"no credentials in {home()}: start the system once with `hyperjob up`")
    auth = Auth.load(credentials_file())
    if auth.identity(user) is None:
        raise click.ClickException(f"no user {user!r} (add one with `hyperjob user add {user}`)")
    ca = tls_dir() / "ca.pem"
    return render(server, user, auth.password(user), ca.read_bytes() if server.startswith("https") else None)


def dump(config: dict[str, Any]) -> str:
    return yaml.safe_dump(config, sort_keys=False)


@click.command()
@click.option("--user", default=CLI_USER, show_default=True, help="whose token (an identity of `hyperjob user add`)")
def kubeconfig(user: str) -> None:
    """Print a kubeconfig for the running apiserver, as USER: `hyperjob kubeconfig > kc; KUBECONFIG=kc kubectl ...`."""
    click.echo(dump(for_user(user)), nl=False)
