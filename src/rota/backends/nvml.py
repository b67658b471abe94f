"""The one boundary between rota and the NVIDIA Management Library.

``Nvml`` wraps a ``pynvml``-shaped object (the ``pynvml`` module of the ``nvidia-ml-py``
package, imported only by ``Nvml.load``; tests pass a fake with the same functions) and turns
its answers into plain values:

- ``devices()``: one ``NvmlDevice`` per GPU in NVML index order (PCI bus order): UUID, name,
  memory, NUMA node when known, PCI bus id, the bus ids of its active NVLink peers, health,
  and, for a GPU in MIG mode, its MIG devices (``NvmlMigDevice``: UUID ``MIG-...``, memory,
  GPU instance id, profile id, compute slices, placement start and size in memory slices).
- ``mig_profiles(index)``: the GPU instance profiles a MIG-capable GPU offers, each with its
  possible placements (``NvmlMigProfile``); empty for a GPU without MIG.
- changing a GPU's geometry (``rota.backends.migapply`` drives these): ``gpu_instances(index)``
  lists its GPU instances, those without a compute instance too (``NvmlGpuInstance``:
  ``usable`` false, a half-made one), by ``nvmlDeviceGetGpuInstances``; ``create_instance``
  makes one at a placement (``nvmlDeviceCreateGpuInstanceWithPlacement``) and its one compute
  instance spanning it (``nvmlGpuInstanceCreateComputeInstance``, as ``nvidia-smi mig -cgi
  ... -C``); ``complete_instance`` adds that compute instance to a half-made one;
  ``destroy_instance`` destroys its compute instances (``nvmlComputeInstanceDestroy``), then
  it (``nvmlGpuInstanceDestroy``); ``set_mig_mode`` turns MIG mode on or off
  (``nvmlDeviceSetMigMode``). NVML answers ``IN_USE`` where a process uses what would go.
- ``process_memory()``: the GPU memory each compute process uses on each device.
- ``problem(index)``: why a device is unhealthy now (uncorrected volatile ECC errors, lost),
  or ``None``; ``xid_events()`` / ``wait_xid(events, timeout)``: XID critical errors as the
  driver reports them (an event set, waited on by ``rota.backends.health``).
- ``utilization()``: each device's GPU utilization (percent, NVML's last sample period) and
  ``process_utilization(since)``: each process's SM utilization samples since a time.

MIG: ``nvmlDeviceGetMigMode`` answers NOT_SUPPORTED on a GPU without MIG; a GPU whose current
mode is enabled lists its MIG devices by slot (``nvmlDeviceGetMigDeviceHandleByIndex``, an empty
slot NOT_FOUND), one per compute instance; each names its GPU instance, whose info gives the
profile and placement (a GPU instance cut into several compute instances counts once, with the
first). A MIG device's utilization and ECC are not queried (NVML has none).

NVML errors surface as ``pynvml.NVMLError`` with an integer ``value``. "Not supported" answers
(no NVLink, no ECC, no NUMA query in an old driver) are expected and mean "unknown"; a device
is unhealthy when it reports uncorrected volatile ECC errors or is lost. NVML reports process ids
of the host's PID namespace: inside a container they do not match the container's own pids.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MiB = 1 << 20
_NVML_ERROR_NOT_FOUND = 6
_NVML_ERROR_TIMEOUT = 10
_NVML_ERROR_GPU_IS_LOST = 15
_MIG_ENABLED = 1  # NVML_DEVICE_MIG_ENABLE
_PROFILE_COUNT = 15  # NVML_GPU_INSTANCE_PROFILE_COUNT, where the library does not say
_CI_PROFILE_COUNT = 8  # NVML_COMPUTE_INSTANCE_PROFILE_COUNT
_EVENT_XID_CRITICAL = 0x8  # nvmlEventTypeXidCriticalError


@dataclass(frozen=True, slots=True)
class NvmlMigDevice:
    """One MIG device of a GPU: its GPU instance's profile and placement (memory slices)."""

    uuid: str
    name: str          # NVML's: NVIDIA A100-SXM4-40GB MIG 1g.5gb
    memory_mib: int
    gpu_instance: int
    profile_id: int
    compute: int       # compute slices of its GPU instance's profile
    start: int
    size: int


