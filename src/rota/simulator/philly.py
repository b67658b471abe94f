"""Reader of the Microsoft Philly job list (``philly.csv`` of the Pollux artifact, Sep-Oct 2017).

Columns: ``timestamp`` (submission, ``YYYY-MM-DD HH:MM:SS``, no time zone), ``duration`` (run
time, seconds), ``num_gpus`` (gang size), ``gpu_time`` (``duration x num_gpus``) and ``cluster``
(the virtual cluster, VC: the tenant). The file has no job id: a job is named by its line
(``j<line>``, the header is line 1).

Invariants of what ``load`` returns: jobs sorted by (submission, line); ``duration > 0``;
``num_gpus >= 1``; ``gpu_time`` agrees with ``duration x num_gpus`` (relative error 1e-6);
``submit`` is seconds since the epoch of the naive timestamp (only differences matter). A bad
row raises ``TraceError`` naming the file, the line and the column.

Quotas (``parse_quotas``): a mapping VC -> ``{gpus, cohort, borrowing_limit, lending_limit}``
(GPU counts; ``gpus`` is the nominal quota), with an optional ``"*"`` entry for every VC not
listed. Each VC becomes a queue of its own name; so does each listed VC without jobs (its
quota still lends to its cohort).

Gangs (``gang``): up to 8 GPUs run as one replica on one node; more run as replicas of 8 GPUs,
or of the largest of 4, 2, 1 that divides the count (12 -> 3 x 4, 16 -> 2 x 8, 24 -> 3 x 8).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from typing import Any, Mapping

from rota.core import ANY_FLAVOR, GPU, MILLI, FlavorQuota, InvalidSpec, Queue
from rota.simulator.alibaba import TraceError, read_rows

COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
NODE_GPUS = 8
DAY = 86400.0


@dataclass(frozen=True, slots=True)
class PhillyJob:
    id: str
    submit: float  # seconds since the epoch of the (naive) submission timestamp
    duration: float
    num_gpus: int
    vc: str

    @property
    def gpu_seconds(self) -> float:
        return self.duration * self.num_gpus


def parse_time(text: str) -> float:
    """``YYYY-MM-DD[ HH:MM[:SS]]`` (naive, read as UTC) -> seconds since the epoch."""
    for fmt in (TIME_FORMAT, "%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            return datetime.strptime(text.strip(), fmt).replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            continue
    raise ValueError(f"expected a time such as 2017-10-02 or 2017-10-02 08:00:00, got {text!r}")


def format_time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime(TIME_FORMAT)


def _number(path: Path, line: int, row: dict[str, str], column: str) -> float:
    text = (row.get(column) or "").strip()
    try:
        value = float(text)
    except ValueError:
        raise TraceError(path, line, column, f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise TraceError(path, line, column, f"must be a finite number, got {text!r}")
    return value


def _row(path: Path, line: int, row: dict[str, str]) -> PhillyJob:
    try:
        submit = parse_time(row.get("timestamp") or "")
    except ValueError as exc:
        raise TraceError(path, line, "timestamp", str(exc)) from None
    duration = _number(path, line, row, "duration")
    if duration <= 0:
        raise TraceError(path, line, "duration", f"must be positive, got {duration:g}")
    gpus = _number(path, line, row, "num_gpus")
    if gpus != int(gpus) or gpus < 1:
        raise TraceError(path, line, "num_gpus", f"must be a whole number >= 1, got {gpus:g}")
    gpu_time = _number(path, line, row, "gpu_time")
    if abs(gpu_time - duration * gpus) > 1e-6 * max(1.0, gpu_time):
        raise TraceError(path, line, "gpu_time", f"{gpu_time:g} is not duration x num_gpus = "
                         f"{duration * gpus:g}")
    vc = (row.get("cluster") or "").strip()
    if not vc:
        raise TraceError(path, line, "cluster", "must not be empty")
    return PhillyJob(f"j{line}", submit, duration, int(gpus), vc)


def load(path: Path | str) -> list[PhillyJob]:
    """Every job of the file, sorted by submission time (then line)."""
    path = Path(path)
    jobs = [_row(path, line, row) for line, row in read_rows(path, COLUMNS)]
    if not jobs:
        raise TraceError(path, 1, "", "no jobs")
    jobs.sort(key=lambda j: (j.submit, int(j.id[1:])))
    return jobs


def gang(num_gpus: int) -> tuple[int, int]:
    """``num_gpus`` -> (replicas, GPUs per replica) on nodes of ``NODE_GPUS`` GPUs."""
    if num_gpus < 1:
        raise InvalidSpec("num_gpus", f"must be at least 1, got {num_gpus}")
    if num_gpus <= NODE_GPUS:
        return 1, num_gpus
    for per in (8, 4, 2, 1):
        if num_gpus % per == 0:
            return num_gpus // per, per
    raise AssertionError("unreachable: 1 divides every count")


_WINDOW = re.compile(r"^\s*(.+?)\s*\.\.\s*(.+?)\s*$")


def parse_window(text: str) -> tuple[float, float]:
    """``START..END`` (times as ``parse_time`` reads them) -> (start, end) seconds; END is
    exclusive. Raises InvalidSpec naming ``--window``."""
    match = _WINDOW.match(text)
    if match is None:
        raise InvalidSpec("--window", f"expected START..END such as 2017-10-02..2017-10-09, got {text!r}")
    try:
        start, end = parse_time(match.group(1)), parse_time(match.group(2))
    except ValueError as exc:
        raise InvalidSpec("--window", str(exc)) from None
    if end <= start:
        raise InvalidSpec("--window", f"END must be after START, got {text!r}")
    return start, end


def within(jobs: list[PhillyJob], start: float, end: float) -> list[PhillyJob]:
    """The jobs submitted in ``[start, end)``, in order."""
    return [j for j in jobs if start <= j.submit < end]


def busiest(jobs: list[PhillyJob], days: int) -> tuple[float, float, float]:
    """The ``days``-long window starting at a midnight with the most submitted GPU-hours:
    (start, end, GPU-hours). Ties go to the earliest."""
    if days < 1:
        raise InvalidSpec("days", f"must be at least 1, got {days}")
    by_day: dict[int, float] = {}
    for j in jobs:
        d = int(j.submit // DAY)
        by_day[d] = by_day.get(d, 0.0) + j.gpu_seconds / 3600
    if not by_day:
        raise InvalidSpec("jobs", "no jobs")
    first, last = min(by_day), max(by_day)
    best = None
    for d in range(first, max(first, last - days + 1) + 1):
        total = sum(by_day.get(d + k, 0.0) for k in range(days))
        if best is None or total > best[2]:
            best = (d * DAY, (d + days) * DAY, total)
    assert best is not None
    return best


QUOTA_KEYS = ("gpus", "cohort", "borrowing_limit", "lending_limit")


def parse_quotas(data: Any, vcs: list[str]) -> dict[str, Queue]:
    """One queue per VC of ``vcs`` (the VCs with jobs) and per VC the mapping lists, from a
    quotas mapping (see the module docstring). A listed VC without jobs keeps its queue: its
    nominal quota is still its cohort's to borrow, whatever month is replayed."""
    if not isinstance(data, Mapping):
        raise InvalidSpec("", f"expected a mapping of VC -> quota, got {type(data).__name__}")
    entries = {str(k): v for k, v in data.items()}
    missing = [vc for vc in vcs if vc not in entries and "*" not in entries]
    if missing:
        raise InvalidSpec(missing[0], "this VC has jobs but no quota; add it or a \"*\" entry")
    names = sorted(({k for k in entries if k != "*"} | set(vcs)))
    return {vc: _queue(vc, entries[vc] if vc in entries else entries["*"],
                       vc if vc in entries else "*") for vc in names}


