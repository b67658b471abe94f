"""GPU devices and the nodes that hold them.

A ``GpuDevice`` is static inventory: what the device is and where it sits (NUMA node,
NVLink/PCIe domain). What rota's own jobs hold on it is not stored here: the scheduler derives
it from the placements of running jobs, so that there is one source of truth.

What work *outside* rota holds (a job submitted to Slurm directly, a Pod of another scheduler)
is a fact only the backend knows: a node carries it as ``foreign`` holdings, which the
scheduler treats as taken, never to be booked twice. ``problem`` is the backend's own reason
why nothing may start on the node now (Slurm: drained, down; Kubernetes: cordoned, NotReady);
a node with a problem is not schedulable, whatever the operator's cordon says.

``features`` are the node's *capabilities*, facts its backend reports as it reports the node
(as Slurm's GRES types and Kueue's flavours are facts of nodes), so that the scheduler places a
job only where it can run, instead of a backend refusing at launch what was placed:

- ``gpu-sharing``: several jobs may share one GPU (fractions: ``gpu: 0.5``);
- ``gpu-memory-limit``: a job over its GPU-memory share is stopped;
- ``gpu-compute-limit``: a job's compute share of a GPU is capped;
- ``signals``: any signal reaches the job's processes (a checkpoint on SIGUSR1), not only
  SIGTERM and SIGKILL;
- ``containers``: jobs run in container images.

A node reported without them (an inventory file, a row stored before nodes had features) has
``HOST_FEATURES``: what a machine running jobs as processes offers.

A control plane of several backends (``rota.backends.several``) labels each node with
``ENGINE_LABEL`` + a backend's name (``rota.dev/engine-slurm: "true"``) for every backend that
can launch jobs there. A gang's replicas are launched by one backend, so the scheduler places
them on nodes that share one such label (``rota.scheduler.placement.place_gang``); a job's
selector may name one.

A MIG-enabled GPU is not a device here: each of its GPU instances is (``rota.core.mig``), with
its ``profile`` (``1g.10gb``), the index of the GPU it is cut from (``parent``), its placement
``start`` and ``compute`` slices; its ``index`` is ``mig.instance_index(parent, start)``, its
``model`` the parent's, its memory its own. Such a device is given whole to a job that asks
for its profile, and never to any other job (``GpuDevice.mig``).

``cache`` is what the node's dataset cache holds: bytes per copy, keyed by
``rota.core.datasets.cache_key`` (``imagenet@1``); ``data_bandwidth`` the bytes per second it
copies a dataset from its source at (0: not known; placement then assumes the policy's
default). Placement by time to first batch reads both (``rota.scheduler.data``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Mapping, NewType

from rota.core.errors import InvalidSpec
from rota.core.jobs import DeviceShare, Job
from rota.core.mig import COMPUTE_SLICES
from rota.core.nodelabels import GPU_MEMORY_ENFORCEMENT, JOB_LIMITS  # noqa: F401 (theirs)
from rota.core.resources import MILLI

NodeName = NewType("NodeName", str)
DEFAULT_GROUP = "default"

# node features (capabilities), see the module's docstring
GPU_SHARING = "gpu-sharing"
GPU_MEMORY_LIMIT = "gpu-memory-limit"
GPU_COMPUTE_LIMIT = "gpu-compute-limit"
SIGNALS = "signals"
CONTAINERS = "containers"
FEATURES = frozenset({GPU_SHARING, GPU_MEMORY_LIMIT, GPU_COMPUTE_LIMIT, SIGNALS, CONTAINERS})
HOST_FEATURES = frozenset({GPU_SHARING, SIGNALS})
ENGINE_LABEL = "rota.dev/engine-"  # + a backend's name: "true" where that backend launches jobs


@dataclass(frozen=True, slots=True)
class GpuDevice:
    index: int
    model: str
    memory_mib: int
    uuid: str = ""
    numa: int = 0
    nvlink: str | None = None  # devices with the same value share an NVLink domain
    healthy: bool = True
    problem: str = ""          # why it is unhealthy, as its backend reported it
    profile: str = ""          # a MIG instance's profile (1g.10gb); "" for a whole GPU
    parent: int | None = None  # a MIG instance's GPU
    start: int = 0             # a MIG instance's placement start, in memory slices
    compute: int = 0           # a MIG instance's compute slices
    # when a planned MIG switch takes this device away (``rota.core.migplan``); None: no
    # switch planned that would, or one that may evict whatever runs here
    switch_at: float | None = None

    def __post_init__(self) -> None:
        if self.index < 0:
            raise InvalidSpec("index", f"must not be negative, got {self.index}")
        if self.profile:
            if self.parent is None or self.parent < 0:
                raise InvalidSpec("parent", f"MIG instance {self.index} needs its GPU's index")
            if not 1 <= self.compute <= COMPUTE_SLICES:
                raise InvalidSpec("compute", f"must be 1 to {COMPUTE_SLICES} slices, got "
                                  f"{self.compute}")
        elif self.parent is not None:
            raise InvalidSpec("profile", f"device {self.index} has a parent GPU but no profile")
        if self.memory_mib <= 0:
            raise InvalidSpec("memory", f"must be positive, got {self.memory_mib}")
        if not self.model:
            raise InvalidSpec("model", "must not be empty")

    @property
    def mig(self) -> bool:
        """Whether it is a MIG instance (given whole, only to jobs asking for its profile)."""
        return bool(self.profile)

    @property
    def milli(self) -> int:
        """What holding the whole device is charged, in milli-GPU: a whole GPU 1000, a MIG
        instance its compute slices of the GPU's (a 1g of 7 slices: 143)."""
        return round(self.compute * MILLI / COMPUTE_SLICES) if self.profile else MILLI


