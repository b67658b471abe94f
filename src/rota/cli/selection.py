"""Which jobs ``rota cancel`` acts on, as ``scancel`` chooses them: job IDs, arrays, and filters.

- ``ID``: that job; where ``ID`` is an array's (its first task's id, as ``rota ps`` folds it:
  ``88[0-9]``), every unfinished task of the array, as ``scancel 88`` cancels a whole array.
- ``ARRAY[TASKS]``, as ``rota ps`` prints it: the array's tasks of those indices (``88[3-9]``,
  ``88[0,2,5-7]``; a ``%N`` limit after them is read and ignored). ``88[0]`` is the first task
  alone.
- Filters (``--user``, ``--state``, ``--name``, ``--queue``) narrow what the IDs name; without
  IDs, they choose among every unfinished job the caller may see. ``-f FILE`` (as ``kubectl
  delete -f``) is the filter of the jobs a job file makes: its ``name``, and its ``project``
  and ``queue`` where it names them.

``parse`` reads the IDs (``Wanted``); ``choose`` picks from the jobs listed (the job views of
``GET /v1/jobs``), and says what named nothing. Nothing here talks to the server.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

SPEC = re.compile(r"^(?P<id>[0-9]+)(?:\[(?P<tasks>[0-9,\-]+)(?:%[0-9]+)?\])?$")
RANGE = re.compile(r"^([0-9]+)(?:-([0-9]+))?$")
MAX_TASKS = 1_000_000  # an index range wider than this is a mistake, not a request


class Mistake(ValueError):
    """An ID that is not one: the message names it and says what is expected."""


@dataclass(frozen=True, slots=True)
class Wanted:
    """What the command line names: plain IDs, and arrays with the task indices named."""

    ids: tuple[str, ...] = ()
    tasks: dict[str, frozenset[int]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.ids and not self.tasks


@dataclass(frozen=True, slots=True)
class Filters:
    user: str | None = None
    states: tuple[str, ...] = ()
    name: str | None = None
    queue: str | None = None
    project: str | None = None

    @property
    def any(self) -> bool:
        return bool(self.user or self.states or self.name or self.queue or self.project)

    def keep(self, job: dict[str, Any]) -> bool:
        return ((self.user is None or job.get("user") == self.user)
                and (not self.states or job.get("state") in self.states)
                and (self.name is None or job.get("name") == self.name)
                and (self.queue is None or job.get("queue") == self.queue)
                and (self.project is None or job.get("project") == self.project))


def parse(texts: Iterable[str]) -> Wanted:
    ids: list[str] = []
    tasks: dict[str, set[int]] = {}
    for text in texts:
        m = SPEC.match(text.strip())
        if m is None:
            raise Mistake(f"{text!r}: expected a job ID (88) or an array's tasks as rota ps "
                          "prints them (88[3-9], 88[0,2,5-7])")
        if m["tasks"] is None:
            ids.append(m["id"])
        else:
            tasks.setdefault(m["id"], set()).update(_indices(m["tasks"], text))
    return Wanted(tuple(dict.fromkeys(ids)), {a: frozenset(t) for a, t in tasks.items()})


def _indices(text: str, whole: str) -> set[int]:
    out: set[int] = set()
    for part in text.split(","):
        m = RANGE.match(part)
        if m is None:
            raise Mistake(f"{whole!r}: {part!r} is not a task index or a range of them (3-9)")
        low, high = int(m[1]), int(m[2] if m[2] is not None else m[1])
        if high < low or high - low >= MAX_TASKS:
            raise Mistake(f"{whole!r}: the range {part} is empty or too wide")
        out.update(range(low, high + 1))
    return out


def choose(jobs: list[dict[str, Any]], wanted: Wanted,
           filters: Filters) -> tuple[list[str], list[str]]:
    """The ids of the listed jobs the command line names and the filters keep, oldest first,
    and what it named that no such job matches (for an error line each)."""
    kept = [j for j in jobs if filters.keep(j)]
    if wanted.empty:
        return oldest_first(j["id"] for j in kept), []
    by_array: dict[str, list[dict[str, Any]]] = {}
    for j in kept:
        if j.get("array_id") is not None:
            by_array.setdefault(str(j["array_id"]), []).append(j)
    ids = {j["id"] for j in kept}
    named: set[str] = set()
    missing: list[str] = []
    for job_id in wanted.ids:
        found = {j["id"] for j in by_array.get(job_id, ())} | ({job_id} & ids)
        if not found:
            missing.append(job_id)
        named |= found
    for array, indices in wanted.tasks.items():
        found = {j["id"] for j in by_array.get(array, ()) if j.get("array_index") in indices}
        if not found:
            missing.append(f"{array}[{_ranges(indices)}]")
        named |= found
    return oldest_first(named), missing


def oldest_first(ids: Iterable[str]) -> list[str]:
    return sorted(ids, key=lambda i: (len(i), i))  # ids are whole numbers, given in order


def _ranges(indices: frozenset[int]) -> str:
    out, run = [], []
    for k in sorted(indices):
        if run and k == run[-1] + 1:
            run.append(k)
            continue
        if run:
            out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [k]
    out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ",".join(out)
