"""InfiniBand ports from sysfs: ``<root>/<device>/ports/<port>/{state,phys_state,rate,link_layer,counters/*}``.

The files look like ``4: ACTIVE``, ``5: LinkUp``, ``400 Gb/sec (4X NDR)`` and one integer per
counter file. A missing ``root`` means no InfiniBand on this node (``None``); an unreadable or
malformed file leaves that one value out rather than failing the whole reading.
"""

from __future__ import annotations

import re
from pathlib import Path

from hyperjob.events.telemetry import IbPort

SYSFS_ROOT = "/sys/class/infiniband"
_RATE = re.compile(r"^\s*([0-9.]+)\s*Gb/sec")


def read_ports(root: str | Path = SYSFS_ROOT) -> list[IbPort] | None:
    """Every port of every device under ``root``, sorted by (device, port); ``None`` without a tree."""
    base = Path(root)
    if not base.is_dir():
        return None
    ports = []
    for device in sorted(p for p in base.iterdir() if (p / "ports").is_dir()):
        for port_dir in sorted((device / "ports").iterdir(), key=_port_number):
            if port_dir.name.isdigit():
                ports.append(_port(device.name, port_dir))
    return ports


def _port(device: str, path: Path) -> IbPort:
    rate = _RATE.match(_read(path / "rate"))
    return IbPort(
        device=device,
        port=int(path.name),
        state=_state_name(_read(path / "state")) or "UNKNOWN",
        phys_state=_state_name(_read(path / "phys_state")),
        rate_gbps=float(rate.group(1)) if rate else 0.0,
        link_layer=_read(path / "link_layer") or "InfiniBand",
        counters=_counters(path / "counters"),
    )


def _counters(path: Path) -> dict[str, int]:
    counters: dict[str, int] = {}
    if not path.is_dir():
        return counters
    for item in sorted(path.iterdir()):
        text = _read(item)
        if text.isdigit():
            counters[item.name] = int(text)
    return counters


def _state_name(text: str) -> str:
    """``4: ACTIVE`` → ``ACTIVE``; a bare name is kept as it is."""
    return text.partition(":")[2].strip() if ":" in text else text


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:  # absent, or a counter only root may read: the value is unknown
        return ""


def _port_number(path: Path) -> tuple[int, str]:
    return (int(path.name), "") if path.name.isdigit() else (1 << 30, path.name)
