"""The web dashboard: pages under ``/ui/`` of the API server (``/`` leads there), which read
what the API reads; a job's page besides cancels, holds and releases the job.

- ``/ui/``: the cluster: nodes, and each GPU as a bar of what holds it (``shapes.gpu_cells``);
- ``/ui/queues``: queues with their quota bars (nominal, used, borrowed), as ``rota queues``;
- ``/ui/jobs``: jobs, newest first, filtered by state, project and queue, as ``rota ps``;
- ``/ui/jobs/ID``: one job as ``rota show`` tells it (``rota.core.jobwords``): state, request,
  placement, why it waits, hints, estimated start, its attempts and events; the end of each
  replica's logs, as ``rota logs`` prints them (``tails``); and buttons to cancel, hold and
  release it, for a viewer who may, where its state allows (``actions``): each a form posted
  to ``/ui/jobs/ID/ACTION`` with the session's form token (``session``), which leads back to
  the page with a sentence that says what was done;
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
  server, whose id the browser holds in a cookie scripts cannot read; the form token that a
  form which changes something must carry;
- ``actions``: which of cancel, hold and release a job's page offers its viewer, and doing one;
- ``tails``: the end of each replica's logs for a job's page, through the API's log code;
- ``shapes``: what the templates draw (GPU cells, quota bars, usage bars), shaped from the API's
  views, never reading the store or deciding who sees what.

``templates/`` holds the Jinja2 templates and ``static/`` the CSS and the script.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from rota.api.dashboard import session
from rota.api.dashboard.actions import act, offered
from rota.api.dashboard.shapes import gpu_cells, quota_rows, usage_bars
from rota.api.dashboard.tails import MAX_REPLICAS, TAIL_BYTES, tails
from rota.api.errors import Forbidden
from rota.api.service_routes import listed
from rota.api.state import Api
from rota.core import InvalidSpec, JobState, jobwords
from rota.core.wording import amount, duration
from rota.store import NotFound, Principal
from rota.store.accounting import month_bounds

HERE = Path(__file__).parent
ACTIVE = ("pending", "scheduled", "running", "preempting")  # what rota ps lists by default
HOLDING = ("scheduled", "running", "preempting")
PAGE = 50
COUNTED = 1000  # the cluster page counts jobs up to this, then says "1000+"
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

    def page(self, request: Request, build: Callable[[Principal], Response],
             back: str | None = None) -> Response:
        """``build(who)`` for the session's principal; without a session, the login form,
        which leads back to ``back`` (default: this page)."""
        who = session.current(self.store, self.sessions, request)
        if who is None:
            if back is None:
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
        found = ui.reads.job(job_id, who)  # NotFound for a job of another project
        nodes = ui.reads.nodes(who) if found["state"] == "pending" else []
        logs, no_logs = tails(ui.store.get_job(job_id), ui.read_log)
        stderr = next((t.text for t in logs if (t.replica, t.stream) == (0, "stderr")), "")
        sid = request.cookies.get(session.COOKIE, "")
        return ui.render("job.html", who=who, nav="jobs", job=found,
                         events=ui.reads.events(job_id, who), words=jobwords,
                         why=jobwords.why_lines(found, nodes, ui.reads.clock()),
                         hints=jobwords.hints(found, nodes),
                         waiting=jobwords.not_yet_explained(found, ui.reads.clock()),
                         stderr=jobwords.stderr_tail(stderr.encode())
                         if found["state"] == "failed" else [],
                         logs=logs, no_logs=no_logs, tail_kib=TAIL_BYTES // 1024,
                         more_replicas=found["replicas"] > MAX_REPLICAS,
                         actions=offered(found, who), csrf=ui.sessions.csrf(sid),
                         csrf_field=session.CSRF_FIELD, notice=ui.sessions.told(sid, job_id))
    return ui.page(request, build)


@router.post("/ui/jobs/{job_id}/{action}", include_in_schema=False)
async def job_action(request: Request, job_id: str, action: str,
                     ui: Ui = Depends(ui_of)) -> Response:
    """A job page's button: refused (403, nothing done) without the session's form token or
    from another site's page; else done, and back to the job's page, which says what was."""
    try:
        fields = await session.form(request)
    except session.LoginRefused:
        fields = {}
    return await run_in_threadpool(_act, ui, request, job_id, action, fields)


def _act(ui: Ui, request: Request, job_id: str, action: str, fields: dict[str, str]
         ) -> Response:
    def build(who: Principal) -> Response:
        if not session.form_allowed(ui.sessions, request, fields):
            return ui.render("error.html", 403, who=who, nav="", title="Refused",
                             message="This form was not sent from this dashboard's page, or "
                                     "that page is out of date: nothing was done. Open the "
                                     "job's page again and use its buttons.")
        try:
            said = act(ui.api, who, job_id, action, fields.get("reason", ""))
        except Forbidden as exc:
            return ui.render("error.html", 403, who=who, nav="", title="Refused",
                             message=str(exc))
        ui.sessions.tell(request.cookies.get(session.COOKIE, ""), job_id, said)
        return RedirectResponse(f"/ui/jobs/{quote(job_id, safe='')}", 303)
    return ui.page(request, build, back=f"/ui/jobs/{quote(job_id, safe='')}")


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
