"""A stand-in for the ``pynvml`` module, faithful at the level rota uses it.

Same function names, argument order and return shapes as ``nvidia-ml-py``: names and UUIDs are
``str``, PCI bus ids ``bytes`` in the 8-digit-domain form, memory in bytes, processes as objects
with ``pid`` and ``usedGpuMemory`` (``None`` when unavailable). Failures raise ``NVMLError`` with
the NVML return code in ``value``: an index out of range is ``INVALID_ARGUMENT``, a feature the
device lacks (NVLink, ECC, NUMA query) is ``NOT_SUPPORTED``, calls before ``nvmlInit`` are
``UNINITIALIZED``.
"""

from __future__ import annotations

import queue
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_GPU_IS_LOST = 15
nvmlEventTypeXidCriticalError = 0x8
NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1
NVML_NVLINK_MAX_LINKS = 18
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
MiB = 1 << 20


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return f"NVML error {self.value}"


@dataclass
class FakeGpu:
    name: str = "NVIDIA H100 80GB HBM3"
    memory_mib: int = 81559
    bus: int = 0x17
    numa: int | None = 0              # None: the NUMA query is not supported
    nvlink_to: list[int] = field(default_factory=list)  # bus numbers at the end of each link
    ecc_uncorrected: int | None = 0   # None: ECC not supported
    processes: dict[int, int | None] = field(default_factory=dict)  # pid -> MiB used
    utilization: int = 0              # percent, the device's last sample
    process_util: dict[int, int] = field(default_factory=dict)  # pid -> SM percent
    lost: bool = False                # every query answers GPU_IS_LOST
    events: bool = True               # supports XID critical error events

    @property
    def bus_id(self) -> bytes:
        return f"00000000:{self.bus:02X}:00.0".encode()


