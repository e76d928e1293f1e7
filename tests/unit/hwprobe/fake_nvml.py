"""A stand-in for ``pynvml`` with the calls ``hwprobe.nvml`` makes, driven by plain data."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

NVML_TEMPERATURE_GPU = 0
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_NVLINK_MAX_LINKS = 18
nvmlEventTypeXidCriticalError = 8


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_Timeout(NVMLError):
    pass


class FakeNvml:
    """Module-like: ``gpus`` is a list of dicts (name, uuid, memory, util, temp, power_mw, ecc, links)."""

    NVML_TEMPERATURE_GPU = NVML_TEMPERATURE_GPU
    NVML_MEMORY_ERROR_TYPE_CORRECTED = NVML_MEMORY_ERROR_TYPE_CORRECTED
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    NVML_VOLATILE_ECC = NVML_VOLATILE_ECC
    NVML_NVLINK_MAX_LINKS = NVML_NVLINK_MAX_LINKS
    nvmlEventTypeXidCriticalError = nvmlEventTypeXidCriticalError
    NVMLError = NVMLError

    def __init__(
        self, gpus: list[dict[str, Any]], init_error: Exception | None = None, driver: Any = "550.54.15"
    ) -> None:
        self.gpus = gpus
        self.init_error = init_error
        self.driver = driver
        self.pending_xids: list[tuple[int, int]] = []  # (gpu index, xid)
        self.shut = False

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise self.init_error

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlSystemGetDriverVersion(self) -> Any:
        return self.driver

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> Any:
        return ("handle", i)

    def _gpu(self, handle: Any) -> dict[str, Any]:
        return self.gpus[handle[1]]

    def _value(self, handle: Any, key: str) -> Any:
        value = self._gpu(handle).get(key)
        if value is None:
            raise NVMLError_NotSupported(key)
        return value

    def nvmlDeviceGetName(self, h: Any) -> Any:
        return self._value(h, "name")

    def nvmlDeviceGetUUID(self, h: Any) -> Any:
        return self._value(h, "uuid")

    def nvmlDeviceGetMemoryInfo(self, h: Any) -> Any:
        total, used = self._value(h, "memory")
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetUtilizationRates(self, h: Any) -> Any:
        return SimpleNamespace(gpu=self._value(h, "util"), memory=0)

    def nvmlDeviceGetTemperature(self, h: Any, sensor: int) -> Any:
        return self._value(h, "temp")

    def nvmlDeviceGetPowerUsage(self, h: Any) -> Any:
        return self._value(h, "power_mw")

    def nvmlDeviceGetTotalEccErrors(self, h: Any, kind: int, counter: int) -> Any:
        corrected, uncorrected = self._value(h, "ecc")
        return uncorrected if kind == NVML_MEMORY_ERROR_TYPE_UNCORRECTED else corrected

    def nvmlDeviceGetNvLinkState(self, h: Any, link: int) -> int:
        links = self._gpu(h).get("links", [])
        if link >= len(links):
            raise NVMLError_NotSupported("no such link")
        return 1 if links[link] else 0

    def nvmlDeviceGetNvLinkVersion(self, h: Any, link: int) -> int:
        return 4

    def nvmlEventSetCreate(self) -> Any:
        return "eventset"

    def nvmlEventSetFree(self, s: Any) -> None:
        pass

    def nvmlDeviceRegisterEvents(self, h: Any, kinds: int, s: Any) -> None:
        pass

    def nvmlEventSetWait_v2(self, s: Any, timeout_ms: int) -> Any:
        if not self.pending_xids:
            raise NVMLError_Timeout("no event")
        gpu, xid = self.pending_xids.pop(0)
        return SimpleNamespace(device=("handle", gpu), eventType=nvmlEventTypeXidCriticalError, eventData=xid)


def h100(index: int, **overrides: Any) -> dict[str, Any]:
    gpu = {
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": f"GPU-{index:04d}",
        "memory": (85899345920, 1024**3),
        "util": 97,
        "temp": 71,
        "power_mw": 650_000,
        "ecc": (3, 0),
        "links": [True] * 18,
    }
    gpu.update(overrides)
    return gpu
