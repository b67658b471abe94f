"""What ``rota ps`` shows, without rich or rota's domain model: its columns, the arrays folded
into one line, and the lines around the table. ``rota.cli.listing`` (the Typer command) and
``rota.cli.fast`` (the same command started in a few milliseconds) both read it.

- ``COLUMNS``: a column's header, whether it may wrap, its drop rank (``rota.cli.tables``) and
  its justification, by name; ``DEFAULT`` and ``WIDE`` are ``-o``'s sets.
- ``cells``: the table's cells, column by column, of jobs' brief views: ``GET /v1/jobs?view=
  brief`` gives them (a list of values per job, in the order of the page's ``columns``), and
  ``brief`` makes one of a full view, for the Typer command (``rota.cli.listing``). A column
  is read down all the rows at once, by position, and a value that many jobs share (an age
  in seconds, a GPU request) is worded once: no mapping per job, no call per cell where a
  column is copied as it is. The values are worded by ``rota.core.shortforms``, as
  ``rota.core.jobwords`` words them for ``rota show``: that module imports nothing, and
  importing it loads none of the domain model (``rota.core``'s other modules cost a short
  command more than its whole budget). ``tests/cli/test_cli_fast.py`` holds the two to the
  same answers.
- ``values_for``: the values of brief views a table reads, which ``rota ps`` asks the server
  for alone (``columns``).
- Paging: ``--limit`` jobs at most (the server sends 1,000 at a time; they are followed), and
  ``more_line`` says when more exist and how to see them (``--after ID``).
"""

from __future__ import annotations

from collections import Counter, namedtuple
from collections.abc import Callable

from rota.core.shortforms import (
    duration, gpus, memory, placement, reason_column, state_word,
)

ACTIVE = ("pending", "scheduled", "running", "preempting")
LIMIT = 1000  # rota ps's --limit by default


# a namedtuple, not typing.NamedTuple: importing typing alone costs about 10 ms
Spec = namedtuple("Spec", "header wrap drop justify", defaults=(False, 0, "left"))


COLUMNS: dict[str, Spec] = {
    "id": Spec("ID"),
    "name": Spec("NAME", drop=1),
    "project": Spec("PROJECT", drop=4),
    "queue": Spec("QUEUE", drop=6),
    "user": Spec("USER", drop=7),
    "state": Spec("STATE"),
    "priority": Spec("PRIORITY", drop=9, justify="right"),
    "gpus": Spec("GPUS", drop=3),
    "cpu": Spec("CPU", drop=8, justify="right"),
    "memory": Spec("MEMORY", drop=8),
    "where": Spec("WHERE", wrap=True, drop=2),
    "age": Spec("AGE", drop=5),
    "exit": Spec("EXIT", drop=9),
    "reason": Spec("REASON", wrap=True, drop=10),
    # accounting's, as sacct's Elapsed, Timelimit, Start and MaxRSS, and GPU-hours; only by name
    "elapsed": Spec("ELAPSED", drop=5),
    "timelimit": Spec("TIMELIMIT", drop=6),
    "start": Spec("START", drop=5),
    "maxrss": Spec("MAXRSS", drop=7, justify="right"),
    "gpu-hours": Spec("GPU-HOURS", drop=6, justify="right"),
}
DEFAULT = ("id", "name", "project", "state", "gpus", "where", "age")
WIDE = ("id", "name", "project", "queue", "user", "state", "priority", "gpus", "cpu",
        "memory", "where", "age", "exit", "reason")


class BadColumns(ValueError):
    """``-o`` named no column, or one that does not exist; the message says what to give."""


def chosen_columns(output: str | None) -> tuple[str, ...] | None:
    """``-o``: the columns to show, or None for JSON."""
    if output in (None, ""):
        return DEFAULT
    if output == "json":
        return None
    if output == "wide":
        return WIDE
    names = tuple(n.strip().lower() for n in output.split(",") if n.strip())
    unknown = [n for n in names if n not in COLUMNS]
    if unknown or not names:
        raise BadColumns(f"-o: unknown column {unknown[0] if unknown else output!r}; give wide, "
                         f"json or columns separated by commas: {', '.join(COLUMNS)}")
    return names


def states_of(state: list[str] | None, everything: bool) -> list[str] | None:
    """``--state`` (repeated or comma-separated), else the active states unless ``-A``."""
    return [s for v in state or [] for s in v.split(",") if s] or (None if everything
                                                                    else list(ACTIVE))


def empty_line(everything: bool) -> str:
    return ("No jobs" + ("" if everything else " active (rota ps -A shows finished ones)")
            + ". Submit one with rota submit JOB.yaml or rota run -- CMD.")


def more_line(shown: int, after: str) -> str:
    """What ``rota ps`` says on stderr when more jobs exist than it listed."""
    return (f"note: {shown} jobs shown, more exist: add --after {after} for the next ones, or "
            f"--limit N for more at once.")


