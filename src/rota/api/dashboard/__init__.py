"""The web dashboard: read-only pages under ``/ui/`` of the API server (``/`` leads there).

- ``/ui/``: the cluster: nodes, and each GPU as a bar of what holds it (``shapes.gpu_cells``);
- ``/ui/queues``: queues with their quota bars (nominal, used, borrowed), as ``rota queues``;
- ``/ui/jobs``: jobs, newest first, filtered by state, project and queue, as ``rota ps``;
- ``/ui/jobs/ID``: one job as ``rota show`` tells it (``rota.core.jobwords``): state, request,
  placement, why it waits, hints, estimated start, its attempts and events;
- ``/ui/services``: model services, their replicas and traffic, as ``rota services``;
- ``/ui/usage``: decayed GPU-hours per project, as ``rota usage``; and this month's exact
  GPU-hours, their cost and each project's budget with its state;
- ``/ui/login`` and ``/ui/logout``: a token in, a session opened; the session closed
  (``session``).

Every page reads through ``rota.api.reads``, the functions the API's routes answer with, for
the principal of the session's token: a member sees on every page exactly what the API shows
its token (its projects' jobs; another project's job on a GPU only as a share held), and an
operator sees everything. A job of another project answers 404, as one that does not exist.

Pages are rendered on the server from Jinja2 templates that escape every value; the CSS and a
small script ship with the package (``static/``) and nothing is fetched from elsewhere, so the
dashboard works on a cluster without Internet access. A strict Content-Security-Policy allows
only those files: no inline script or style. The script only reloads the cluster, queues and
jobs pages every 10 seconds where asked: never a job's page, whose every view counts as a
person's activity for idle reclamation, as ``rota show`` does.

This module holds the pages (``router``) and what they share (``Ui``); beside it:

- ``session``: who is looking: a token given once in the login form opens a session kept on the
  server, whose id the browser holds in a cookie scripts cannot read;
- ``shapes``: what the templates draw (GPU cells, quota bars, usage bars), shaped from the API's
  views, never reading the store or deciding who sees what.

``templates/`` holds the Jinja2 templates and ``static/`` the CSS and the script.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from rota.api.dashboard import session
from rota.api.dashboard.shapes import gpu_cells, quota_rows, usage_bars
from rota.api.logs import LogReader
from rota.api.service_routes import listed
from rota.api.state import Api
from rota.core import InvalidSpec, JobState, RotaError, jobwords
from rota.core.wording import amount, duration
from rota.store import NotFound, Principal, Store
from rota.store.accounting import month_bounds

HERE = Path(__file__).parent
ACTIVE = ("pending", "scheduled", "running", "preempting")  # what rota ps lists by default
HOLDING = ("scheduled", "running", "preempting")
PAGE = 50
COUNTED = 1000  # the cluster page counts jobs up to this, then says "1000+"
STDERR_BYTES = 64 * 1024
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; script-src 'self'; "
                               "img-src 'self'; form-action 'self'; frame-ancestors 'none'; "
                               "base-uri 'none'",
    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


class Ui:
    """What the pages share: the API's state, the templates and the open sessions."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.store, self.reads, self.read_log = api.store, api.reads, api.read_log
        self.env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True,
                               undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        self.sessions = session.Sessions()

    def render(self, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        now = self.reads.clock()
        html = self.env.get_template(name).render(
            age=lambda t: jobwords.age(t, now), when=lambda t: jobwords.when(t, now),
            amount=amount, duration=duration, **context)
        return HTMLResponse(html, status, headers=HEADERS)

    def page(self, request: Request, build: Callable[[Principal], HTMLResponse]) -> Response:
        who = session.current(self.store, self.sessions, request)
        if who is None:
            back = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            out = RedirectResponse("/ui/login?" + urlencode({"next": back}), 303)
            if session.COOKIE in request.cookies:
                session.forget(out, request)
            return out
        try:
            return build(who)
        except NotFound as exc:
            return self.render("error.html", 404, who=who, nav="", title="Not found",
                               message=f"There is {exc}, or none that you may see.")
        except InvalidSpec as exc:
            return self.render("error.html", 422, who=who, nav="", title="Bad request",
                               message=str(exc))


def install_dashboard(app: FastAPI) -> None:
    """The static files and the pages' shared state (``Ui``) on ``app``, whose
    ``state.api`` is set; ``router`` has the pages."""
    app.mount("/ui/static", StaticFiles(directory=HERE / "static"), name="ui-static")
    app.state.ui = Ui(app.state.api)


async def ui_of(request: Request) -> Ui:
    """The dependency of every page."""
    return request.app.state.ui


router = APIRouter()


@router.get("/", include_in_schema=False)
def root() -> Response:
    return RedirectResponse("/ui/", 307)


@router.get("/ui", include_in_schema=False)
def ui_root() -> Response:
    return RedirectResponse("/ui/", 307)


@router.get("/ui/login", include_in_schema=False)
def login_form(request: Request, next: str = "/ui/", ui: Ui = Depends(ui_of)) -> Response:
    return ui.render("login.html", who=None, nav="", next=_next(next), error=None)


@router.post("/ui/login", include_in_schema=False)
async def login(request: Request, ui: Ui = Depends(ui_of)) -> Response:
    if not session.same_origin(request):
        return ui.render("login.html", 403, who=None, nav="", next="/ui/",
                         error="This form was sent from another site; log in here.")
    try:
        fields = await session.form(request)
        token = fields.get("token", "")
        session.check(ui.store, token)
    except session.LoginRefused as exc:
        return ui.render("login.html", 401, who=None, nav="", next="/ui/", error=str(exc))
    out = RedirectResponse(_next(fields.get("next", "/ui/")), 303)
    session.keep(out, ui.sessions.open(token), request)
    return out


@router.post("/ui/logout", include_in_schema=False)
def logout(request: Request, ui: Ui = Depends(ui_of)) -> Response:
    out = RedirectResponse("/ui/login", 303)
    if session.same_origin(request):
        ui.sessions.close(request.cookies.get(session.COOKIE, ""))
        session.forget(out, request)
    return out


@router.get("/ui/", include_in_schema=False)
def overview(request: Request, ui: Ui = Depends(ui_of)) -> Response:
    def build(who: Principal) -> HTMLResponse:
        nodes = ui.reads.nodes(who)
        holding = ui.reads.jobs(who, states=list(HOLDING), limit=COUNTED)
        pending = ui.reads.jobs(who, states=["pending"], limit=COUNTED)
        names = {j["id"]: j["name"] for j in holding["items"]}
        cells = {n["name"]: gpu_cells(n, names) for n in nodes}
        gpus = [c for n in cells.values() for c in n]
        return ui.render("overview.html", who=who, nav="overview", nodes=nodes, cells=cells,
                         node_state=jobwords.node_state, gpu_total=len(gpus),
                         gpu_used=sum(min(c.used, 1) for c in gpus),
                         pending=_count(pending), running=_count(holding))
    return ui.page(request, build)


@router.get("/ui/queues", include_in_schema=False)
def queues(request: Request, ui: Ui = Depends(ui_of)) -> Response:
    def build(who: Principal) -> HTMLResponse:
        found = ui.reads.queues()
        return ui.render("queues.html", who=who, nav="queues", queues=found,
                         bars={q["name"]: quota_rows(q) for q in found})
    return ui.page(request, build)


@router.get("/ui/jobs", include_in_schema=False)
def jobs(request: Request, state: str = "active", project: str = "", queue: str = "",
         after: str | None = None, ui: Ui = Depends(ui_of)) -> Response:
    def build(who: Principal) -> HTMLResponse:
        states = {"active": list(ACTIVE), "all": None}.get(state, [state])
        found = ui.reads.jobs(who, [project] if project else None, states,
                              queue=queue or None, limit=PAGE, after=after or None)
        chosen = {"state": state, "project": project, "queue": queue}
        older = None if found["next_after"] is None else "/ui/jobs?" + urlencode(
            {**{k: v for k, v in chosen.items() if v}, "after": found["next_after"]})
        return ui.render("jobs.html", who=who, nav="jobs", jobs=found["items"], older=older,
                         chosen=chosen, states=["active", "all", *JobState],
                         projects=[p["name"] for p in ui.reads.projects(who)],
                         queues=sorted(q["name"] for q in ui.reads.queues()),
                         gpus=jobwords.gpus, placement=jobwords.placement,
                         reason=jobwords.reason_column)
    return ui.page(request, build)


@router.get("/ui/jobs/{job_id}", include_in_schema=False)
def job(request: Request, job_id: str, ui: Ui = Depends(ui_of)) -> Response:
    def build(who: Principal) -> HTMLResponse:
        found = ui.reads.job(job_id, who)
        nodes = ui.reads.nodes(who) if found["state"] == "pending" else []
        stderr = _stderr(ui.store, ui.read_log, job_id) if found["state"] == "failed" else b""
        return ui.render("job.html", who=who, nav="jobs", job=found,
                         events=ui.reads.events(job_id, who), words=jobwords,
                         why=jobwords.why_lines(found, nodes, ui.reads.clock()),
                         hints=jobwords.hints(found, nodes),
                         waiting=jobwords.not_yet_explained(found, ui.reads.clock()),
                         stderr=jobwords.stderr_tail(stderr))
    return ui.page(request, build)


@router.get("/ui/services", include_in_schema=False)
def services(request: Request, ui: Ui = Depends(ui_of)) -> Response:
    def build(who: Principal) -> HTMLResponse:
        return ui.render("services.html", who=who, nav="services",
                         services=listed(ui.api, who), serving=ui.api.serving is not None)
    return ui.page(request, build)


@router.get("/ui/usage", include_in_schema=False)
def usage(request: Request, ui: Ui = Depends(ui_of)) -> Response:
    def build(who: Principal) -> HTMLResponse:
        month, currency, rows = _this_month(ui, who)
        return ui.render("usage.html", who=who, nav="usage",
                         bars=usage_bars(ui.reads.usage(who)),
                         half_life_s=ui.store.usage_half_life_s,
                         month=month, currency=currency, months=rows)
    return ui.page(request, build)


def _this_month(ui: Ui, who: Principal) -> tuple[str, str | None, list[dict[str, Any]]]:
    """The calendar month (UTC) so far, per project ``who`` sees, as ``rota usage --since``
    the month's first day gives it: exact GPU-hours, their cost where prices are set, and the
    project's budget with the state it is in."""
    now = ui.reads.clock()
    start, _, month = month_bounds(now)
    seen = ui.reads.projects(who)
    report, currency = ui.store.report(start, now, ("project",), now,
                                       [p["name"] for p in seen])
    lines = {line.key[0]: line for line in report.lines}
    rows = []
    for p in seen:
        line = lines.get(p["name"])
        rows.append({"project": p["name"], "gpu_hours": line.gpu_hours if line else 0.0,
                     "cost": line.cost if line else 0.0, "budget": p["budget"]})
    return month, currency, rows


def _next(target: str) -> str:
    """Where to go after logging in: a dashboard page, never another site."""
    if not target.startswith("/ui/") or target.startswith("//") or "\\" in target:
        return "/ui/"
    return target


def _count(page: dict[str, Any]) -> str:
    return f"{len(page['items'])}" + ("+" if page["next_after"] is not None else "")


def _stderr(store: Store, read_log: LogReader, job_id: str) -> bytes:
    """The end of replica 0's standard error; nothing where the job has no logs."""
    rec = store.get_job(job_id)
    if not rec.backend_handle:
        return b""
    kept: deque[bytes] = deque()
    size = 0
    try:
        for chunk in read_log(rec.backend_handle, 0, "stderr", 0):
            kept.append(chunk)
            size += len(chunk)
            while size - len(kept[0]) >= STDERR_BYTES:
                size -= len(kept.popleft())
    except (OSError, RotaError):  # logs gone (retention) or a backend that cannot read them
        return b""
    return b"".join(kept)