@dataclass(frozen=True, slots=True)
class NvmlMigProfile:
    """A GPU instance profile a GPU offers: NVML's id, compute slices, memory, the most
    instances a GPU holds, and its possible placements as (start, size) in memory slices."""

    id: int
    compute: int
    memory_mib: int
    instances: int
    placements: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class NvmlGpuInstance:
    """A GPU instance as it is, made through NVML or not: its id, profile, compute slices,
    placement, and whether it has its compute instance (else CUDA cannot use it yet)."""

    id: int
    profile_id: int
    compute: int
    start: int
    size: int
    usable: bool


@dataclass(frozen=True, slots=True)
class NvmlDevice:
    index: int
    uuid: str
    name: str
    memory_mib: int
    pci_bus_id: str
    numa: int | None = None
    nvlink_peers: tuple[str, ...] = ()  # PCI bus ids of the devices at the other end
    healthy: bool = True
    mig: tuple[NvmlMigDevice, ...] | None = None  # None: MIG is off or not supported


@dataclass(frozen=True, slots=True)
class ProcessUtil:
    index: int  # device
    pid: int
    sm_percent: int
    timestamp_us: int


@dataclass(frozen=True, slots=True)
class ProcessMemory:
    index: int  # device
    pid: int
    used_mib: int


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _bus_id(pci: Any) -> str:
    """NVML writes bus ids as ``00000000:17:00.0``; keep the last 12 characters, lower case,
    the form sysfs uses after its 4-digit domain."""
    return _text(pci.busId).lower()[-12:]


