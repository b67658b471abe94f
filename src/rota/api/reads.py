"""What the API's reading routes answer, as functions of the caller (``Principal``).

The routers (``rota.api.jobs_routes``, ``rota.api.admin_routes`` and the others) and the
web dashboard (``rota.api.dashboard``) both call these, so a page shows exactly what the API gives the same
token, under the same visibility rules:

- an operator sees every job; a member sees only its projects' jobs, and a job of another
  project is ``NotFound``, exactly like a job that does not exist;
- every caller sees the nodes, but a GPU held by a job of a project it may not see shows only
  the share held, without the job or its project (``rota.api.views.nodes_view``), and work
  outside rota is named only to operators;
- usage is given only for the projects the caller may see.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from rota.api.accounting import budget_view
from rota.api.models import attempt_view, event_view, job_view
from rota.api.views import nodes_view
from rota.control.queueview import queues_view
from rota.core import InvalidSpec, JobState
from rota.store import JobFilter, JobRecord, NotFound, Principal, Store
from rota.store.briefs import BRIEF_COLUMNS, chosen_columns
from rota.store.jobs import ascii_digits

VIEWS = ("full", "brief")  # of GET /v1/jobs


def _brief_head(columns: tuple[str, ...]) -> bytes:
    return b'{"columns":' + json.dumps(columns, separators=(",", ":")).encode() + b',"items":'


_BRIEF_HEAD = _brief_head(BRIEF_COLUMNS)


class Reads:
    def __init__(self, store: Store, clock: Callable[[], float],
                 on_touch: Callable[[str], None] = lambda job_id: None) -> None:
        """``on_touch(job_id)`` is told of every read of a job by a person (idle reclamation
        counts it as activity)."""
        self.store, self.clock, self.on_touch = store, clock, on_touch

    def visible_job(self, job_id: str, who: Principal) -> JobRecord:
        rec = self.store.get_job(job_id)
        if not who.may_see(rec.job.project):
            raise NotFound("job", job_id)
        if who.job is None:
            self.on_touch(rec.id)
        return rec

    def jobs(self, who: Principal, projects: list[str] | None = None,
             states: list[str] | None = None, user: str | None = None, queue: str | None = None,
             limit: int = 100, after: str | None = None) -> dict[str, Any]:
        """A page of jobs, newest first, as full views (``job_view``, pages of 1,000 at most),
        and the cursor of the next (``next_after``)."""
        where = self._where(who, projects, states, user, queue, after)
        page = self.store.list_jobs(where, limit=limit, after=after, newest_first=True)
        return {"items": [job_view(r) for r in page.items], "next_after": page.next_after}

    def brief_jobs(self, who: Principal, projects: list[str] | None = None,
                   states: list[str] | None = None, user: str | None = None,
                   queue: str | None = None, limit: int = 100, after: str | None = None,
                   columns: list[str] | None = None) -> bytes:
        """The same page as brief views, as the JSON answer's bytes: the values ``rota ps``
        shows (those of ``columns`` only, when named), one array per job in the order of the
        answer's ``columns`` (pages of 10,000 at most; a third the size of full views),
        written by the database (``rota.store.briefs``) and sent as they are."""
        chosen = chosen_columns(columns)
        where = self._where(who, projects, states, user, queue, after)
        items, next_after = self.store.brief_page(where, limit=limit, after=after,
                                                  columns=chosen)
        head = _BRIEF_HEAD if chosen == BRIEF_COLUMNS else _brief_head(chosen)
        return b"".join((head, items.encode(), b',"next_after":', json.dumps(next_after).encode(),
                         b"}"))

    def _where(self, who: Principal, projects: list[str] | None, states: list[str] | None,
               user: str | None, queue: str | None, after: str | None) -> JobFilter:
        """The filter of a listing: the projects asked for that the caller may see."""
        if after is not None and (not ascii_digits(after) or len(after) > 18):
            raise InvalidSpec("after", f"not a cursor from a previous page: {after!r}")
        wanted = frozenset(projects) if projects else None
        if not who.operator:
            wanted = who.projects if wanted is None else wanted & who.projects
        return JobFilter(projects=wanted, states=parse_states(states), user=user, queue=queue)

    def job(self, job_id: str, who: Principal) -> dict[str, Any]:
        """The job, whether its queue still admits its project (true; false: the binding
        changed after it was accepted, and it stays; null: the queue was deleted), and the
        history of its attempts, and its project's budget this month (null: none)."""
        rec = self.visible_job(job_id, who)
        bindings = self.store.bindings()
        admits = None
        if rec.job.queue in bindings:
            bound = bindings[rec.job.queue]
            admits = bound is None or rec.job.project in bound
        budget = self.store.budget_status(self.clock(), [rec.job.project]).get(rec.job.project)
        return {**job_view(rec), "queue_admits_project": admits,
                "history": [attempt_view(a) for a in self.store.attempts(job_id)],
                "budget": None if budget is None else budget_view(budget)}

    def events(self, job_id: str, who: Principal, after: int = 0,
               limit: int = 1000) -> list[dict[str, Any]]:
        self.visible_job(job_id, who)
        return [event_view(e) for e in self.store.events(job_id, after, limit)]

    def nodes(self, who: Principal) -> list[dict[str, Any]]:
        return nodes_view(self.store.node_records(), self.store.holding_jobs(),
                          who.may_see, who.operator)

    def queues(self) -> list[dict[str, Any]]:
        holding, pending = self.store.queue_overview()
        return queues_view(holding, self.store.bindings(), self.store.idle_defaults(),
                           self.store.queue_batches(), pending)

    def usage(self, who: Principal) -> dict[str, float]:
        """Decayed GPU-seconds per project the caller may see."""
        return {p: v for p, v in self.store.usage(self.clock()).items() if who.may_see(p)}

    def projects(self, who: Principal) -> list[dict[str, Any]]:
        """Each project this principal sees, with its budget this month (null: none)."""
        seen = [p for p in self.store.list_projects() if who.may_see(p.name)]
        budgets = self.store.budget_status(self.clock(), [p.name for p in seen])
        return [{"name": p.name, "weight": p.weight,
                 "budget": budget_view(budgets[p.name]) if p.name in budgets else None}
                for p in seen]


def check_view(view: str, columns: list[str] | None = None) -> None:
    """``view`` of ``GET /v1/jobs``: one of ``VIEWS``; ``columns`` only with the brief one."""
    if view not in VIEWS:
        raise InvalidSpec("view", f"unknown view {view!r}; known: {', '.join(VIEWS)}")
    if columns and view != "brief":
        raise InvalidSpec("columns", "names the values of brief views: give view=brief too")


def parse_states(values: list[str] | None) -> frozenset[JobState] | None:
    """``state`` filters (repeated, or comma-separated); None: any state."""
    if not values:
        return None
    names = [v for value in values for v in value.split(",") if v]
    unknown = [n for n in names if n not in JobState.__members__.values()]
    if unknown:
        raise InvalidSpec("state", f"unknown state {unknown[0]!r}; known: {', '.join(JobState)}")
    return frozenset(JobState(n) for n in names)