@dataclass(frozen=True, slots=True)
class Foreign:
    """What one piece of work outside rota holds on a node: CPU, memory, device shares (by
    device index), and who holds it, for people (``slurm job 4711 (omar)``, ``pod ml/infer-0``)."""

    cpu_milli: int = 0
    memory_mib: int = 0
    devices: tuple[DeviceShare, ...] = ()
    holder: str = ""


@dataclass(frozen=True, slots=True)
class Node:
    name: NodeName
    cpu_milli: int
    memory_mib: int
    devices: tuple[GpuDevice, ...] = ()
    resource_group: str = DEFAULT_GROUP
    labels: Mapping[str, str] = field(default_factory=dict)
    schedulable: bool = True
    foreign: tuple[Foreign, ...] = ()
    problem: str = ""
    features: frozenset[str] = HOST_FEATURES
    cache: Mapping[str, int] = field(default_factory=dict)  # dataset@version -> bytes held
    data_bandwidth: float = 0.0  # bytes/s from a dataset's source; 0: not known

    def __post_init__(self) -> None:
        if self.data_bandwidth < 0:
            raise InvalidSpec("data_bandwidth", f"must not be negative, got "
                              f"{self.data_bandwidth}")
        unknown_features = self.features - FEATURES
        if unknown_features:
            raise InvalidSpec("features", f"unknown on node {self.name}: "
                              f"{', '.join(sorted(unknown_features))}; known: "
                              f"{', '.join(sorted(FEATURES))}")
        if self.cpu_milli < 0:
            raise InvalidSpec("cpu", f"must not be negative, got {self.cpu_milli}")
        if self.memory_mib < 0:
            raise InvalidSpec("memory", f"must not be negative, got {self.memory_mib}")
        indices = [d.index for d in self.devices]
        if len(set(indices)) != len(indices):
            raise InvalidSpec("gpus", f"device indices repeat on node {self.name}: {indices}")
        if indices != sorted(indices):
            raise InvalidSpec("gpus", f"devices of node {self.name} must be in index order")
        for held in self.foreign:
            unknown = [s.index for s in held.devices if s.index not in indices]
            if unknown:
                raise InvalidSpec("foreign", f"{held.holder or 'work outside rota'} holds GPU "
                                  f"{unknown[0]}, which node {self.name} does not have")

    @property
    def models(self) -> frozenset[str]:
        return frozenset(d.model for d in self.devices)


# what ``features_needed`` answers, by (GPU share, container image), made once
_NEEDS = {(False, False): frozenset(), (True, False): frozenset({GPU_SHARING}),
          (False, True): frozenset({CONTAINERS}),
          (True, True): frozenset({GPU_SHARING, CONTAINERS})}


def features_needed(job: Job) -> frozenset[str]:
    """The node features a replica of ``job`` cannot run without: a GPU share (less than one
    whole GPU) needs ``gpu-sharing``, a container ``image`` needs ``containers``; a job without
    an image may go to any node. A checkpoint signal other than SIGTERM needs no feature: where
    signals do not reach a job, its backend stops it with SIGTERM and the grace period
    (``docs/kubernetes.md``), which a job that checkpoints on SIGTERM too survives."""
    return _NEEDS[job.request.gpu.fractional, job.image is not None]


def model_matches(model: str, patterns: tuple[str, ...]) -> bool:
    """True when ``model`` matches one of the shell-style ``patterns`` (case-insensitive); no
    patterns means any model."""
    if not patterns:
        return True
    low = model.lower()
    return any(fnmatchcase(low, p.lower()) for p in patterns)
