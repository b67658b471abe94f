"""What ``rota ps`` shows, without rich or rota's domain model: its columns, the arrays folded
into one line, and the lines around the table. ``rota.cli.listing`` (the Typer command) and
``rota.cli.fast`` (the same command started in a few milliseconds) both read it.

- ``COLUMNS``: a column's header, whether it may wrap, its drop rank (``rota.cli.tables``) and
  its justification, by name; ``DEFAULT`` and ``WIDE`` are ``-o``'s sets.
- ``values``: how each column reads a job's brief view: ``GET /v1/jobs?view=brief`` gives it
  (a list of values per job, which ``rota.client.bare`` names by the page's ``columns``), and
  ``brief`` makes it of a full view, for the Typer command (``rota.cli.listing``). They say
  what ``rota.core.jobwords`` says (``gpus``, ``placement``, ``reason_column``, ``age``);
  they are written again here because importing ``rota.core`` costs a short command more
  than its whole budget. ``tests/cli/test_cli_fast.py`` holds the two to the same answers.
- Paging: ``--limit`` jobs at most (the server sends 1,000 at a time; they are followed), and
  ``more_line`` says when more exist and how to see them (``--after ID``).
"""

from __future__ import annotations

from collections import Counter, namedtuple
from collections.abc import Callable

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


def fold_arrays(jobs: list[dict]) -> list[dict]:
    """The jobs, each array's tasks folded into one line (``12[0-9]``, state ``3 running, 7
    pending``) where its first task would be."""
    tasks: dict[str, list[dict]] = {}
    for j in jobs:
        if j.get("array_id") is not None:
            tasks.setdefault(j["array_id"], []).append(j)
    out, done = [], set()
    for j in jobs:
        array = j.get("array_id")
        if array is None:
            out.append(j)
        elif array not in done:
            done.add(array)
            mine = tasks[array]
            indices = sorted(t["array_index"] for t in mine)
            counts = Counter(t["state"] for t in mine)
            limit = f"%{j['array_limit']}" if j.get("array_limit") else ""
            out.append({**j, "id": f"{array}[{indices[0]}-{indices[-1]}{limit}]",
                        "state": ", ".join(f"{n} {s}" for s, n in counts.most_common()),
                        "placement": None})
    return out


# -- the columns' values, as rota.core.jobwords and rota.core.wording say them ------------------

def duration(seconds: float) -> str:
    """``5400`` -> ``1h30m``; ``45`` -> ``45s``; ``0`` -> ``now``."""
    s = int(round(seconds))
    if s <= 0:
        return "now"
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    parts = [f"{v}{u}" for v, u in ((d, "d"), (h, "h"), (m, "m"), (s, "s")) if v]
    return "".join(parts[:2])


def memory(mib: float | int | None) -> str:
    """``2048`` -> ``2 GiB``; ``81559`` -> ``79.6 GiB``; ``512`` -> ``512 MiB``."""
    if mib is None:
        return "?"
    if mib < 1024:
        return f"{mib:g} MiB"
    gib = mib / 1024
    return f"{gib:g} GiB" if gib == int(gib) else f"{gib:.1f} GiB"


def brief(job: dict) -> dict:
    """The brief view (``GET /v1/jobs?view=brief``, ``rota.store.briefs.BRIEF_COLUMNS``) of a
    full one: the request's numbers at the top, the wait reasons' codes alone."""
    out = {k: job.get(k) for k in ("id", "name", "project", "user", "queue", "state",
                                   "priority", "replicas", "placement", "submit_time",
                                   "exit_code", "reason", "array_id", "array_index",
                                   "array_limit")}
    request = job["request"]
    gpu = request["gpu"]
    out.update(cpu_milli=request.get("cpu_milli"), memory_mib=request.get("memory_mib"),
               gpu_count=gpu["count"], gpu_share=gpu["share"],
               gpu_memory_mib=gpu.get("memory_mib"),
               wait_codes=[r.get("code", "") for r in job.get("wait_reasons") or ()])
    return out


def gpus(job: dict) -> str:
    """``1``, ``0.5 (20 GiB)``, ``2x4`` (replicas x per replica); ``-`` for none."""
    count, share = job["gpu_count"], job["gpu_share"]
    if count == 0:
        return "-"
    per = f"{share / 1000:g}" if share < 1000 else str(count)
    if share < 1000 and job.get("gpu_memory_mib"):
        per += f" ({memory(job['gpu_memory_mib'])})"
    return per if job["replicas"] == 1 else f"{job['replicas']}x{per}"


def placement(job: dict) -> str:
    """``n1: GPU 0,1`` per replica; a share shows as ``GPU 0 (0.5)``."""
    if not job.get("placement"):
        return "-"
    out = []
    for rep in job["placement"]:
        devs = rep["devices"]
        if not devs:
            out.append(f"{rep['node']}: no GPU")
        elif len(devs) == 1 and devs[0]["milli"] < 1000:
            out.append(f"{rep['node']}: GPU {devs[0]['index']} ({devs[0]['milli'] / 1000:g})")
        else:
            out.append(f"{rep['node']}: GPU {','.join(str(d['index']) for d in devs)}")
    return "; ".join(out)


def reason_column(job: dict) -> str:
    """The reason of the job's last move, else the codes of its wait reasons."""
    if job.get("reason"):
        return job["reason"]
    return ", ".join(dict.fromkeys(c for c in job.get("wait_codes") or () if c)) or "-"


def age(since: float | None, now: float) -> str:
    return "-" if since is None else duration(now - since)


def values(now: float) -> dict[str, Callable[[dict], str]]:
    """How each column reads a job's brief view, ``age`` counted to ``now`` (each age in
    whole seconds worded once: jobs submitted together share it)."""
    ages: dict[int, str] = {}

    def age_of(job: dict) -> str:
        since = job["submit_time"]
        if since is None:
            return "-"
        seconds = round(now - since)
        found = ages.get(seconds)
        if found is None:
            found = ages[seconds] = duration(seconds)
        return found

    return {
        "id": lambda j: j["id"],
        "name": lambda j: j["name"] or "-",
        "project": lambda j: j["project"],
        "queue": lambda j: j["queue"],
        "user": lambda j: j["user"],
        "state": lambda j: j["state"],
        "priority": lambda j: str(j["priority"]),
        "gpus": gpus,
        "cpu": lambda j: f"{j['cpu_milli'] / 1000:g}",
        "memory": lambda j: memory(j["memory_mib"]),
        "where": placement,
        "age": age_of,
        "exit": lambda j: "-" if j.get("exit_code") is None else str(j["exit_code"]),
        "reason": reason_column,
    }
