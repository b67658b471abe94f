"""The domain model of rota: pure values, no I/O.

Everything the scheduler reasons about is here: resource quantities and requests
(``resources``), GPU devices and nodes (``nodes``), jobs with their placements and legal state
transitions (``jobs``), and queues, flavours, quotas, cohorts and projects (``queues``); what
one scheduling cycle reads (``snapshot``) and decides, with structured reasons
(``decisions``), so that the store and the API can hold both without the scheduler.
"""

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
    parse_duration_s, parse_gpu, parse_gpu_amount, parse_gpus, parse_memory_mib,
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
    "parse_gpus", "parse_memory_mib",
]
