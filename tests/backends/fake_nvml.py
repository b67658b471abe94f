"""A stand-in for the ``pynvml`` module, faithful at the level rota uses it.

Same function names, argument order and return shapes as ``nvidia-ml-py``: names and UUIDs are
``str``, PCI bus ids ``bytes`` in the 8-digit-domain form, memory in bytes, processes as objects
with ``pid`` and ``usedGpuMemory`` (``None`` when unavailable). Failures raise ``NVMLError`` with
the NVML return code in ``value``: an index out of range is ``INVALID_ARGUMENT``, a feature the
device lacks (NVLink, ECC, NUMA query) is ``NOT_SUPPORTED``, calls before ``nvmlInit`` are
``UNINITIALIZED``.

MIG, as the driver does it: a GPU with ``mig`` (``A100_40GB`` or ``H100_80GB``, each profile by
NVML's profile index: its id, compute slices, memory in MB, most instances and possible
starts, from NVIDIA's MIG user guide) is MIG-capable; ``nvmlDeviceGetMigMode`` answers
``NOT_SUPPORTED`` on any other. As ``nvidia-smi mig -cgi ... -C``, instances are made in two
steps: ``nvmlDeviceCreateGpuInstance[WithPlacement]`` a GPU instance without compute instance
(no MIG device yet), ``nvmlGpuInstanceCreateComputeInstance`` its one compute instance spanning
it (a smaller one is ``NOT_SUPPORTED`` here, a second ``INSUFFICIENT_RESOURCES``). A placement
taken in part is ``INSUFFICIENT_RESOURCES``, one the profile does not allow
``INVALID_ARGUMENT``; destroying an instance a process uses, a GPU instance with its compute
instance, or switching MIG mode while processes run or instances exist, is ``IN_USE``. Arrays
of placements, GPU and compute instances are filled with a count, as the real calls do (a
``None`` array asks only for the count); a ``FakeInstance`` made by hand has its compute
instance.
"""

from __future__ import annotations

import ctypes
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
NVML_ERROR_IN_USE = 19
NVML_ERROR_INSUFFICIENT_RESOURCES = 23
NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1
NVML_GPU_INSTANCE_PROFILE_COUNT = 15
NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = 0
CI_SLICES = {0: 1, 1: 2, 2: 3, 3: 4, 4: 7}  # NVML compute instance profile -> compute slices
NVML_SUCCESS = 0
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


class c_nvmlGpuInstancePlacement_t(ctypes.Structure):  # noqa: N801 - pynvml's name
    _fields_ = [("start", ctypes.c_uint), ("size", ctypes.c_uint)]


# NVML profile index -> (profile id, compute slices, memory MB, most instances, possible starts,
# name as nvidia-smi shows it);
# every placement of a profile spans its memory slices (1, 2, 2, 4, 4, 8 in this order)
_SPAN = {0: 1, 9: 2, 1: 2, 2: 4, 3: 4, 4: 8}
Profiles = dict[int, tuple[int, int, int, int, tuple[int, ...], str]]
A100_40GB: Profiles = {
    0: (19, 1, 4864, 7, (0, 1, 2, 3, 4, 5, 6), "1g.5gb"),
    9: (15, 1, 9856, 4, (0, 2, 4, 6), "1g.10gb"),
    1: (14, 2, 9856, 3, (0, 2, 4), "2g.10gb"),
    2: (9, 3, 19968, 2, (0, 4), "3g.20gb"),
    3: (5, 4, 19968, 1, (0,), "4g.20gb"),
    4: (0, 7, 40192, 1, (0,), "7g.40gb"),
}
H100_80GB: Profiles = {
    0: (19, 1, 9856, 7, (0, 1, 2, 3, 4, 5, 6), "1g.10gb"),
    9: (15, 1, 19968, 4, (0, 2, 4, 6), "1g.20gb"),
    1: (14, 2, 19968, 3, (0, 2, 4), "2g.20gb"),
    2: (9, 3, 40192, 2, (0, 4), "3g.40gb"),
    3: (5, 4, 40192, 1, (0,), "4g.40gb"),
    4: (0, 7, 80384, 1, (0,), "7g.80gb"),
}


