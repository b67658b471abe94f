"""The immutable input of one scheduling cycle.

A ``Snapshot`` holds everything ``run_cycle`` may read: inventory, queues, flavours, projects,
the jobs that hold resources and the jobs that wait (and which of these evicted jobs for
themselves in the cycle before), each project's decayed usage history for fair share, and the
datasets the pending jobs name (``datasets``: by name, with version and size, which placement
by time to first batch compares with each node's ``cache``). Nothing else is consulted: no
store, no clock, no backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from rota.core.datasets import Dataset
from rota.core.jobs import Job, JobState
from rota.core.nodes import Node
from rota.core.queues import ANY_FLAVOR, Flavor, Project, Queue


@dataclass(frozen=True, slots=True)
class Usage:
    """A project's past consumption in GPU-seconds, already decayed to time ``as_of``."""

    gpu_seconds: float
    as_of: float


@dataclass(frozen=True, slots=True)
class Snapshot:
    nodes: tuple[Node, ...]
    queues: Mapping[str, Queue]
    jobs: tuple[Job, ...]  # pending jobs and jobs holding resources; terminal ones are left out
    projects: Mapping[str, Project] = field(default_factory=dict)
    flavors: Mapping[str, Flavor] = field(default_factory=lambda: {ANY_FLAVOR: Flavor(ANY_FLAVOR)})
    usage: Mapping[str, Usage] = field(default_factory=dict)
    # pending jobs that evicted jobs for themselves and have not started since: the last
    # cycle left them waiting for their victims (``Decisions.nominated``); they go first
    nominated: frozenset[str] = frozenset()
    datasets: Mapping[str, Dataset] = field(default_factory=dict)  # by name

    @property
    def pending(self) -> tuple[Job, ...]:
        return tuple(j for j in self.jobs if j.state is JobState.PENDING)

    @property
    def active(self) -> tuple[Job, ...]:
        """Jobs that hold resources (scheduled, running or preempting)."""
        return tuple(j for j in self.jobs if j.state.holds_resources)

    def project(self, name: str) -> Project:
        return self.projects.get(name) or Project(name)

    def flavor(self, name: str) -> Flavor:
        if name == ANY_FLAVOR:
            return self.flavors.get(ANY_FLAVOR, Flavor(ANY_FLAVOR))
        return self.flavors[name]
