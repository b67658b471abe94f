"""Typed records of what Slurm 22.05 reports, parsed from its commands' output.

Sources (the argv that produces each text is beside its parser, so the two stay together):

- ``sinfo --json`` -> ``SlurmNode``: one per node, whatever filters are given (22.05's
  ``--json`` ignores them), with its partitions, CPUs, memory, GRES and GRES in use, base
  state, state flags and Slurm's reason.
- ``squeue --json`` -> ``SlurmJob``: every job slurmctld still knows (also ignoring filters):
  pending, running, and those that ended less than ``MinJobAge`` (300 s by default) ago, with
  the nodes, CPUs, memory and GRES (device indices included) allocated on each node. Its
  ``exit_code`` is a raw wait status.
- ``sacct --json`` -> ``SlurmJob`` with ``steps`` (one per ``srun``, named after its rank),
  for jobs slurmctld has forgotten. Its exit codes are wrong in 22.05 (an ``exit 3`` reads
  ``SUCCESS``, ``return_code`` 0), so they come from the parseable
  ``sacct --parsable2 --format=JobIDRaw,ExitCode`` instead (``parse_sacct_exit_codes``,
  merged by ``with_exit_codes``): the one place where ``--json`` lacks something.
- ``squeue --name=... --format=...`` (``squeue_named``) -> ``SlurmJob`` in brief (state,
  reason, nodes, times; no exit code, no allocation) for the jobs of the names given: cheap
  where ``--json`` lists the whole cluster.
- ``sinfo --format=%P|%a|%l|%p|%N`` -> ``SlurmPartition`` (22.05 has no partition JSON outside
  slurmrestd; ``scontrol`` has no ``--json`` before 23.02).

Times are seconds since the epoch, ``None`` where Slurm has none (a job not started or not
ended); memory is in MiB (Slurm's ``M``); a time limit in seconds, ``None`` for unlimited.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Mapping

from rota.backends.slurm.states import ExitCode, JobPhase, job_phase
from rota.backends.slurm.text import (
    Gres, SlurmOutputError, expand_hostlist, parse_gres, parse_tres,
)

SINFO_NODES = ("sinfo", "--json")
SQUEUE_JOBS = ("squeue", "--all", "--json")
SINFO_PARTITIONS = ("sinfo", "--noheader", "--format=%P|%a|%l|%p|%N")
NOTHING_FOUND = 9003  # sacct --json's error number when no job matched the query


def squeue_named(names: tuple[str, ...]) -> tuple[str, ...]:
    """``squeue`` for the jobs named ``names`` in any state it still lists, one line each, for
    ``parse_squeue_named``; run it with ``SLURM_TIME_FORMAT=%s``. Text, not ``--json``: the
    JSON lists every job of the cluster whatever the filters, this only the jobs named."""
    return ("squeue", "--noheader", "--states=all", "--name=" + ",".join(names),
            "--format=%i|%T|%r|%S|%e|%N|%j|%k")


def sacct_jobs(since: str, job_ids: tuple[int, ...] = (),
               names: tuple[str, ...] = ()) -> tuple[str, ...]:
    """``sacct --json`` for the jobs that started since ``since`` (Slurm's time syntax:
    ``now-7days``, ``2024-01-31T00:00``), restricted to ``job_ids`` and ``names`` if given."""
    return ("sacct", "--json", f"--starttime={since}", *_sacct_filters(job_ids, names))


def sacct_exit_codes(since: str, job_ids: tuple[int, ...] = (),
                     names: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The parseable ``sacct`` whose exit codes ``with_exit_codes`` puts into ``sacct_jobs``'
    records (same selection)."""
    return ("sacct", "--noheader", "--parsable2", "--format=JobIDRaw,ExitCode",
            f"--starttime={since}", *_sacct_filters(job_ids, names))