class FakeNvml:
    """Use as the ``lib`` of ``rota.backends.nvml.Nvml``, or install as ``sys.modules['pynvml']``."""

    NVMLError = NVMLError
    NVML_FEATURE_ENABLED = NVML_FEATURE_ENABLED
    NVML_NVLINK_MAX_LINKS = NVML_NVLINK_MAX_LINKS
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    NVML_VOLATILE_ECC = NVML_VOLATILE_ECC

    def __init__(self, gpus: list[FakeGpu], init_error: int | None = None) -> None:
        self.gpus = gpus
        self.init_error = init_error
        self.initialised = False
        self.xids: "queue.Queue[tuple[int, int]]" = queue.Queue()  # (device index, XID)
        self.registered: set[int] = set()

    def inject_xid(self, index: int, xid: int) -> None:
        """The driver reports XID ``xid`` on device ``index`` (as ``nvidia-smi`` would log)."""
        self.xids.put((index, xid))

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise NVMLError(self.init_error)
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self._check()
        self.initialised = False

    def _check(self) -> None:
        if not self.initialised:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)

    def _gpu(self, handle: SimpleNamespace) -> FakeGpu:
        self._check()
        gpu = self.gpus[handle.index]
        if gpu.lost:
            raise NVMLError(NVML_ERROR_GPU_IS_LOST)
        return gpu

    def nvmlDeviceGetCount(self) -> int:
        self._check()
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimpleNamespace:
        self._check()
        if not 0 <= index < len(self.gpus):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return SimpleNamespace(index=index)

    def nvmlDeviceGetName(self, handle: SimpleNamespace) -> str:
        return self._gpu(handle).name

    def nvmlDeviceGetUUID(self, handle: SimpleNamespace) -> str:
        self._gpu(handle)
        return f"GPU-fake-{handle.index:04d}"

    def nvmlDeviceGetMemoryInfo(self, handle: SimpleNamespace) -> SimpleNamespace:
        gpu = self._gpu(handle)
        used = sum(m or 0 for m in gpu.processes.values()) * MiB
        total = gpu.memory_mib * MiB
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetPciInfo(self, handle: SimpleNamespace) -> SimpleNamespace:
        gpu = self._gpu(handle)
        return SimpleNamespace(busId=gpu.bus_id, busIdLegacy=gpu.bus_id[4:], bus=gpu.bus,
                               domain=0, device=0)

    def nvmlDeviceGetNumaNodeId(self, handle: SimpleNamespace) -> int:
        gpu = self._gpu(handle)
        if gpu.numa is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return gpu.numa

    def _link(self, handle: SimpleNamespace, link: int) -> FakeGpu:
        gpu = self._gpu(handle)
        if not 0 <= link < NVML_NVLINK_MAX_LINKS:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        if not gpu.nvlink_to:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return gpu

    def nvmlDeviceGetNvLinkState(self, handle: SimpleNamespace, link: int) -> int:
        gpu = self._link(handle, link)
        return NVML_FEATURE_ENABLED if link < len(gpu.nvlink_to) else NVML_FEATURE_DISABLED

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: SimpleNamespace,
                                         link: int) -> SimpleNamespace:
        gpu = self._link(handle, link)
        if link >= len(gpu.nvlink_to):
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        bus = gpu.nvlink_to[link]
        return SimpleNamespace(busId=f"00000000:{bus:02X}:00.0".encode(), bus=bus)

    def nvmlDeviceGetTotalEccErrors(self, handle: SimpleNamespace, error_type: int,
                                    counter_type: int) -> int:
        gpu = self._gpu(handle)
        if gpu.ecc_uncorrected is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        assert (error_type, counter_type) == (NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                              NVML_VOLATILE_ECC)
        return gpu.ecc_uncorrected

    def nvmlDeviceGetComputeRunningProcesses(self, handle: SimpleNamespace) -> list[SimpleNamespace]:
        gpu = self._gpu(handle)
        return [SimpleNamespace(pid=pid, usedGpuMemory=None if mib is None else mib * MiB,
                                gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF)
                for pid, mib in gpu.processes.items()]


    def nvmlDeviceGetIndex(self, handle: SimpleNamespace) -> int:
        self._check()
        return handle.index

    def nvmlDeviceGetUtilizationRates(self, handle: SimpleNamespace) -> SimpleNamespace:
        gpu = self._gpu(handle)
        return SimpleNamespace(gpu=gpu.utilization, memory=0)

    def nvmlDeviceGetProcessUtilization(self, handle: SimpleNamespace,
                                        timestamp: int) -> list[SimpleNamespace]:
        gpu = self._gpu(handle)
        if not gpu.process_util:
            raise NVMLError(NVML_ERROR_NOT_FOUND)  # no sample newer than timestamp
        now = time.time_ns() // 1000
        return [SimpleNamespace(pid=pid, timeStamp=now, smUtil=sm, memUtil=0, encUtil=0,
                                decUtil=0) for pid, sm in gpu.process_util.items()]

    def nvmlEventSetCreate(self) -> SimpleNamespace:
        self._check()
        return SimpleNamespace(kind="event-set")

    def nvmlDeviceGetSupportedEventTypes(self, handle: SimpleNamespace) -> int:
        gpu = self._gpu(handle)
        if not gpu.events:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return nvmlEventTypeXidCriticalError

    def nvmlDeviceRegisterEvents(self, handle: SimpleNamespace, types: int,
                                 event_set: SimpleNamespace) -> None:
        self._gpu(handle)
        assert types == nvmlEventTypeXidCriticalError
        self.registered.add(handle.index)

    def nvmlEventSetWait_v2(self, event_set: SimpleNamespace, timeout_ms: int) -> SimpleNamespace:
        self._check()
        try:
            index, xid = self.xids.get(timeout=timeout_ms / 1000)
        except queue.Empty:
            raise NVMLError(NVML_ERROR_TIMEOUT) from None
        return SimpleNamespace(device=SimpleNamespace(index=index),
                               eventType=nvmlEventTypeXidCriticalError, eventData=xid,
                               gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF)


def initialised(gpus: list[FakeGpu]) -> FakeNvml:
    fake = FakeNvml(gpus)
    fake.nvmlInit()
    return fake