def fold_arrays(rows: list[list], at: dict[str, int]) -> list[list]:
    """The brief views (``at``: the position of each value), each array's tasks folded into
    one line (``12[0-9]``, state ``3 running, 7 pending``) where its first task would be."""
    array_id, index, state = at["array_id"], at["array_index"], at["state"]
    tasks: dict[str, list[list]] = {}
    for r in rows:
        if r[array_id] is not None:
            tasks.setdefault(r[array_id], []).append(r)
    if not tasks:
        return rows
    out, done = [], set()
    for r in rows:
        array = r[array_id]
        if array is None:
            out.append(r)
        elif array not in done:
            done.add(array)
            mine = tasks[array]
            indices = sorted(t[index] for t in mine)
            counts = Counter(t[state] for t in mine)
            limit = f"%{r[at['array_limit']]}" if r[at["array_limit"]] else ""
            folded = list(r)
            folded[at["id"]] = f"{array}[{indices[0]}-{indices[-1]}{limit}]"
            folded[state] = ", ".join(f"{n} {s}" for s, n in counts.most_common())
            folded[at["placement"]] = None
            out.append(folded)
    return out


# the values of a brief view, in the server's order (``rota.store.briefs.BRIEF_COLUMNS``)
BRIEF = ("id", "name", "project", "user", "queue", "state", "priority", "replicas", "cpu_milli",
         "memory_mib", "gpu_count", "gpu_share", "gpu_memory_mib", "placement", "submit_time",
         "exit_code", "reason", "wait_codes", "array_id", "array_index", "array_limit",
         "started_at", "finished_at", "walltime_s", "estimated_start", "gpu_seconds",
         "max_rss_kib")


def brief(job: dict) -> list:
    """The brief view (``GET /v1/jobs?view=brief``, in the order of ``BRIEF``) of a full one:
    the request's numbers at the top, the wait reasons' codes alone."""
    request = job["request"]
    gpu = request["gpu"]
    out = {k: job.get(k) for k in ("id", "name", "project", "user", "queue", "state",
                                   "priority", "replicas", "placement", "submit_time",
                                   "exit_code", "reason", "array_id", "array_index",
                                   "array_limit", "started_at", "finished_at", "walltime_s",
                                   "estimated_start", "gpu_seconds", "max_rss_kib")}
    out.update(cpu_milli=request.get("cpu_milli"), memory_mib=request.get("memory_mib"),
               gpu_count=gpu["count"], gpu_share=gpu["share"],
               gpu_memory_mib=gpu.get("memory_mib"),
               wait_codes=[r.get("code", "") for r in job.get("wait_reasons") or ()])
    return [out[k] for k in BRIEF]


# the values of a brief view each column reads; every table also folds arrays with the first
FOLDED = ("id", "state", "placement", "array_id", "array_index", "array_limit")
READS = {"id": (), "name": ("name",), "project": ("project",), "queue": ("queue",),
         "user": ("user",), "state": ("reason",), "priority": ("priority",),
         "gpus": ("replicas", "gpu_count", "gpu_share", "gpu_memory_mib"), "cpu": ("cpu_milli",),
         "memory": ("memory_mib",), "where": (), "age": ("submit_time",),
         "exit": ("exit_code",), "reason": ("reason", "wait_codes"),
         "elapsed": ("started_at", "finished_at"), "timelimit": ("walltime_s",),
         "start": ("started_at", "estimated_start"), "maxrss": ("max_rss_kib",),
         "gpu-hours": ("gpu_seconds",)}


def values_for(names: tuple[str, ...]) -> list[str]:
    """The values of brief views the table of columns ``names`` reads (``GET /v1/jobs?view=
    brief&columns=...``: a server sends those alone, in its own order)."""
    wanted = set(FOLDED).union(*(READS[n] for n in names))
    return [v for v in BRIEF if v in wanted]


def cells(names: tuple[str, ...], columns: list[str] | tuple[str, ...], rows: list[list],
          now: float) -> list[list[str]]:
    """The cells of the columns ``names``, one list per column, of the brief views ``rows``
    (their values in the order of ``columns``) with arrays folded; ``age`` counted to
    ``now``."""
    at = {name: k for k, name in enumerate(columns)}
    rows = fold_arrays(rows, at)
    return [_READERS[name](rows, at, now) for name in names]


def _as_is(name: str) -> Callable[[list[list], dict[str, int], float], list[str]]:
    def read(rows: list[list], at: dict[str, int], now: float) -> list[str]:
        k = at[name]
        return [r[k] for r in rows]
    return read