@dataclass
class FakeInstance:
    """A GPU instance (with its one compute instance): its id, profile, placement, UUID."""

    id: int
    profile: int  # NVML profile index
    start: int
    size: int
    uuid: str
    processes: dict[int, int | None] = field(default_factory=dict)
    compute_instance: int | None = 0  # its one compute instance's id; None: none yet



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
    mig: Profiles | None = None       # MIG profiles (A100_40GB, H100_80GB); None: no MIG
    mig_mode: int = NVML_DEVICE_MIG_DISABLE
    instances: list[FakeInstance] = field(default_factory=list)

    @property
    def bus_id(self) -> bytes:
        return f"00000000:{self.bus:02X}:00.0".encode()


class FakeNvml:
    """Use as the ``lib`` of ``rota.backends.nvml.Nvml``, or install as ``sys.modules['pynvml']``."""

    NVMLError = NVMLError
    NVML_GPU_INSTANCE_PROFILE_COUNT = NVML_GPU_INSTANCE_PROFILE_COUNT
    c_nvmlGpuInstancePlacement_t = c_nvmlGpuInstancePlacement_t
    c_nvmlGpuInstance_t = ctypes.py_object       # handles, as arrays of them are made
    c_nvmlComputeInstance_t = ctypes.py_object
    NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
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
        gpu = self._gpu(handle)
        instance = self._instance(handle)
        if instance is not None:  # a MIG device: its GPU's name and its profile's
            return f"{gpu.name} MIG {gpu.mig[instance.profile][5]}"  # type: ignore[index]
        return gpu.name

    def nvmlDeviceGetUUID(self, handle: SimpleNamespace) -> str:
        self._gpu(handle)
        instance = self._instance(handle)
        return instance.uuid if instance is not None else f"GPU-fake-{handle.index:04d}"

    def nvmlDeviceGetMemoryInfo(self, handle: SimpleNamespace) -> SimpleNamespace:
        gpu = self._gpu(handle)
        instance = self._instance(handle)
        if instance is not None:
            total = gpu.mig[instance.profile][2] * MiB  # type: ignore[index]
            used = sum(m or 0 for m in instance.processes.values()) * MiB
            return SimpleNamespace(total=total, used=used, free=total - used)
        used = sum(m or 0 for m in gpu.processes.values()) * MiB
        total = gpu.memory_mib * MiB
        return SimpleNamespace(total=total, used=used, free=total - used)

    # -- MIG ---------------------------------------------------------------------------------

    def _instance(self, handle: SimpleNamespace) -> FakeInstance | None:
        """The GPU instance of a MIG device handle; None for a GPU's own handle."""
        gi = getattr(handle, "gi", None)
        if gi is None:
            return None
        found = [i for i in self.gpus[handle.index].instances if i.id == gi]
        if not found:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)  # the instance was destroyed
        return found[0]

    def _mig_gpu(self, handle: SimpleNamespace, enabled: bool = True) -> FakeGpu:
        gpu = self._gpu(handle)
        if gpu.mig is None or (enabled and gpu.mig_mode != NVML_DEVICE_MIG_ENABLE):
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return gpu

    def nvmlDeviceGetMigMode(self, handle: SimpleNamespace) -> list[int]:
        gpu = self._mig_gpu(handle, enabled=False)
        return [gpu.mig_mode, gpu.mig_mode]

    def nvmlDeviceSetMigMode(self, handle: SimpleNamespace, mode: int) -> int:
        gpu = self._mig_gpu(handle, enabled=False)
        if gpu.processes:
            raise NVMLError(NVML_ERROR_IN_USE)
        if mode not in (NVML_DEVICE_MIG_DISABLE, NVML_DEVICE_MIG_ENABLE):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        if mode == NVML_DEVICE_MIG_DISABLE and gpu.instances:
            raise NVMLError(NVML_ERROR_IN_USE)
        gpu.mig_mode = mode
        return NVML_SUCCESS  # the activation status

    def nvmlDeviceGetGpuInstanceProfileInfo(self, handle: SimpleNamespace,
                                            profile: int) -> SimpleNamespace:
        gpu = self._mig_gpu(handle)
        if not 0 <= profile < NVML_GPU_INSTANCE_PROFILE_COUNT:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        if profile not in gpu.mig:  # type: ignore[operator]
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        pid, compute, memory, count, _, _ = gpu.mig[profile]  # type: ignore[index]
        return SimpleNamespace(id=pid, isP2pSupported=0, sliceCount=compute, instanceCount=count,
                               multiprocessorCount=compute * 16, copyEngineCount=compute,
                               decoderCount=0, encoderCount=0, jpegCount=0, ofaCount=0,
                               memorySizeMB=memory)

    def _profile_by_id(self, gpu: FakeGpu, profile_id: int) -> int:
        for index, entry in gpu.mig.items():  # type: ignore[union-attr]
            if entry[0] == profile_id:
                return index
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetGpuInstancePossiblePlacements(self, handle: SimpleNamespace, profileId: int,
                                                   placementsRef, countRef) -> int:
        gpu = self._mig_gpu(handle)
        profile = self._profile_by_id(gpu, profileId)
        starts = gpu.mig[profile][4]  # type: ignore[index]
        if placementsRef is not None:
            if len(placementsRef) < len(starts):
                raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
            for k, start in enumerate(starts):
                placementsRef[k].start, placementsRef[k].size = start, _SPAN[profile]
        countRef.contents.value = len(starts)
        return NVML_SUCCESS

    def nvmlDeviceCreateGpuInstanceWithPlacement(self, handle: SimpleNamespace, profileId: int,
                                                 placement) -> SimpleNamespace:
        gpu = self._mig_gpu(handle)
        profile = self._profile_by_id(gpu, profileId)
        span = _SPAN[profile]
        placement = getattr(placement, "contents", placement)  # a pointer to it, as C takes
        starts = gpu.mig[profile][4]  # type: ignore[index]
        if placement.start not in starts or placement.size != span:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        taken = {s for i in gpu.instances for s in range(i.start, i.start + i.size)}
        if taken & set(range(placement.start, placement.start + span)):
            raise NVMLError(NVML_ERROR_INSUFFICIENT_RESOURCES)
        gi = max((i.id for i in gpu.instances), default=0) + 1
        gpu.instances.append(FakeInstance(gi, profile, placement.start, span,
                                          f"MIG-fake-{handle.index:02d}-{gi:02d}",
                                          compute_instance=None))
        return SimpleNamespace(index=handle.index, gi=gi, profile=profile)

    def nvmlDeviceCreateGpuInstance(self, handle: SimpleNamespace,
                                    profileId: int) -> SimpleNamespace:
        gpu = self._mig_gpu(handle)
        profile = self._profile_by_id(gpu, profileId)
        for start in gpu.mig[profile][4]:  # type: ignore[index]
            try:
                return self.nvmlDeviceCreateGpuInstanceWithPlacement(
                    handle, profileId, c_nvmlGpuInstancePlacement_t(start, _SPAN[profile]))
            except NVMLError as exc:
                if exc.value != NVML_ERROR_INSUFFICIENT_RESOURCES:
                    raise
        raise NVMLError(NVML_ERROR_INSUFFICIENT_RESOURCES)

    def nvmlGpuInstanceDestroy(self, gpu_instance: SimpleNamespace) -> None:
        instance = self._instance(gpu_instance)
        if instance.processes or instance.compute_instance is not None:  # type: ignore[union-attr]
            raise NVMLError(NVML_ERROR_IN_USE)
        self.gpus[gpu_instance.index].instances.remove(instance)  # type: ignore[arg-type]

    def nvmlDeviceGetGpuInstances(self, handle: SimpleNamespace, profileId: int,
                                  gpuInstancesRef, countRef) -> int:
        gpu = self._mig_gpu(handle)
        profile = self._profile_by_id(gpu, profileId)
        return _fill([SimpleNamespace(index=handle.index, gi=i.id, profile=profile)
                      for i in sorted(gpu.instances, key=lambda i: i.id) if i.profile == profile],
                     gpuInstancesRef, countRef)

    def _gi_slices(self, gpu_instance: SimpleNamespace) -> tuple[FakeInstance, int]:
        instance = self._instance(gpu_instance)
        assert instance is not None, "a GPU instance handle"
        return instance, self.gpus[gpu_instance.index].mig[instance.profile][1]  # type: ignore[index]

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(self, gpu_instance: SimpleNamespace, profile: int,
                                                     engProfile: int, version: int = 2):
        _, slices = self._gi_slices(gpu_instance)
        if profile not in CI_SLICES or engProfile != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        if CI_SLICES[profile] > slices:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return SimpleNamespace(id=profile, sliceCount=CI_SLICES[profile],
                               instanceCount=slices // CI_SLICES[profile])

    def nvmlGpuInstanceCreateComputeInstance(self, gpu_instance: SimpleNamespace,
                                             profileId: int) -> SimpleNamespace:
        instance, slices = self._gi_slices(gpu_instance)
        if CI_SLICES.get(profileId) != slices:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)  # only one CI spanning the GI, here
        if instance.compute_instance is not None:
            raise NVMLError(NVML_ERROR_INSUFFICIENT_RESOURCES)
        instance.compute_instance = 0
        return SimpleNamespace(index=gpu_instance.index, gi=instance.id, ci=0)

    def nvmlGpuInstanceGetComputeInstances(self, gpu_instance: SimpleNamespace, profileId: int,
                                           computeInstancesRef, countRef) -> int:
        instance, slices = self._gi_slices(gpu_instance)
        made = instance.compute_instance is not None and CI_SLICES.get(profileId) == slices
        return _fill([SimpleNamespace(index=gpu_instance.index, gi=instance.id, ci=0)] * made,
                     computeInstancesRef, countRef)

    def nvmlComputeInstanceDestroy(self, compute_instance: SimpleNamespace) -> int:
        instance = self._instance(compute_instance)
        if instance is None or instance.compute_instance != compute_instance.ci:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)  # destroyed already
        if instance.processes:
            raise NVMLError(NVML_ERROR_IN_USE)
        instance.compute_instance = None
        return NVML_SUCCESS

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: SimpleNamespace) -> int:
        gpu = self._mig_gpu(handle, enabled=False)
        return max(entry[3] for entry in gpu.mig.values())  # type: ignore[union-attr]

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: SimpleNamespace,
                                            index: int) -> SimpleNamespace:
        gpu = self._mig_gpu(handle)
        if not 0 <= index < self.nvmlDeviceGetMaxMigDeviceCount(handle):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        made = sorted((i for i in gpu.instances if i.compute_instance is not None),
                      key=lambda i: i.id)
        if index >= len(made):
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return SimpleNamespace(index=handle.index, gi=made[index].id, profile=made[index].profile)

    def nvmlDeviceGetGpuInstanceId(self, handle: SimpleNamespace) -> int:
        self._check()
        instance = self._instance(handle)
        if instance is None:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)  # not a MIG device handle
        return instance.id

    def nvmlDeviceGetGpuInstanceById(self, handle: SimpleNamespace, id: int) -> SimpleNamespace:
        gpu = self._mig_gpu(handle)
        for instance in gpu.instances:
            if instance.id == id:
                return SimpleNamespace(index=handle.index, gi=id, profile=instance.profile)
        raise NVMLError(NVML_ERROR_NOT_FOUND)

    def nvmlGpuInstanceGetInfo(self, gpu_instance: SimpleNamespace) -> SimpleNamespace:
        instance = self._instance(gpu_instance)
        assert instance is not None, "a GPU instance handle"
        profiles = self.gpus[gpu_instance.index].mig or {}
        return SimpleNamespace(
            device=SimpleNamespace(index=gpu_instance.index), id=instance.id,
            profileId=profiles[instance.profile][0],
            placement=c_nvmlGpuInstancePlacement_t(instance.start, instance.size))

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


def _fill(found: list, ref, countRef) -> int:
    """An NVML array-and-count answer: ``ref`` (None: the count only) and ``countRef``."""
    if ref is not None:
        if len(ref) < len(found):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        for k, item in enumerate(found):
            ref[k] = item
    countRef.contents.value = len(found)
    return NVML_SUCCESS


def initialised(gpus: list[FakeGpu]) -> FakeNvml:
    fake = FakeNvml(gpus)
    fake.nvmlInit()
    return fake
