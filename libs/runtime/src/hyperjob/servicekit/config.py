"""Settings from the environment: one frozen struct per service, validated at start-up.

Precedence: code defaults < environment (``<SERVICE>_<FIELD>``, then the shared ``NATS_URL`` /
``REDIS_URL``) < explicit overrides (tests). This is the only module that reads ``os.environ``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

T = TypeVar("T", bound=msgspec.Struct)

# Settings every service shares may also come from these unprefixed variables.
SHARED_VARIABLES = {
    "nats_url": "NATS_URL",
    "redis_url": "REDIS_URL",
    "log_level": "LOG_LEVEL",
    "metrics_host": "METRICS_HOST",  # servicekit.health's endpoints
    "metrics_port": "METRICS_PORT",
}


class SettingsError(ValueError):
    """An invalid configuration: the service stops at once with this message."""


def load_settings(
    settings_type: type[T],
    prefix: str,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> T:
    # ``Any``: raw field values (text, or JSON from the environment) until msgspec checks them below.
    env = os.environ if environ is None else environ
    raw: dict[str, Any] = {}
    for field in msgspec.structs.fields(settings_type):
        for variable in (f"{prefix}_{field.name.upper()}", SHARED_VARIABLES.get(field.name)):
            if variable and variable in env:
                raw[field.name] = _parse(env[variable])
                break
    raw.update(overrides or {})
    try:
        return msgspec.convert(raw, settings_type, strict=False)
    except msgspec.ValidationError as exc:
        message, _, where = str(exc).rpartition(" - at `$.")
        variable = f"{prefix}_{where.rstrip('`').split('.')[0].split('[')[0].upper()}" if where else prefix
        raise SettingsError(f"{variable}: {message or exc}") from None


def _parse(value: str) -> Any:
    """Environment values are text; JSON lists and maps are accepted for structured fields
    (``Any``: whatever the JSON holds, checked by ``msgspec.convert`` against the field)."""
    if value[:1] in "[{":
        try:
            return msgspec.json.decode(value)
        except msgspec.DecodeError:
            return value
    return value


def instance_name(service: str, settings: msgspec.Struct) -> str:
    """The instance: the service, and its cluster for per-cluster services (``job-controller-c1``)."""
    cluster = getattr(settings, "cluster", "")
    return f"{service}-{cluster}" if cluster else service