def _sacct_filters(job_ids: tuple[int, ...], names: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    if job_ids:
        out.append("--jobs=" + ",".join(str(j) for j in job_ids))
    if names:
        out.append("--name=" + ",".join(names))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class SlurmNode:
    name: str
    address: str
    partitions: tuple[str, ...]
    cpus: int
    memory_mib: int
    threads_per_core: int
    gres: tuple[Gres, ...]          # what the node has: gpu:h100:4, shard:h100:16
    gres_used: tuple[Gres, ...]     # in use now, with device indices
    state: str                      # base state, lower case: idle, mixed, allocated, down, ...
    flags: frozenset[str]           # DRAIN, FAIL, NOT_RESPONDING, RESERVED, ...
    reason: str                     # Slurm's reason, "" when none
    features: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeAllocation:
    """What one job holds on one node: ``cores`` (whole cores), memory and GRES."""

    node: str
    cores: int
    memory_mib: int
    gres: tuple[Gres, ...]


@dataclass(frozen=True, slots=True)
class SlurmStep:
    """One step of a job as ``sacct`` knows it: ``id`` is ``batch``, ``extern`` or a number."""

    id: str
    name: str
    state: str
    nodes: tuple[str, ...]
    start_time: float | None
    end_time: float | None
    exit: ExitCode | None = None


@dataclass(frozen=True, slots=True)
class SlurmJob:
    id: int
    name: str
    comment: str
    state: str                                  # PENDING, RUNNING, COMPLETED, ...
    reason: str                                 # why pending, as Slurm says ("Resources")
    partition: str
    nodes: tuple[str, ...]
    exit: ExitCode | None                       # None while not ended, or not known
    start_time: float | None
    end_time: float | None
    time_limit_s: int | None
    gres: tuple[Gres, ...] = ()                 # allocated, the whole job
    allocations: tuple[NodeAllocation, ...] = ()  # per node (squeue only)
    steps: tuple[SlurmStep, ...] = ()           # sacct only
    user: str = ""

    @property
    def phase(self) -> JobPhase:
        return job_phase(self.state, f"job {self.id}")


@dataclass(frozen=True, slots=True)
class SlurmPartition:
    name: str
    default: bool
    up: bool
    max_time_s: int | None
    priority_tier: int
    nodes: tuple[str, ...]


# -- JSON access --------------------------------------------------------------------------------

def _document(text: str, key: str, source: str) -> list[Mapping[str, Any]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SlurmOutputError(source, f"is not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        raise SlurmOutputError(source, f"has no {key!r} list")
    errors = [e for e in data.get("errors") or () if not _nothing_found(e)]
    if errors:
        raise SlurmOutputError(source, f"reports errors: {errors}")
    return data[key]


def _nothing_found(error: object) -> bool:
    """sacct's way of saying that no job matched: an error (9003) beside an empty list."""
    return isinstance(error, Mapping) and error.get("error_number") == NOTHING_FOUND


def _get(d: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(d, Mapping):
        raise SlurmOutputError(where, f"expected an object, got {d!r}")
    if key not in d:
        raise SlurmOutputError(f"{where}.{key}", "is missing")
    value = d[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise SlurmOutputError(f"{where}.{key}", f"unexpected value {value!r}")
    return value


def _time(value: object) -> float | None:
    """Slurm's epoch seconds; 0 and null mean none."""
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def _minutes(value: object) -> int | None:
    return int(value) * 60 if isinstance(value, int) and value >= 0 else None


# -- sinfo --json -------------------------------------------------------------------------------

def parse_sinfo(text: str) -> tuple[SlurmNode, ...]:
    return tuple(_node(n, f"sinfo.nodes[{k}]")
                 for k, n in enumerate(_document(text, "nodes", "sinfo --json")))


def _node(d: Mapping[str, Any], where: str) -> SlurmNode:
    name = _get(d, "name", str, where)
    where = f"sinfo node {name}"
    features = _get(d, "features", str, where)
    return SlurmNode(
        name=name, address=_get(d, "address", str, where),
        partitions=tuple(_get(d, "partitions", list, where)),
        cpus=_get(d, "cpus", int, where), memory_mib=_get(d, "real_memory", int, where),
        threads_per_core=max(1, _get(d, "threads", int, where)),
        gres=parse_gres(_get(d, "gres", str, where), f"{where} gres"),
        gres_used=parse_gres(_get(d, "gres_used", str, where), f"{where} gres_used"),
        state=_get(d, "state", str, where).lower(),
        flags=frozenset(_get(d, "state_flags", list, where)),
        reason=_get(d, "reason", str, where),
        features=tuple(f for f in features.split(",") if f),
    )


# -- squeue --json ------------------------------------------------------------------------------

def parse_squeue(text: str) -> tuple[SlurmJob, ...]:
    return tuple(_queued_job(j, f"squeue.jobs[{k}]")
                 for k, j in enumerate(_document(text, "jobs", "squeue --json")))


def _queued_job(d: Mapping[str, Any], where: str) -> SlurmJob:
    job_id = _get(d, "job_id", int, where)
    where = f"squeue job {job_id}"
    state = _get(d, "job_state", str, where)
    phase = job_phase(state, f"{where}.job_state")
    details = d.get("gres_detail") or []
    resources = d.get("job_resources") or {}
    allocated = (resources.get("allocated_nodes") or []) if phase.started else []
    return SlurmJob(
        id=job_id, name=_get(d, "name", str, where), comment=_get(d, "comment", str, where),
        state=state, reason=_get(d, "state_reason", str, where),
        partition=_get(d, "partition", str, where),
        nodes=expand_hostlist(_get(d, "nodes", str, where), f"{where}.nodes"),
        exit=ExitCode.from_wait_status(_get(d, "exit_code", int, where)) if phase.ended else None,
        start_time=_time(d.get("start_time")) if phase.started else None,
        end_time=_time(d.get("end_time")) if phase.ended else None,
        time_limit_s=_minutes(d.get("time_limit")),
        gres=_tres_gres(d.get("tres_alloc_str")),
        allocations=tuple(_allocation(n, details[k] if k < len(details) else "",
                                      f"{where}.job_resources.allocated_nodes[{k}]")
                          for k, n in enumerate(allocated)),
        user=str(d.get("user_name") or ""),
    )


def _allocation(d: Mapping[str, Any], gres: str, where: str) -> NodeAllocation:
    sockets = _get(d, "sockets", dict, where)
    cores = sum(1 for socket in sockets.values() for state in (socket.get("cores") or {}).values()
                if state == "allocated")
    return NodeAllocation(node=_get(d, "nodename", str, where), cores=cores,
                          memory_mib=int(d.get("memory_allocated") or 0),
                          gres=parse_gres(gres, f"{where} gres_detail"))


def _tres_gres(text: object) -> tuple[Gres, ...]:
    """The ``gres/NAME=N`` items of a TRES string (typed ``gres/gpu:h100`` items left out:
    Slurm lists the untyped total beside them)."""
    tres = parse_tres(text if isinstance(text, str) else None)
    return tuple(Gres(k[len("gres/"):], None, v) for k, v in tres.items()
                 if k.startswith("gres/") and ":" not in k)


# -- squeue, named jobs in brief ----------------------------------------------------------------

def parse_squeue_named(text: str) -> tuple[SlurmJob, ...]:
    """``squeue_named`` output: ``id|state|reason|start|end|nodes|name|comment`` (the comment
    last, since it may hold ``|``). No exit code, GRES nor per-node allocation: a job from
    here has ``exit`` None and no ``allocations``."""
    out = []
    for k, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        where = f"squeue line {k + 1}"
        fields = line.split("|", 7)
        if len(fields) != 8 or not fields[0].isdigit():
            raise SlurmOutputError(where, f"expected id|state|reason|start|end|nodes|name|"
                                          f"comment, got {line!r}")
        ident, state, reason, start, end, nodes, name, comment = fields
        phase = job_phase(state, f"{where} state")
        out.append(SlurmJob(
            id=int(ident), name=name, comment="" if comment == "(null)" else comment,
            state=state, reason=reason, partition="",
            nodes=expand_hostlist(nodes, f"{where} nodes"), exit=None,
            start_time=_epoch_text(start) if phase.started else None,
            end_time=_epoch_text(end) if phase.ended else None, time_limit_s=None))
    return tuple(out)


def _epoch_text(value: str) -> float | None:
    return float(value) if value.isdigit() and int(value) > 0 else None


# -- sacct --json -------------------------------------------------------------------------------

def parse_sacct(text: str) -> tuple[SlurmJob, ...]:
    """Jobs from ``sacct --json``; their ``exit`` is ``None`` until ``with_exit_codes``."""
    return tuple(_accounted_job(j, f"sacct.jobs[{k}]")
                 for k, j in enumerate(_document(text, "jobs", "sacct --json")))


def _accounted_job(d: Mapping[str, Any], where: str) -> SlurmJob:
    job_id = _get(d, "job_id", int, where)
    where = f"sacct job {job_id}"
    state = _get(_get(d, "state", dict, where), "current", str, f"{where}.state")
    times = _get(d, "time", dict, where)
    comment = (d.get("comment") or {}).get("job") or ""
    return SlurmJob(
        id=job_id, name=_get(d, "name", str, where), comment=comment, state=state,
        reason=str(d["state"].get("reason") or ""),
        partition=str(d.get("partition") or ""),
        nodes=expand_hostlist(_get(d, "nodes", str, where), f"{where}.nodes"),
        exit=None, start_time=_time(times.get("start")), end_time=_time(times.get("end")),
        time_limit_s=_minutes(times.get("limit")),
        gres=_accounted_gres((d.get("tres") or {}).get("allocated") or []),
        steps=tuple(_step(s, f"{where}.steps[{k}]") for k, s in enumerate(d.get("steps") or [])),
        user=str((d.get("association") or {}).get("user") or ""),
    )


def _accounted_gres(items: list[Mapping[str, Any]]) -> tuple[Gres, ...]:
    return tuple(Gres(str(t.get("name")), None, int(t.get("count") or 0)) for t in items
                 if t.get("type") == "gres" and t.get("name") and ":" not in str(t["name"]))


def _step(d: Mapping[str, Any], where: str) -> SlurmStep:
    ident = _get(d, "step", dict, where)
    times = d.get("time") or {}
    return SlurmStep(
        id=str(_get(ident, "id", (str, int), f"{where}.step")),
        name=_get(ident, "name", str, f"{where}.step"), state=_get(d, "state", str, where),
        nodes=tuple((d.get("nodes") or {}).get("list") or ()),
        start_time=_time(times.get("start")), end_time=_time(times.get("end")),
    )


def parse_sacct_exit_codes(text: str) -> dict[str, ExitCode]:
    """``JobIDRaw|ExitCode`` lines -> {"7": 4:0, "7.batch": 4:0, "7.0": 4:0}.

    A code that is empty or not ``code:signal`` is unknown, left out: ``sacct`` prints nothing
    for the steps of a job whose node failed (``NODE_FAIL``), and one job's record must not
    make the others unreadable."""
    out: dict[str, ExitCode] = {}
    for k, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        ident, sep, code = line.partition("|")
        if not sep or not ident:
            raise SlurmOutputError(f"sacct exit codes line {k + 1}",
                                   f"expected JobIDRaw|ExitCode, got {line!r}")
        try:
            out[ident] = ExitCode.parse(code, f"sacct exit code of {ident}")
        except SlurmOutputError:
            continue
    return out


def with_exit_codes(jobs: tuple[SlurmJob, ...],
                    codes: Mapping[str, ExitCode]) -> tuple[SlurmJob, ...]:
    """``jobs`` with the exit codes of ended jobs and steps filled in from ``codes``."""
    def steps(job: SlurmJob) -> tuple[SlurmStep, ...]:
        return tuple(replace(s, exit=codes.get(f"{job.id}.{s.id}")) if s.end_time else s
                     for s in job.steps)
    return tuple(replace(j, exit=codes.get(str(j.id)) if j.phase.ended else None, steps=steps(j))
                 for j in jobs)


# -- sinfo --format (partitions) ----------------------------------------------------------------

def parse_partitions(text: str) -> tuple[SlurmPartition, ...]:
    """``SINFO_PARTITIONS`` output: ``debug*|up|infinite|1|node[1-4]``."""
    out = []
    for k, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        where = f"sinfo partitions line {k + 1}"
        fields = line.split("|")
        if len(fields) != 5 or not fields[3].isdigit():
            raise SlurmOutputError(where, f"expected NAME|AVAIL|TIMELIMIT|TIER|NODES, got {line!r}")
        name, avail, limit, tier, nodes = fields
        out.append(SlurmPartition(
            name=name.rstrip("*"), default=name.endswith("*"), up=avail == "up",
            max_time_s=parse_duration(limit, where), priority_tier=int(tier),
            nodes=expand_hostlist(nodes, where)))
    return tuple(out)


def parse_duration(text: str, where: str) -> int | None:
    """Slurm's ``[days-]hours:minutes:seconds`` (or ``minutes:seconds``, ``minutes``) ->
    seconds; ``infinite``, ``UNLIMITED`` and ``n/a`` -> ``None``."""
    if text.lower() in ("infinite", "unlimited", "n/a", ""):
        return None
    days, _, clock = text.rpartition("-")
    parts = clock.split(":")
    if not (days == "" or days.isdigit()) or not all(p.isdigit() for p in parts) or len(parts) > 3:
        raise SlurmOutputError(where, f"cannot read time limit {text!r}")
    numbers = [int(p) for p in parts]
    if days:  # days-hours[:minutes[:seconds]]
        numbers += [0] * (3 - len(numbers))
        hours, minutes, seconds = numbers
        return ((int(days) * 24 + hours) * 60 + minutes) * 60 + seconds
    if len(numbers) == 1:
        return numbers[0] * 60
    if len(numbers) == 2:
        return numbers[0] * 60 + numbers[1]
    return (numbers[0] * 60 + numbers[1]) * 60 + numbers[2]
