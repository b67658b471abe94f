"""Slurm's job and node states, what they mean to rota, exit codes and rota's job names.

Job states are the names Slurm 22.05 prints (``squeue``'s ``job_state``, ``sacct``'s
``state.current``). ``JOB_STATES`` maps each to a ``JobPhase``: whether Slurm still holds the
job (``pending`` in Slurm's queue, ``running`` on its nodes) and, once it ended, whether it
**exited** (its command ran and ended: the exit code says how) or was **lost** (ended by
something outside the command, such as a failed node or a preemption by Slurm, so that
requeueing it is right). ``REPLICA_STATES`` then maps phases onto the backend's
running / exited / lost: a job still pending in Slurm is *running* as far as rota is concerned
(submitted, not ended), and ``JobPhase.started`` tells the two apart.

A job Slurm requeued by itself (``REQUEUED``, ``REQUEUE_HOLD``, ``REQUEUE_FED``) is *lost*: its
attempt ended, and running it again under the same Slurm job would run one rota attempt twice.
rota submits with ``--no-requeue`` so that Slurm does not do this unasked.

A node is unschedulable when its base state is ``down``, ``error``, ``future`` or ``unknown``,
or when one of ``UNSCHEDULABLE_FLAGS`` is set (drained or draining, failing, not responding,
in maintenance or in a reservation, rebooting, powered down); the reason is Slurm's own
(``scontrol update ... reason=``) when it has one. A rota job already running on a node
*loses* it (``losing_reason``) only when the node is down or in error: a drained or failing
node lets its running jobs end, as Slurm does.

Exit codes: Slurm writes ``code:signal`` (``3:0`` exited with 3; ``0:9`` killed by SIGKILL);
``squeue --json`` gives the raw wait status instead (``768`` is ``3:0``). rota's convention
(``rota.backends.base``) is ``128 + signal`` for a process killed by a signal.

Job names: attempt ``n`` of rota job ``J`` is the Slurm job ``rota-J-n``, with the comment
``rota:J@I`` (``I``: the control plane's instance, so that two rota installations on one
cluster, whose job numbers may be the same, never take each other's jobs for their own), so
that ``squeue``/``sacct`` find an attempt again by name.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from rota.backends.base import ReplicaState
from rota.backends.slurm.text import SlurmOutputError
from rota.core import InvalidSpec


class JobPhase(enum.Enum):
    PENDING = "pending"    # waiting in Slurm's queue
    RUNNING = "running"    # on its nodes (configuring, running, suspended, completing)
    EXITED = "exited"      # ended, and its exit code says how
    LOST = "lost"          # ended by something outside the command: requeue it

    @property
    def started(self) -> bool:
        return self is not JobPhase.PENDING

    @property
    def ended(self) -> bool:
        return self in (JobPhase.EXITED, JobPhase.LOST)


P = JobPhase
JOB_STATES: dict[str, tuple[JobPhase, str]] = {
    # name: (phase, why it ended, for people)
    "PENDING": (P.PENDING, ""),
    "CONFIGURING": (P.RUNNING, ""),
    "RUNNING": (P.RUNNING, ""),
    "COMPLETING": (P.RUNNING, ""),
    "SUSPENDED": (P.RUNNING, ""),
    "SIGNALING": (P.RUNNING, ""),
    "STAGE_OUT": (P.RUNNING, ""),
    "RESIZING": (P.RUNNING, ""),
    "STOPPED": (P.RUNNING, ""),
    "COMPLETED": (P.EXITED, ""),
    "FAILED": (P.EXITED, ""),
    "SPECIAL_EXIT": (P.EXITED, "special exit"),
    "CANCELLED": (P.EXITED, "cancelled in Slurm"),
    "TIMEOUT": (P.EXITED, "reached its Slurm time limit"),
    "OUT_OF_MEMORY": (P.EXITED, "out of memory in Slurm"),
    "DEADLINE": (P.EXITED, "reached its Slurm deadline"),
    "PREEMPTED": (P.LOST, "preempted by Slurm"),
    "NODE_FAIL": (P.LOST, "a Slurm node failed"),
    "BOOT_FAIL": (P.LOST, "a Slurm node failed to boot"),
    "REQUEUED": (P.LOST, "requeued by Slurm"),
    "REQUEUE_HOLD": (P.LOST, "requeued and held by Slurm"),
    "REQUEUE_FED": (P.LOST, "requeued by a Slurm federation"),
    "REVOKED": (P.LOST, "revoked by a Slurm federation"),
    "RESV_DEL_HOLD": (P.LOST, "held by Slurm: its reservation was deleted"),
}
REPLICA_STATES: dict[JobPhase, ReplicaState] = {
    P.PENDING: ReplicaState.RUNNING,
    P.RUNNING: ReplicaState.RUNNING,
    P.EXITED: ReplicaState.EXITED,
    P.LOST: ReplicaState.LOST,
}


def job_phase(state: str, where: str = "job state") -> JobPhase:
    """The phase of a Slurm job state name; a name Slurm 22.05 does not print is an error."""
    try:
        return JOB_STATES[state][0]
    except KeyError:
        raise SlurmOutputError(where, f"unknown Slurm job state {state!r}") from None


def end_reason(state: str) -> str:
    return JOB_STATES[state][1] if state in JOB_STATES else ""


# -- nodes --------------------------------------------------------------------------------------

UNSCHEDULABLE_STATES: dict[str, str] = {
    "down": "down in Slurm", "error": "in error in Slurm", "future": "not yet in service in Slurm",
    "unknown": "in an unknown state in Slurm",
}
UNSCHEDULABLE_FLAGS: dict[str, str] = {
    "DRAIN": "drained in Slurm", "FAIL": "failing in Slurm",
    "NOT_RESPONDING": "not responding to Slurm", "MAINTENANCE": "in a Slurm maintenance",
    "RESERVED": "in a Slurm reservation", "REBOOT_REQUESTED": "waiting for a reboot",
    "REBOOT_ISSUED": "rebooting", "POWERED_DOWN": "powered down", "POWER_DOWN": "powering down",
    "POWERING_DOWN": "powering down", "POWERING_UP": "powering up",
    "INVALID_REG": "registered with a configuration Slurm rejected",
}


# What ends a rota job already running on a node: the node going down or into error. As in
# Slurm, a node drained or marked failing takes no new work and lets running jobs end (an
# operator who wants them gone evicts them: ``rota node drain --evict``, or Slurm's own
# ``scontrol update state=down``). A node that stops responding is Slurm's to judge (it fails
# the job with NODE_FAIL once the node is declared down), and so is one in an unknown state
# (every node is, for a moment, after slurmctld restarts); a reservation or a reboot request
# waits for the node to be free.
LOSING_STATES = frozenset({"down", "error"})


def losing_reason(state: str, reason: str) -> str | None:
    """Why rota's jobs running on a node in this base ``state`` must leave it (``None``: they
    may stay, whatever its flags): Slurm's words for the node, as ``unschedulable_reason``."""
    if state not in LOSING_STATES:
        return None
    return unschedulable_reason(state, frozenset(), reason)


