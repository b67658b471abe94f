"""GPU devices and the nodes that hold them.

A ``GpuDevice`` is static inventory: what the device is and where it sits (NUMA node,
NVLink/PCIe domain). What is allocated on it is not stored here: the scheduler derives it from
the placements of running jobs, so that there is one source of truth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Mapping, NewType

from rota.core.errors import InvalidSpec

NodeName = NewType("NodeName", str)
DEFAULT_GROUP = "default"


@dataclass(frozen=True, slots=True)
class GpuDevice:
    index: int
    model: str
    memory_mib: int
    uuid: str = ""
    numa: int = 0
    nvlink: str | None = None  # devices with the same value share an NVLink domain
    healthy: bool = True

    def __post_init__(self) -> None:
        if self.index < 0:
            raise InvalidSpec("index", f"must not be negative, got {self.index}")
        if self.memory_mib <= 0:
            raise InvalidSpec("memory", f"must be positive, got {self.memory_mib}")
        if not self.model:
            raise InvalidSpec("model", "must not be empty")


@dataclass(frozen=True, slots=True)
class Node:
    name: NodeName
    cpu_milli: int
    memory_mib: int
    devices: tuple[GpuDevice, ...] = ()
    resource_group: str = DEFAULT_GROUP
    labels: Mapping[str, str] = field(default_factory=dict)
    schedulable: bool = True

    def __post_init__(self) -> None:
        if self.cpu_milli < 0:
            raise InvalidSpec("cpu", f"must not be negative, got {self.cpu_milli}")
        if self.memory_mib < 0:
            raise InvalidSpec("memory", f"must not be negative, got {self.memory_mib}")
        indices = [d.index for d in self.devices]
        if len(set(indices)) != len(indices):
            raise InvalidSpec("gpus", f"device indices repeat on node {self.name}: {indices}")
        if indices != sorted(indices):
            raise InvalidSpec("gpus", f"devices of node {self.name} must be in index order")

    @property
    def models(self) -> frozenset[str]:
        return frozenset(d.model for d in self.devices)


def model_matches(model: str, patterns: tuple[str, ...]) -> bool:
    """True when ``model`` matches one of the shell-style ``patterns`` (case-insensitive); no
    patterns means any model."""
    if not patterns:
        return True
    low = model.lower()
    return any(fnmatchcase(low, p.lower()) for p in patterns)
