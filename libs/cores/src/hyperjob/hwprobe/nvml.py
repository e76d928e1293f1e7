"""GPUs and NVLink through NVML (the ``pynvml`` module of ``nvidia-ml-py``).

``NvmlReader.open()`` imports the module lazily and initialises NVML once; without the module,
the driver or any GPU it reports ``available = False`` and every reading is empty (source
``none``). The module can be passed in, which is how tests use a fake one.

Xid errors arrive as NVML events (``nvmlEventTypeXidCriticalError``): each ``read`` drains the
event set without blocking and keeps the Xids of the last ``xid_hold`` seconds per GPU, so a fatal
Xid keeps a GPU unhealthy for that long (it normally needs a GPU reset, which restarts the agent).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from hyperjob.events.telemetry import GpuDevice, GpuLinks, NvLink, XidEvent

# Nominal bidirectional bandwidth of one link by NVLink version (GB/s): P100 NVLink1 4×40,
# V100/A100/H100 NVLink2-4 50 per link, B200 NVLink5 100 per link.
NVLINK_GB_PER_S = {1: 40.0, 2: 50.0, 3: 50.0, 4: 50.0, 5: 100.0}
DEFAULT_MAX_LINKS = 18

# pynvml (or a test's stand-in) carries no type information: the module, its device handles and
# event sets, and what its queries return are untyped here, the edge where NVML's answers enter.
Nvml = Any
NvmlValue = Any


class NvmlReading(msgspec.Struct, frozen=True, kw_only=True):
    source: str  # "nvml" or "none"
    driver_version: str = ""
    gpus: list[GpuDevice] = []
    links: list[GpuLinks] = []


class NvmlReader:
    """One node's NVML session. Not thread-safe; one reader per agent process."""

    def __init__(self, module: Nvml = None, xid_hold: float = 300.0) -> None:
        self._nvml: Nvml = module
        self.xid_hold = xid_hold
        self.available = False
        self.why_not = ""
        self._handles: list[NvmlValue] = []
        self._events: NvmlValue = None
        self._xids: dict[int, list[XidEvent]] = {}

    def open(self) -> bool:
        """Initialise NVML; ``False`` (with ``why_not``) when there is no NVML or no GPU."""
        try:
            nvml = self._nvml if self._nvml is not None else _import_pynvml()
            nvml.nvmlInit()
            self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        except ImportError:
            self.why_not = "nvidia-ml-py (pynvml) is not installed"
            return False
        except Exception as exc:  # pynvml raises NVMLError subclasses, e.g. driver not loaded
            self.why_not = f"NVML could not start: {exc}"
            return False
        self._nvml = nvml
        if not self._handles:
            self.why_not = "NVML reports no GPU"
            return False
        self._events = self._register_xid_events()
        self.available = True
        return True

    def read(self, now: float) -> NvmlReading:
        if not self.available:
            return NvmlReading(source="none")
        self._drain_xids(now)
        nvml = self._nvml
        return NvmlReading(
            source="nvml",
            driver_version=_text(_try(nvml.nvmlSystemGetDriverVersion)) or "",
            gpus=[self._device(i, h) for i, h in enumerate(self._handles)],
            links=[GpuLinks(gpu=i, links=self._links(h)) for i, h in enumerate(self._handles)],
        )

    def close(self) -> None:
        if self.available:
            if self._events is not None:
                _try(self._nvml.nvmlEventSetFree, self._events)
            _try(self._nvml.nvmlShutdown)
            self.available = False

    # -- per device ---------------------------------------------------------------------------

    def _device(self, index: int, handle: NvmlValue) -> GpuDevice:
        nvml = self._nvml
        memory = _try(nvml.nvmlDeviceGetMemoryInfo, handle)
        utilization = _try(nvml.nvmlDeviceGetUtilizationRates, handle)
        power_mw = _try(nvml.nvmlDeviceGetPowerUsage, handle)
        return GpuDevice(
            index=index,
            uuid=_text(_try(nvml.nvmlDeviceGetUUID, handle)) or "",
            model=_text(_try(nvml.nvmlDeviceGetName, handle)) or "",
            memory_total_bytes=int(memory.total) if memory is not None else 0,
            memory_used_bytes=int(memory.used) if memory is not None else 0,
            utilization_percent=float(utilization.gpu) if utilization is not None else None,
            temperature_celsius=_float(_try(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU)),
            power_watts=power_mw / 1000.0 if power_mw is not None else None,
            ecc_corrected=_ecc(nvml, handle, nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED),
            ecc_uncorrected=_ecc(nvml, handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED),
            xid_events=list(self._xids.get(index, [])),
        )

    def _links(self, handle: NvmlValue) -> list[NvLink]:
        """Every link NVML answers for; the first link it refuses ends the list (no more links)."""
        nvml = self._nvml
        links = []
        for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", DEFAULT_MAX_LINKS))):
            state = _try(nvml.nvmlDeviceGetNvLinkState, handle, link)
            if state is None:
                break
            version = _try(nvml.nvmlDeviceGetNvLinkVersion, handle, link)
            up = bool(state)
            links.append(
                NvLink(
                    link=link,
                    up=up,
                    version=version,
                    bandwidth_gb_per_s=NVLINK_GB_PER_S.get(version or 0, 0.0) if up else 0.0,
                )
            )
        return links

    # -- Xid events ---------------------------------------------------------------------------

    def _register_xid_events(self) -> NvmlValue:
        nvml = self._nvml
        events = _try(nvml.nvmlEventSetCreate)
        if events is None:
            return None
        for handle in self._handles:
            # Unsupported on some boards (and in MIG mode): those GPUs just report no Xids.
            _try(nvml.nvmlDeviceRegisterEvents, handle, nvml.nvmlEventTypeXidCriticalError, events)
        return events

    def _drain_xids(self, now: float) -> None:
        if self._events is not None:
            while (data := _try(self._nvml.nvmlEventSetWait_v2, self._events, 0)) is not None:
                index = self._index_of(data.device)
                if index is not None:
                    self._xids.setdefault(index, []).append(XidEvent(xid=int(data.eventData), at=now))
        for index, seen in list(self._xids.items()):
            self._xids[index] = [x for x in seen if now - x.at <= self.xid_hold]

    def _index_of(self, device: NvmlValue) -> int | None:
        for index, handle in enumerate(self._handles):
            if handle == device:
                return index
        return None


def _import_pynvml() -> Nvml:
    import pynvml  # type: ignore[import-untyped]  # noqa: PLC0415 - imported only when a real agent starts

    return pynvml


def _try(call: Callable[..., NvmlValue], *args: object) -> NvmlValue:
    """``call(*args)``, or ``None`` when NVML says the query is unsupported, timed out or failed."""
    try:
        return call(*args)
    except Exception:  # NVMLError_NotSupported, NVMLError_Timeout, ...: the value is unknown
        return None


def _ecc(nvml: Nvml, handle: NvmlValue, error_type: int) -> int | None:
    value = _try(nvml.nvmlDeviceGetTotalEccErrors, handle, error_type, nvml.NVML_VOLATILE_ECC)
    return int(value) if value is not None else None


def _float(value: NvmlValue) -> float | None:
    return float(value) if value is not None else None


def _text(value: NvmlValue) -> str | None:
    """Older pynvml versions return bytes."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value if value is None else str(value)