def _worded(name: str, word: Callable[[object], str]
            ) -> Callable[[list[list], dict[str, int], float], list[str]]:
    """A column of one value, each value worded once."""
    def read(rows: list[list], at: dict[str, int], now: float) -> list[str]:
        k, memo = at[name], {}
        return [memo[v] if v in memo else memo.setdefault(v, word(v)) for v in
                (r[k] for r in rows)]
    return read


def _named(rows: list[list], at: dict[str, int], now: float) -> list[str]:
    k = at["name"]
    return [r[k] or "-" for r in rows]


def _gpus(rows: list[list], at: dict[str, int], now: float) -> list[str]:
    c, s, m, n = at["gpu_count"], at["gpu_share"], at["gpu_memory_mib"], at["replicas"]
    memo: dict[tuple, str] = {}
    out = []
    for r in rows:
        key = (r[c], r[s], r[m], r[n])
        found = memo.get(key)
        if found is None:
            found = memo[key] = gpus(*key)
        out.append(found)
    return out


def _age(rows: list[list], at: dict[str, int], now: float) -> list[str]:
    """Each age in whole seconds worded once: jobs submitted together share it."""
    k, memo = at["submit_time"], {}
    out = []
    for r in rows:
        since = r[k]
        if since is None:
            out.append("-")
            continue
        seconds = round(now - since)
        found = memo.get(seconds)
        if found is None:
            found = memo[seconds] = duration(seconds)
        out.append(found)
    return out


def _where(rows: list[list], at: dict[str, int], now: float) -> list[str]:
    k = at["placement"]
    return [placement(r[k]) if r[k] else "-" for r in rows]


def _states(rows: list[list], at: dict[str, int], now: float) -> list[str]:
    k, w = at["state"], at["reason"]
    return [state_word(r[k], r[w]) for r in rows]


def _reasons(rows: list[list], at: dict[str, int], now: float) -> list[str]:
    k, w = at["reason"], at["wait_codes"]
    return [r[k] or reason_column(None, r[w]) for r in rows]


def _value(row: list, at: dict[str, int], name: str) -> object:
    """A value of a brief view, None where the server sent none (an older server)."""
    k = at.get(name)
    return None if k is None else row[k]


FINISHED = ("succeeded", "failed", "cancelled")


def _elapsed(rows: list[list], at: dict[str, int], now: float) -> list[str]:
    """Since its current attempt started, to its end or now; ``-`` before it started."""
    out = []
    for r in rows:
        began, ended = _value(r, at, "started_at"), _value(r, at, "finished_at")
        if began is None:
            out.append("-")
            continue
        until = ended if ended is not None and r[at["state"]] in FINISHED else now
        spent = duration(until - began)
        out.append("0s" if spent == "now" else spent)
    return out


def _timelimit(rows: list[list], at: dict[str, int], now: float) -> list[str]:
    return ["none" if (w := _value(r, at, "walltime_s")) is None else duration(w)
            for r in rows]


def _start(rows: list[list], at: dict[str, int], now: float) -> list[str]:
    """A pending job's estimated start (``in 1h5m``, ``unknown``), else when it started."""
    out = []
    for r in rows:
        if r[at["state"]] == "pending":
            t = _value(r, at, "estimated_start")
            out.append("unknown" if t is None else "now" if t - now < 1
                       else f"in {duration(t - now)}")
            continue
        t = _value(r, at, "started_at")
        out.append("-" if t is None else "now" if now - t < 1 else f"{duration(now - t)} ago")
    return out


def _gpu_hours(rows: list[list], at: dict[str, int], now: float) -> list[str]:
    return ["-" if (s := _value(r, at, "gpu_seconds")) is None else f"{s / 3600:.2f}"
            for r in rows]


def _maxrss(rows: list[list], at: dict[str, int], now: float) -> list[str]:
    """The peak memory of its latest attempt that ended with one known; ``n/a`` before, or
    where its engine does not tell."""
    out = []
    for r in rows:
        kib = _value(r, at, "max_rss_kib")
        mib = None if kib is None else kib / 1024
        out.append("n/a" if mib is None else memory(round(mib) if mib < 1024 else mib))
    return out


_READERS: dict[str, Callable[[list[list], dict[str, int], float], list[str]]] = {
    "id": _as_is("id"),
    "name": _named,
    "project": _as_is("project"),
    "queue": _as_is("queue"),
    "user": _as_is("user"),
    "state": _states,
    "priority": _worded("priority", str),
    "gpus": _gpus,
    "cpu": _worded("cpu_milli", lambda v: f"{v / 1000:g}"),
    "memory": _worded("memory_mib", memory),
    "where": _where,
    "age": _age,
    "exit": _worded("exit_code", lambda v: "-" if v is None else str(v)),
    "reason": _reasons,
    "elapsed": _elapsed,
    "timelimit": _timelimit,
    "start": _start,
    "maxrss": _maxrss,
    "gpu-hours": _gpu_hours,
}