def unschedulable_reason(state: str, flags: frozenset[str], reason: str) -> str | None:
    """Why a node with this base ``state`` and ``flags`` takes no new work, ``None`` if it
    does: Slurm's ``reason`` when it gave one, else what the state says."""
    said = [UNSCHEDULABLE_FLAGS[f] for f in sorted(flags) if f in UNSCHEDULABLE_FLAGS]
    if state in UNSCHEDULABLE_STATES:
        said.insert(0, UNSCHEDULABLE_STATES[state])
    if not said:
        return None
    return f"{', '.join(said)}: {reason}" if reason else ", ".join(said)


# -- exit codes ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ExitCode:
    """How a Slurm job or step ended: its ``code`` (0-255) or the ``signal`` that killed it."""

    code: int
    signal: int = 0

    @classmethod
    def parse(cls, text: str, where: str = "ExitCode") -> ExitCode:
        """Slurm's ``code:signal`` (``3:0``, ``0:15``)."""
        match = re.fullmatch(r"(\d+):(\d+)", text.strip())
        if not match:
            raise SlurmOutputError(where, f"expected code:signal such as 3:0, got {text!r}")
        return cls(int(match.group(1)), int(match.group(2)))

    @classmethod
    def from_wait_status(cls, status: int) -> ExitCode:
        """A raw wait status, as ``squeue --json`` prints ``exit_code``."""
        if status & 0x7F:
            return cls(0, status & 0x7F)
        return cls((status >> 8) & 0xFF, 0)

    @property
    def exit_code(self) -> int:
        """rota's single number: the code, or ``128 + signal`` for a killed process."""
        return 128 + self.signal if self.signal else self.code

    def __str__(self) -> str:
        return f"{self.code}:{self.signal}"


# -- rota's names for its Slurm jobs ------------------------------------------------------------

NAME_PREFIX = "rota-"
COMMENT_PREFIX = "rota:"
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_ATTEMPT_NAME = re.compile(r"^rota-(?P<job>[A-Za-z0-9][A-Za-z0-9._-]*)-(?P<attempt>\d+)$")


def attempt_name(job_id: str, attempt: int) -> str:
    """The Slurm job name of attempt ``attempt`` of rota job ``job_id``: ``rota-<job>-<n>``."""
    if not _SAFE_ID.match(job_id):
        raise InvalidSpec("id", f"a job id for Slurm must be letters, digits, '.', '_' or '-', "
                                f"got {job_id!r}")
    if attempt < 0:
        raise InvalidSpec("attempt", f"must not be negative, got {attempt}")
    return f"{NAME_PREFIX}{job_id}-{attempt}"


def job_comment(job_id: str, instance: str = "") -> str:
    """``rota:<job>``, or ``rota:<job>@<instance>`` for the control plane ``instance``."""
    return f"{COMMENT_PREFIX}{job_id}" + (f"@{instance}" if instance else "")


def owner(name: str, comment: str, instance: str = "") -> tuple[str, int] | None:
    """``(rota job id, attempt)`` when a Slurm job with this name and comment is one of the
    attempts of control plane ``instance``, else ``None``. The comment must be that control
    plane's or empty (``sacct`` shows none where the site does not set
    ``AccountingStoreFlags=job_comment``): another rota's jobs on the same cluster, whose
    numbers may be the same, are not this one's."""
    match = _ATTEMPT_NAME.match(name)
    if not match:
        return None
    job = match.group("job")
    if comment and comment != job_comment(job, instance):
        return None
    return job, int(match.group("attempt"))
