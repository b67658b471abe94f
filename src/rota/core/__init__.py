"""The domain model of rota: pure values, no I/O.

Everything the scheduler reasons about is here: resource quantities and requests
(``resources``), GPU devices and nodes (``nodes``), jobs with their placements and legal state
transitions (``jobs``), and queues, flavours, quotas, cohorts and projects (``queues``); what
one scheduling cycle reads (``snapshot``) and decides, with structured reasons
(``decisions``), so that the store and the API can hold both without the scheduler.

Importing the package loads none of them: a name below is loaded when it is first asked for
(``from rota.core import Job``), so that a module that needs none of the domain model reads
``rota.core.shortforms`` (the short forms of ``rota ps``) without the 50 ms of dataclasses and
enums the rest costs, which is more than ``rota ps``'s whole start.

Its modules import the standard library's pure parts and each other only: no I/O, no clock,
nothing else of rota (``tests/scheduler/test_purity.py`` holds them to it).

The domain model:

- ``errors``: the one error hierarchy, each error with a stable code (``InvalidSpec`` ...);
- ``resources``: resource quantities (milli-cores, MiB, milli-GPU) and requests, and their
  parsers;
- ``nodes``: GPU devices and the nodes that hold them, with what work outside rota holds there;
- ``mig``: MIG GPU instance profiles per GPU model, their valid placements and geometries;
- ``migplan``: named MIG geometries, the calendar that switches nodes between them, and what
  a switch changes on one GPU;
- ``nodelabels``: the node labels rota reports for people (limits enforced, full GPU names);
  it imports nothing;
- ``jobs``: jobs, their placements, and the legal moves between their states;
- ``queues``: queues, flavours, quotas, cohorts and projects, with Kueue's vocabulary;
- ``snapshot``: the immutable input of one scheduling cycle;
- ``decisions``: what a cycle decides, as data, with structured reasons;
- ``reasons``: why a job waits or is refused (``ReasonCode``, ``Reason``, ``Holder``), without
  the job model, for what words them;
- ``capacity``: elastic capacity as data: GPU pools and node groups (latency, cost), what was
  attached or added from them, budgets and the cluster cap, and the planner's decisions;

Values the other layers share:

- ``runspec``: a job's launch spec, one frozen value read once from its stored ``run`` mapping;
- ``mounts``: the volume claims and /dev/shm size a job asks of a container backend;
- ``batchopts``: the partition, QOS, reservation and constraint a job runs with in a batch
  system, from its queue and, where the queue allows, its own choice;
- ``datasets``: datasets jobs read, their sources and versions, and which cached copies a
  node may evict;
- ``serving``: what a model-serving job declares, and how many replicas it should have now;
- ``accounting``: exact accounting: GPU-hours over a time range, their cost, and budgets;
- ``archive``: what a safe upload archive is, one rule for the API and the control plane;
- ``datadir``: the data directory's layout, paths only;
- ``fingerprint``: how a certificate is named to a person (``SHA256:...``, as ``ssh`` does).

Words, from one place so that the CLI, the API and the dashboard never differ:

- ``shortforms``: amounts, durations and placements in the short forms of ``rota ps``; it
  imports nothing;
- ``wording``: scheduling reasons and amounts as people read them;
- ``jobwords``: jobs and nodes in words, from the API's JSON views (``rota show`` and the
  dashboard's job page).
"""

from importlib import import_module

TYPE_CHECKING = False  # typing's own costs 5 ms; type checkers take any TYPE_CHECKING as true
if TYPE_CHECKING:
    from rota.core.decisions import (
        Bind, Decisions, Preempt, Reason, ReasonCode, Reject, Reserve, Wait,
    )
    from rota.core.errors import IllegalTransition, InvalidSpec, RotaError, UnknownPlugin
    from rota.core.jobs import (
        TRANSITIONS, DeviceShare, End, Job, JobId, JobKind, JobState, Placement, ReplicaPlacement,
        check_transition,
    )
    from rota.core.nodes import (
        DEFAULT_GROUP, GPU_MEMORY_ENFORCEMENT, JOB_LIMITS, Foreign, GpuDevice, Node, NodeName,
        model_matches,
    )
    from rota.core.queues import (
        ANY_FLAVOR, BorrowWithinCohort, Flavor, FlavorQuota, Project, Queue, ReclaimWithinCohort,
        WithinQueue,
    )
    from rota.core.resources import (
        CPU, GPU, MEMORY, MILLI, RESOURCE_NAMES, GpuRequest, ReplicaRequest, parse_cpu_milli,
        parse_duration_s, parse_gpu, parse_gpu_amount, parse_gpu_request, parse_gpus,
        parse_memory_mib,
    )
    from rota.core.snapshot import Snapshot, Usage

__all__ = [
    "Bind", "Decisions", "Preempt", "Reason", "ReasonCode", "Reject", "Reserve", "Snapshot",
    "Usage", "Wait",
    "ANY_FLAVOR", "BorrowWithinCohort", "CPU", "DEFAULT_GROUP", "GPU", "GPU_MEMORY_ENFORCEMENT",
    "JOB_LIMITS", "MEMORY", "MILLI",
    "RESOURCE_NAMES", "TRANSITIONS", "DeviceShare", "End", "Flavor", "FlavorQuota", "Foreign",
    "GpuDevice", "GpuRequest",
    "IllegalTransition", "InvalidSpec", "Job", "JobId", "JobKind", "JobState", "Node",
    "NodeName", "Placement", "Project", "Queue", "ReclaimWithinCohort", "ReplicaPlacement",
    "ReplicaRequest", "RotaError", "UnknownPlugin", "WithinQueue", "check_transition",
    "model_matches", "parse_cpu_milli", "parse_duration_s", "parse_gpu", "parse_gpu_amount",
    "parse_gpu_request",
    "parse_gpus", "parse_memory_mib",
]

# the modules that hold the names of __all__, each after those it imports: the first that has
# a name is the one that defines it, and asking for a name loads no module it does not need
_MODULES = ("errors", "resources", "jobs", "decisions", "nodes", "queues", "snapshot")


def __getattr__(name: str) -> object:
    """A name of ``__all__`` from the first module of ``_MODULES`` that has it, kept here."""
    if name in __all__:
        for module in _MODULES:
            value = getattr(import_module(f"rota.core.{module}"), name, _MISSING)
            if value is not _MISSING:
                globals()[name] = value
                return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_MISSING = object()