class Nvml:
    def __init__(self, lib: Any) -> None:
        self.lib = lib

    @classmethod
    def load(cls) -> Nvml | None:
        """NVML of this machine, initialised; ``None`` when the package, the library or the
        driver is missing."""
        try:
            import pynvml  # noqa: PLC0415 - optional dependency, imported on use
        except ImportError:
            return None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError:
            return None
        return cls(pynvml)

    def close(self) -> None:
        try:
            self.lib.nvmlShutdown()
        except self.lib.NVMLError:
            pass

    def devices(self) -> list[NvmlDevice]:
        lib = self.lib
        out = []
        for index in range(lib.nvmlDeviceGetCount()):
            h = lib.nvmlDeviceGetHandleByIndex(index)
            pci = _bus_id(lib.nvmlDeviceGetPciInfo(h))
            out.append(NvmlDevice(
                index=index, uuid=_text(lib.nvmlDeviceGetUUID(h)),
                name=_text(lib.nvmlDeviceGetName(h)),
                memory_mib=lib.nvmlDeviceGetMemoryInfo(h).total // MiB,
                pci_bus_id=pci, numa=self._numa(h, pci), nvlink_peers=self._peers(h),
                healthy=self._healthy(h), mig=self._mig_devices(h)))
        return out

    def mig_profiles(self, index: int) -> list[NvmlMigProfile]:
        """The GPU instance profiles GPU ``index`` offers, with their possible placements;
        empty for a GPU without MIG."""
        import ctypes  # noqa: PLC0415 - only MIG placements need it

        lib = self.lib
        h = lib.nvmlDeviceGetHandleByIndex(index)
        out = []
        for profile in range(getattr(lib, "NVML_GPU_INSTANCE_PROFILE_COUNT", _PROFILE_COUNT)):
            try:
                info = lib.nvmlDeviceGetGpuInstanceProfileInfo(h, profile)
            except lib.NVMLError:
                continue  # not a profile of this GPU (NOT_SUPPORTED), or no MIG at all
            count = ctypes.c_uint(0)
            lib.nvmlDeviceGetGpuInstancePossiblePlacements(h, info.id, None, ctypes.pointer(count))
            found = (lib.c_nvmlGpuInstancePlacement_t * count.value)()
            lib.nvmlDeviceGetGpuInstancePossiblePlacements(h, info.id, found,
                                                           ctypes.pointer(count))
            out.append(NvmlMigProfile(
                int(info.id), int(info.sliceCount), int(info.memorySizeMB),
                int(info.instanceCount),
                tuple((int(p.start), int(p.size)) for p in found[:count.value])))
        return out

    # -- changing a GPU's geometry -------------------------------------------------------------

    def gpu_instances(self, index: int) -> list[NvmlGpuInstance] | None:
        """GPU ``index``'s GPU instances by start; None when MIG mode is off (or missing)."""
        lib = self.lib
        h = lib.nvmlDeviceGetHandleByIndex(index)
        if self._mig_devices(h) is None:
            return None
        out = []
        for info in self._gi_profiles(h):
            for gi in self._handles(lib.nvmlDeviceGetGpuInstances, lib.c_nvmlGpuInstance_t,
                                    int(info.instanceCount), h, info.id):
                got = lib.nvmlGpuInstanceGetInfo(gi)
                out.append(NvmlGpuInstance(
                    int(got.id), int(info.id), int(info.sliceCount), int(got.placement.start),
                    int(got.placement.size), bool(self._compute_instances(gi))))
        return sorted(out, key=lambda g: g.start)

    def create_instance(self, index: int, profile_id: int, start: int, size: int) -> None:
        """A GPU instance of ``profile_id`` at ``start`` on GPU ``index``, with its compute
        instance."""
        import ctypes  # noqa: PLC0415 - only MIG placements need it

        lib = self.lib
        h = lib.nvmlDeviceGetHandleByIndex(index)
        placement = lib.c_nvmlGpuInstancePlacement_t(start, size)  # NVML takes a pointer to it
        gi = lib.nvmlDeviceCreateGpuInstanceWithPlacement(h, profile_id, ctypes.pointer(placement))
        self._add_compute_instance(gi)

    def complete_instance(self, index: int, gpu_instance: int) -> None:
        """The compute instance of a GPU instance made without one."""
        lib = self.lib
        self._add_compute_instance(lib.nvmlDeviceGetGpuInstanceById(
            lib.nvmlDeviceGetHandleByIndex(index), gpu_instance))

    def destroy_instance(self, index: int, gpu_instance: int) -> None:
        """GPU instance ``gpu_instance`` of GPU ``index``: its compute instances, then it."""
        lib = self.lib
        gi = lib.nvmlDeviceGetGpuInstanceById(lib.nvmlDeviceGetHandleByIndex(index),
                                              gpu_instance)
        for ci in self._compute_instances(gi):
            lib.nvmlComputeInstanceDestroy(ci)
        lib.nvmlGpuInstanceDestroy(gi)

    def set_mig_mode(self, index: int, enabled: bool) -> None:
        lib = self.lib
        lib.nvmlDeviceSetMigMode(lib.nvmlDeviceGetHandleByIndex(index),
                                 _MIG_ENABLED if enabled else 0)

    def _gi_profiles(self, h: Any) -> list[Any]:
        lib = self.lib
        out = []
        for profile in range(getattr(lib, "NVML_GPU_INSTANCE_PROFILE_COUNT", _PROFILE_COUNT)):
            try:
                out.append(lib.nvmlDeviceGetGpuInstanceProfileInfo(h, profile))
            except lib.NVMLError:
                continue
        return out

    def _handles(self, call: Any, kind: Any, most: int, *args: Any) -> list[Any]:
        """What an NVML call that fills an array of handles and a count gives."""
        import ctypes  # noqa: PLC0415

        count = ctypes.c_uint(0)
        found = (kind * max(most, 1))()
        call(*args, found, ctypes.pointer(count))
        return list(found[:count.value])

    def _ci_profiles(self, gi: Any) -> list[Any]:
        lib = self.lib
        shared = getattr(lib, "NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED", 0)
        out = []
        for profile in range(_CI_PROFILE_COUNT):
            try:
                out.append(lib.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, profile, shared))
            except lib.NVMLError:
                continue  # larger than the instance, or not a profile of this GPU
        return out

    def _compute_instances(self, gi: Any) -> list[Any]:
        lib = self.lib
        return [ci for info in self._ci_profiles(gi)
                for ci in self._handles(lib.nvmlGpuInstanceGetComputeInstances,
                                        lib.c_nvmlComputeInstance_t,
                                        int(info.instanceCount), gi, info.id)]

    def _add_compute_instance(self, gi: Any) -> None:
        """One compute instance spanning GPU instance ``gi``: the profile with the most
        slices it offers."""
        widest = max(self._ci_profiles(gi), key=lambda info: int(info.sliceCount))
        self.lib.nvmlGpuInstanceCreateComputeInstance(gi, widest.id)

    def process_memory(self) -> list[ProcessMemory]:
        lib = self.lib
        out = []
        for index in range(lib.nvmlDeviceGetCount()):
            h = lib.nvmlDeviceGetHandleByIndex(index)
            for proc in lib.nvmlDeviceGetComputeRunningProcesses(h):
                if proc.usedGpuMemory is None:  # not available (Windows WDDM)
                    continue
                out.append(ProcessMemory(index, proc.pid, math.ceil(proc.usedGpuMemory / MiB)))
        return out

    def indices(self) -> range:
        """The indices of the devices NVML sees."""
        return range(self.lib.nvmlDeviceGetCount())

    def problem(self, index: int) -> str | None:
        """Why device ``index`` is unhealthy now; None when it is healthy (or cannot say)."""
        lib = self.lib
        try:
            h = lib.nvmlDeviceGetHandleByIndex(index)
            errors = lib.nvmlDeviceGetTotalEccErrors(
                h, getattr(lib, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1),
                getattr(lib, "NVML_VOLATILE_ECC", 0))
        except lib.NVMLError as exc:
            if getattr(exc, "value", None) == _NVML_ERROR_GPU_IS_LOST:
                return "the GPU is lost (it fell off the bus or stopped answering)"
            return None  # no ECC on this device: nothing to say
        return (f"{errors} uncorrected ECC error{'' if errors == 1 else 's'} since the driver "
                "loaded") if errors else None

    def xid_events(self) -> Any:
        """An event set receiving every device's XID critical errors (where supported)."""
        lib = self.lib
        events = lib.nvmlEventSetCreate()
        for index in range(lib.nvmlDeviceGetCount()):
            h = lib.nvmlDeviceGetHandleByIndex(index)
            try:
                if lib.nvmlDeviceGetSupportedEventTypes(h) & _EVENT_XID_CRITICAL:
                    lib.nvmlDeviceRegisterEvents(h, _EVENT_XID_CRITICAL, events)
            except lib.NVMLError:
                continue  # events not supported here: ECC and loss are still polled
        return events

    def wait_xid(self, events: Any, timeout_ms: int) -> tuple[int, int] | None:
        """The next (device index, XID) of ``events``; None when ``timeout_ms`` passed."""
        lib = self.lib
        try:
            data = lib.nvmlEventSetWait_v2(events, timeout_ms)
        except lib.NVMLError as exc:
            if getattr(exc, "value", None) == _NVML_ERROR_TIMEOUT:
                return None
            raise
        if not data.eventType & _EVENT_XID_CRITICAL:
            return None
        return lib.nvmlDeviceGetIndex(data.device), int(data.eventData)

    def utilization(self) -> dict[int, int]:
        """Device index -> GPU utilization in percent over NVML's last sample period."""
        lib = self.lib
        out = {}
        for index in range(lib.nvmlDeviceGetCount()):
            try:
                out[index] = int(lib.nvmlDeviceGetUtilizationRates(
                    lib.nvmlDeviceGetHandleByIndex(index)).gpu)
            except lib.NVMLError:
                continue
        return out

    def memory_used(self) -> dict[int, int]:
        """Device index -> MiB of device memory in use, by every process."""
        lib = self.lib
        out = {}
        for index in range(lib.nvmlDeviceGetCount()):
            try:
                out[index] = lib.nvmlDeviceGetMemoryInfo(
                    lib.nvmlDeviceGetHandleByIndex(index)).used // MiB
            except lib.NVMLError:
                continue
        return out

    def process_utilization(self, since_us: int) -> list[ProcessUtil]:
        """SM utilization samples of each process on each device newer than ``since_us``
        (microseconds since the epoch, as NVML counts them)."""
        lib = self.lib
        out = []
        for index in range(lib.nvmlDeviceGetCount()):
            h = lib.nvmlDeviceGetHandleByIndex(index)
            try:
                samples = lib.nvmlDeviceGetProcessUtilization(h, since_us)
            except lib.NVMLError:
                continue  # no sample since then (NOT_FOUND), or not supported on this device
            out.extend(ProcessUtil(index, s.pid, int(s.smUtil), int(s.timeStamp))
                       for s in samples)
        return out

    def _mig_devices(self, h: Any) -> tuple[NvmlMigDevice, ...] | None:
        """The MIG devices of GPU ``h``; None when MIG is not enabled (or not supported)."""
        lib = self.lib
        query = getattr(lib, "nvmlDeviceGetMigMode", None)  # an old library has no MIG
        if query is None:
            return None
        try:
            current = query(h)[0]
        except lib.NVMLError:
            return None  # NOT_SUPPORTED: a GPU without MIG
        if int(getattr(current, "value", current)) != _MIG_ENABLED:
            return None
        profiles: dict[int, int] = {}  # profile id -> compute slices
        for profile in range(getattr(lib, "NVML_GPU_INSTANCE_PROFILE_COUNT", _PROFILE_COUNT)):
            try:
                info = lib.nvmlDeviceGetGpuInstanceProfileInfo(h, profile)
            except lib.NVMLError:
                continue
            profiles[int(info.id)] = int(info.sliceCount)
        out = []
        for slot in range(lib.nvmlDeviceGetMaxMigDeviceCount(h)):
            try:
                mig = lib.nvmlDeviceGetMigDeviceHandleByIndex(h, slot)
            except lib.NVMLError as exc:
                if getattr(exc, "value", None) == _NVML_ERROR_NOT_FOUND:
                    continue  # an empty slot
                raise
            gi = lib.nvmlDeviceGetGpuInstanceId(mig)
            if any(d.gpu_instance == gi for d in out):
                continue  # a second compute instance of one GPU instance: rota gives it whole
            info = lib.nvmlGpuInstanceGetInfo(lib.nvmlDeviceGetGpuInstanceById(h, gi))
            out.append(NvmlMigDevice(
                uuid=_text(lib.nvmlDeviceGetUUID(mig)), name=_text(lib.nvmlDeviceGetName(mig)),
                memory_mib=lib.nvmlDeviceGetMemoryInfo(mig).total // MiB, gpu_instance=int(gi),
                profile_id=int(info.profileId), compute=profiles.get(int(info.profileId), 0),
                start=int(info.placement.start), size=int(info.placement.size)))
        return tuple(sorted(out, key=lambda d: d.start))

    def _numa(self, h: Any, bus_id: str) -> int | None:
        query = getattr(self.lib, "nvmlDeviceGetNumaNodeId", None)
        if query is not None:
            try:
                node = query(h)
                return node if node >= 0 else None
            except self.lib.NVMLError:
                pass
        try:
            node = int(Path(f"/sys/bus/pci/devices/{bus_id}/numa_node").read_text())
        except (OSError, ValueError):
            return None
        return node if node >= 0 else None

    def _peers(self, h: Any) -> tuple[str, ...]:
        lib = self.lib
        enabled = getattr(lib, "NVML_FEATURE_ENABLED", 1)
        peers = []
        for link in range(getattr(lib, "NVML_NVLINK_MAX_LINKS", 18)):
            try:
                if lib.nvmlDeviceGetNvLinkState(h, link) != enabled:
                    continue
                peers.append(_bus_id(lib.nvmlDeviceGetNvLinkRemotePciInfo(h, link)))
            except lib.NVMLError:
                continue  # no NVLink, or no such link on this device
        return tuple(dict.fromkeys(peers))

    def _healthy(self, h: Any) -> bool:
        lib = self.lib
        try:
            errors = lib.nvmlDeviceGetTotalEccErrors(
                h, getattr(lib, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1),
                getattr(lib, "NVML_VOLATILE_ECC", 0))
        except lib.NVMLError as exc:
            return getattr(exc, "value", None) != _NVML_ERROR_GPU_IS_LOST
        return errors == 0