def _queue(name: str, spec: Any, where: str) -> Queue:
    if not isinstance(spec, Mapping):
        raise InvalidSpec(where, f"expected a mapping with {', '.join(QUOTA_KEYS)}")
    unknown = sorted(set(map(str, spec)) - set(QUOTA_KEYS))
    if unknown:
        raise InvalidSpec(f"{where}.{unknown[0]}", f"unknown key; known: {', '.join(QUOTA_KEYS)}")
    if "gpus" not in spec:
        raise InvalidSpec(f"{where}.gpus", "the nominal GPU quota is required")
    limits = {}
    for key in ("gpus", "borrowing_limit", "lending_limit"):
        if key not in spec:
            continue
        value = spec[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidSpec(f"{where}.{key}", f"must be a whole number of GPUs >= 0, got {value!r}")
        limits[key] = {GPU: value * MILLI}
    cohort = spec.get("cohort")
    if cohort is not None and (not isinstance(cohort, str) or not cohort):
        raise InvalidSpec(f"{where}.cohort", f"must be a name, got {cohort!r}")
    try:
        quota = FlavorQuota(limits["gpus"], limits.get("borrowing_limit", {}),
                            limits.get("lending_limit", {}))
    except InvalidSpec as exc:
        raise InvalidSpec(f"{where}.{exc.field.split('.')[0]}", exc.reason) from None
    return Queue(name, {ANY_FLAVOR: quota}, cohort)
