"""The YAML files users write, validated into core objects.

- ``cluster``: the cluster file (nodes, GPUs, flavours, queues, projects, running jobs);
- ``job``: the job spec, shared by the jobs file and a single-job file;
- ``build``: rules across entries, and conversion to a ``Snapshot`` and pending ``Job`` s;
- ``types``, ``errors``, ``load``: field types, error paths, YAML reading.

Every error is ``rota.core.InvalidSpec(field, reason)`` with a dotted field path such as
``jobs[2].resources.gpu``; the caller adds the file name.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rota.spec.job import DEFAULT_MEMORY, JobFileSpec, JobSpec, parse_job, to_job
from rota.spec.load import parse_yaml, read_mapping, read_yaml

if TYPE_CHECKING:
    from rota.spec.build import (
        Binding, Cluster, QueueSet, build_cluster, build_jobs, build_queues, check_policy,
    )

# ``build`` checks policies against the scheduler's registry, so it loads the scheduler: only
# ``rota plan`` and the simulator need it, not a command that reads one job file (rota submit)
_BUILD = frozenset({"Binding", "Cluster", "QueueSet", "build_cluster", "build_jobs",
                    "build_queues", "check_policy"})


def __getattr__(name: str) -> Any:
    if name in _BUILD:
        from rota.spec import build
        return getattr(build, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_cluster(path: str | Path) -> Cluster:
    from rota.spec.build import build_cluster
    return build_cluster(read_mapping(path, "nodes, queues, ..."))


def load_jobs(path: str | Path, cluster: Cluster):
    from rota.spec.build import build_jobs
    return build_jobs(cluster, read_mapping(path, "a jobs: list"))


def load_job(path: str | Path) -> JobSpec:
    """A single-job file: one job spec at the top level."""
    return parse_job(read_mapping(path, "name, project, queue, ..."))


__all__ = [
    "Binding", "Cluster", "DEFAULT_MEMORY", "JobFileSpec", "JobSpec", "QueueSet", "build_cluster", "build_jobs", "build_queues", "check_policy",
    "load_cluster",
    "load_job", "load_jobs", "parse_job", "parse_yaml", "read_yaml", "to_job",
]
