"""The YAML files users write, validated into core objects.

- ``cluster``: the cluster file (nodes, GPUs, flavours, queues, projects, running jobs);
- ``job``: the job spec, shared by the jobs file and a single-job file;
- ``build``: rules across entries, and conversion to a ``Snapshot`` and pending ``Job`` s;
- ``service``: the ``service`` section of a job file of kind service;
- ``slurm``: the ``slurm`` sections of a queue and of a job file (partition, QOS, ...);
- ``limits``: how large a job may grow: the limits on everything a job file or a request body
  can make big;
- ``types``, ``errors``, ``load``: field types, error paths, YAML reading.

Every error is ``rota.core.InvalidSpec(field, reason)`` with a dotted field path such as
``jobs[2].resources.gpu``; the caller adds the file name.
"""

from __future__ import annotations

from importlib import import_module

TYPE_CHECKING = False  # as typing's, without importing typing (a tenth of a short command)
if TYPE_CHECKING:
    from pathlib import Path

    from rota.spec.build import (
        Binding, Cluster, QueueSet, build_cluster, build_jobs, build_queues, check_policy,
    )
    from rota.spec.job import DEFAULT_MEMORY, JobFileSpec, JobSpec, parse_job, to_job
    from rota.spec.load import parse_yaml, read_mapping, read_yaml

# Each name is imported from its module when first asked for: ``build`` checks policies against
# the scheduler's registry, so it loads the scheduler, which only ``rota plan`` and the
# simulator need; ``job`` loads pydantic, which reading a YAML file does not (``rota.spec.load``
# alone is what ``rota submit``'s fast path reads a job file with, ``rota.cli.fast``).
_HOMES = {**dict.fromkeys(("Binding", "Cluster", "QueueSet", "build_cluster", "build_jobs",
                           "build_queues", "check_policy"), "build"),
          **dict.fromkeys(("DEFAULT_MEMORY", "JobFileSpec", "JobSpec", "parse_job", "to_job"),
                          "job"),
          **dict.fromkeys(("parse_yaml", "read_mapping", "read_yaml"), "load")}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"rota.spec.{home}"), name)


def load_cluster(path: str | Path) -> Cluster:
    from rota.spec.build import build_cluster
    from rota.spec.load import read_mapping
    return build_cluster(read_mapping(path, "nodes, queues, ..."))


def load_jobs(path: str | Path, cluster: Cluster):
    from rota.spec.build import build_jobs
    from rota.spec.load import read_mapping
    return build_jobs(cluster, read_mapping(path, "a jobs: list"))


def load_job(path: str | Path) -> JobSpec:
    """A single-job file: one job spec at the top level."""
    from rota.spec.job import parse_job
    from rota.spec.load import read_mapping
    return parse_job(read_mapping(path, "name, project, queue, ..."))


__all__ = [
    "Binding", "Cluster", "DEFAULT_MEMORY", "JobFileSpec", "JobSpec", "QueueSet", "build_cluster",
    "build_jobs", "build_queues", "check_policy", "load_cluster", "load_job", "load_jobs",
    "parse_job", "parse_yaml", "read_mapping", "read_yaml", "to_job",
]
