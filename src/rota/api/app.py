"""The application factory and its routes.

Every route under ``/v1`` needs ``Authorization: Bearer <token>`` (401 otherwise); the web
dashboard under ``/ui/`` (``rota.api.dashboard``) takes the token from its login form instead
and reads through the same functions (``rota.api.reads``). An operator sees and acts
on everything; a member sees and acts only on jobs of its user's projects, and a job of another
project answers 404, exactly like a job that does not exist, so ids reveal nothing.
Time (usage decay) comes from the injected ``clock``; the store stamps rows with its own.
"""

from __future__ import annotations

import asyncio
import json
import logging
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Callable

from fastapi import Body, Depends, FastAPI, Header, Query, Request, Response
from fastapi.responses import JSONResponse
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from rota.api import errors
from rota.api.errors import Forbidden
from rota.api.access_routes import add_access_routes
from rota.api.accounting import add_accounting_routes
from rota.api.admin_routes import add_admin_routes
from rota.api.bodylimit import MAX_BODY_BYTES, BodyLimit
from rota.api.dashboard import add_dashboard
from rota.api.gateway import add_gateway, job_may_call
from rota.api.service_routes import add_service_routes
from rota.control.loop import HANDOFF_WAIT_S
from rota.control.serving import Serving
from rota.api.io_routes import MAX_KEY, add_io_routes
from rota.api.logs import LogReader, no_reader
from rota.control.screen import Screen
from rota.control.sysaccounts import system_account_refusal
from rota.api.models import job_view
from rota.api.reads import Reads, check_view
from rota.api.fairuse import SubmitRate, fingerprint
from rota.api.jobfile import Given, check_file_size, choose, is_job_file, job_file_body, unchosen
from rota.api.offload import Offload
from rota.api.storage import StorageQuota
from rota.api.submit import array_tasks, parse_body
from rota.api.uploads import DEFAULT_MAX_BYTES, Uploads
from rota.core import InvalidSpec
from rota.core.archive import MAX_UNPACKED_BYTES
from rota.store.briefs import MAX_BRIEF_PAGE
from rota.store import JobRecord, NotFound, Principal, Role, Store, Submission, Unauthenticated
from rota.store.records import Replayed, SubmitOptions
from rota.store.submit import check_key

log = logging.getLogger(__name__)


class ProjectBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    weight: float = 1.0


class ProjectRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    project: str


class UserBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    projects: list[str] = []
    unix_user: str | None = None  # the OS account of its jobs; None: the account named ``name``
    allow_system_account: bool = False  # root or a uid below 1000 (rota.control.sysaccounts)


class UserChange(BaseModel):
    model_config = ConfigDict(extra="forbid")
    unix_user: str | None  # None: back to the account named like the user
    allow_system_account: bool = False


class HoldBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = ""


class ExitedBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: int = Field(ge=0, le=255, strict=True)  # the attempt's, as its batch script exits
    replicas: list[Annotated[int, Field(ge=0, le=255, strict=True)]] | None = Field(
        None, max_length=10_000)  # each replica's exit code, by rank, where the script knows


class TokenBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    role: Role = Role.MEMBER
    user: str | None = None


def _check_account(account: str, allowed: bool) -> None:
    """Refuse, naming ``unix_user``, to map a user to root or a system account unless
    ``allowed`` (``rota.control.sysaccounts``)."""
    refusal = None if allowed else system_account_refusal(account)
    if refusal is not None:
        raise InvalidSpec("unix_user", refusal)


def create_app(store: Store, clock: Callable[[], float] | None = None,
               data_dir: str | Path | None = None, on_change: Callable[[], None] | None = None,
               max_upload_bytes: int = DEFAULT_MAX_BYTES,
               max_unpacked_bytes: int = MAX_UNPACKED_BYTES, log_poll_s: float = 0.25,
               read_log: LogReader = no_reader,
               workdir_refusal: Callable[[str, str], str | None] | None = None,
               images_refused: str | None = None,
               on_touch: Callable[[str], None] = lambda job_id: None,
               metrics: Callable[[], bytes] | None = None,
               serving: Serving | None = None,
               on_exit: Callable[[str, int, int, tuple[int, ...] | None],
                                 Future[None] | None] | None = None,
               exit_wait_s: float = HANDOFF_WAIT_S,
               offload: Offload | None = None) -> FastAPI:
    """``data_dir`` holds uploads (none without it); ``on_change`` is called after a job is
    submitted or cancelled, to wake the control loop; an upload is refused past
    ``max_upload_bytes`` as sent and ``max_unpacked_bytes`` unpacked; ``read_log`` reads jobs' logs from the
    backend that runs them (``rota.api.logs``); ``workdir_refusal(user, path)`` says why a job
    of ``user`` may not run in directory ``path`` of the server (None: it may), so that a
    submit naming a directory its owner cannot use is refused at once; ``images_refused``
    (None: images run) says why a job naming a container ``image`` is refused at submit, on a
    backend that runs commands on its machines; ``on_touch(job_id)``
    is told of every request about a job by a person (not by the job's own token): idle
    reclamation counts it as activity; ``metrics`` gives what ``GET /metrics`` serves
    (Prometheus's text format) to operators and metrics tokens (no such route without it);
    ``serving`` (``rota.control.serving``) adds services (``rota.api.service_routes``) and the
    OpenAI-compatible gateway (``rota.api.gateway``); ``on_exit(job_id, attempt, status,
    replicas)`` takes an attempt's own report of its end (``ControlLoop.exited``): None when
    not taken, else a future done once the control plane acted on it, which the answer waits
    for, at most ``exit_wait_s`` (without ``on_exit`` no report is taken); ``offload``
    checks archives and reads YAML job files in worker processes, within its bounds
    (``rota.api.offload``; one with the default bounds when not given), and is kept as
    ``app.state.offload`` for its owner to ``close``."""
    clock = clock or store.clock
    app = FastAPI(title="rota", version="0.1.0")
    errors.install(app)
    uploads = Uploads(data_dir, max_upload_bytes, max_unpacked_bytes)
    offload = offload or Offload()
    app.state.offload = offload
    quota = StorageQuota(Path(data_dir or "."), store.storage_rows, uploads.all,
                         lambda: {u.name: frozenset(u.projects) for u in store.user_records()})
    rate = SubmitRate()
    app.add_middleware(BodyLimit, limit_of=lambda method, path: (
        max_upload_bytes if (method, path) == ("POST", "/v1/uploads") else MAX_BODY_BYTES))

    def changed() -> None:
        if on_change is not None:
            try:
                on_change()
            except Exception:  # the change is durable; a failed wake-up only delays it
                log.exception("on_change failed")

    async def identify(authorization: str | None, method: str, path: str) -> Principal:
        """Who sends ``authorization`` for ``method path``: answered from the store's cache
        on the event loop when it can be; a lookup in the database runs on a worker thread. A
        job's own token reaches only ``JOB_ROUTES`` of its job, and the gateway's routes
        (``rota.api.gateway.JOB_PATHS``) for the models of its job's project only."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise Unauthenticated("send Authorization: Bearer <token>")
        token = token.strip()
        who = store.cached_principal(token) or await run_in_threadpool(store.authenticate, token)
        if who.role is Role.METRICS and path != "/metrics":
            raise Forbidden("a metrics token may only read /metrics")
        if who.job is not None:
            project = await run_in_threadpool(_job_token_alive, who)
            if _job_may(method, path, who.job):
                return who
            if job_may_call(method, path):
                return replace(who, projects=frozenset({project}))
            raise Forbidden(f"the token of job {who.job} may only read that job, report its "
                            "checkpoints and its end, and call its project's models")
        return who

    async def principal(request: Request,
                        authorization: str | None = Header(None)) -> Principal:
        return await identify(authorization, request.method, request.url.path)

    def _job_token_alive(who: Principal) -> str:
        """A job token is good while its attempt runs (the cache may not have seen it end);
        returns the job's project."""
        try:
            rec = store.get_job(who.job or "")
        except NotFound:
            rec = None
        if rec is None or rec.attempts != who.attempt or not rec.state.holds_resources:
            raise Unauthenticated(f"attempt {who.attempt} of job {who.job} has ended, and its "
                                  "token with it")
        return rec.job.project

    def operator(who: Principal = Depends(principal)) -> Principal:
        if not who.operator:
            raise Forbidden("only an operator may do this")
        return who

    reads = Reads(store, clock, on_touch)  # what GET routes and the dashboard answer
    visible_job = reads.visible_job

    @app.get("/v1/whoami")
    def whoami(who: Principal = Depends(principal)) -> dict[str, Any]:
        return {"user": who.user, "role": str(who.role), "projects": sorted(who.projects)}

    @app.get("/v1/projects")
    def projects(who: Principal = Depends(principal)) -> list[dict[str, Any]]:
        return reads.projects(who)

    @app.post("/v1/projects", status_code=201)
    def create_project(body: ProjectBody, _: Principal = Depends(operator)) -> dict[str, Any]:
        project = store.create_project(body.name, body.weight)
        return {"name": project.name, "weight": project.weight}

    @app.get("/v1/users")
    def users(_: Principal = Depends(operator)) -> list[dict[str, Any]]:
        """Every user: its OS account (what its jobs run as) and its projects."""
        return [{"name": u.name, "unix_user": u.unix_user, "projects": list(u.projects)}
                for u in store.user_records()]

    @app.post("/v1/users", status_code=201)
    def create_user(body: UserBody, _: Principal = Depends(operator)) -> dict[str, Any]:
        """A user, the projects it is a member of and its OS account, in one transaction."""
        _check_account(body.unix_user or body.name, body.allow_system_account)
        store.create_user(body.name, body.projects, unix_user=body.unix_user)
        return {"name": body.name, "projects": sorted(set(body.projects)),
                "unix_user": body.unix_user or body.name}

    @app.patch("/v1/users/{name}")
    def change_user(name: str, body: UserChange,
                    _: Principal = Depends(operator)) -> dict[str, Any]:
        """Map ``name``'s jobs to another OS account (null: the account named like it)."""
        _check_account(body.unix_user or name, body.allow_system_account)
        store.set_unix_user(name, body.unix_user)
        return {"name": name, "unix_user": body.unix_user or name}

    @app.post("/v1/users/{name}/projects", status_code=201)
    def add_member(name: str, body: ProjectRef, _: Principal = Depends(operator)) -> dict[str, Any]:
        store.add_member(name, body.project)
        return {"name": name, "project": body.project}

    @app.post("/v1/tokens", status_code=201)
    def issue_token(body: TokenBody, who: Principal = Depends(principal)) -> dict[str, Any]:
        user = body.user or who.user
        if body.role is Role.JOB:
            raise InvalidSpec("role", "job tokens are issued by the control plane, one per "
                              "attempt of a job; choose member, operator or metrics")
        if not who.operator and body.role is Role.METRICS:
            raise Forbidden("only an operator may issue a metrics token")
        if not who.operator and (user != who.user or body.role is Role.OPERATOR):
            raise Forbidden("a member may issue only member tokens for itself")
        issued = store.issue_token(user, body.name, body.role)
        return {"token": issued.token, "name": issued.info.name, "user": issued.info.user,
                "role": str(issued.info.role), "display": issued.info.display}

    if metrics is not None:
        @app.get("/metrics")
        def prometheus(who: Principal = Depends(principal)) -> Response:
            if not (who.operator or who.role is Role.METRICS):
                raise Forbidden("only an operator or a metrics token may read the metrics "
                                "(an operator makes one: rota token create NAME --metrics)")
            return Response(metrics(), media_type=PROMETHEUS_TEXT)

    @app.get("/v1/usage")
    def usage(who: Principal = Depends(principal)) -> dict[str, float]:
        return reads.usage(who)

    screen = Screen(store)  # refuses at submit what can never run

    def upload_usable(who: Principal) -> Callable[[str], bool]:
        def usable(upload_id: str) -> bool:
            found = uploads.get(upload_id)
            return found is not None and (who.operator or found.user == who.user)
        return usable

    def storage_held(sub: Submission, copies: int, cap: int | None) -> int:
        """The project's storage quota (``rota.api.storage``): the bytes the job will unpack,
        held until it is stored; ``StorageFull`` past the cap."""
        if uploads.root is None:
            return 0
        found = uploads.get(sub.run.get("upload") or "")
        adding = 0 if found is None else found.unpacked * copies
        return quota.admit(sub.project, adding, cap, "job")

    @app.post("/v1/jobs", status_code=201)
    async def submit(body: Any = Body(...), who: Principal = Depends(principal),
                     idempotency_key: str | None = Header(None),
                     content_type: str | None = Header(None),
                     options_given: Given = Depends(Given)) -> Response:
        """A job file as JSON (see ``rota.api.submit``), or as it is on disk, with the command
        line's choices as query parameters and rota's choice of project and queue where none
        is named (``rota.api.jobfile``). Runs on the event loop: validation is pure, and the
        insert is awaited (group commit, ``rota.store.group``) without holding a worker
        thread; the answer comes once the job is committed. With ``Idempotency-Key``, the same
        key and body again within a day answer the job the first made (200), never a second
        one. A member is held to the fair-use caps (``rota.api.fairuse``): 429, and to its
        project's storage quota (``rota.api.storage``): 507. A YAML job file is read in a
        worker process, within the user's bound (``rota.api.offload``): 429 past it."""
        if is_job_file(content_type):  # read in a worker process (rota.api.offload)
            check_file_size(body)
            with offload.slot(who.user, who.token, "job file"):
                found = await offload.parse_job_file(who.user, who.token, body)
            body = job_file_body(found)
        body = options_given.applied(body)
        options = SubmitOptions(member=not who.operator, capped=not who.operator,
                                key=idempotency_key, fingerprint=fingerprint(body))
        if idempotency_key is not None:
            check_key(idempotency_key)
            found = await run_in_threadpool(store.replay, who.user, options)
            if found is not None:
                return _created(found, replayed=True)
        if unchosen(body):
            body = await run_in_threadpool(choose, body, who.projects, store.bindings)
        sub = parse_body(body, who.user, upload_usable(who))
        if not who.may_see(sub.project):
            raise InvalidSpec("project", f"{who.user} is not a member of project {sub.project!r}")
        await run_in_threadpool(screen.refuse_if_never_runs, sub)  # rota.control.screen
        image = sub.run.get("image")
        if image is not None and images_refused is not None:
            raise InvalidSpec("run.image" if "run" in body else "image",
                              f"names the container image {image!r}, but {images_refused}")
        workdir = sub.run.get("workdir")
        if workdir is not None and workdir_refusal is not None:
            refusal = await run_in_threadpool(workdir_refusal, who.user, workdir)
            if refusal is not None:
                raise InvalidSpec("run.workdir" if "run" in body else "workdir", refusal)
        tasks = array_tasks(body, sub)
        held = 0
        if not who.operator:
            caps = await run_in_threadpool(store.fair_use)
            rate.take(who.user, sub.project, caps)
            held = await run_in_threadpool(storage_held, sub, max(1, len(tasks)),
                                           caps.project.storage)
        made: Any = None
        try:
            if tasks:
                made = await run_in_threadpool(store.submit_array, tasks, options=options)
            else:  # membership is checked again in the insert's transaction: the principal
                # may be cached
                made = await asyncio.wrap_future(store.submit_future(sub, options=options))
        finally:  # even a job adding nothing: its directory counts once it has one
            if not who.operator:
                quota.settle(sub.project, held, _stored(made, held))
        changed()
        return _created(made)

    @app.get("/v1/jobs")
    def list_jobs(project: list[str] | None = Query(None), state: list[str] | None = Query(None),
                  user: str | None = None, queue: str | None = None,
                  limit: int = Query(100, ge=1, le=MAX_BRIEF_PAGE), after: str | None = None,
                  view: str = "full", columns: list[str] | None = Query(None),
                  who: Principal = Depends(principal)) -> Response:
        """A page of jobs newest first (``rota.api.reads``); ``view=brief`` for the fields
        ``rota ps`` shows (``columns``: only those), in pages of up to 10,000, sent as the
        database wrote them. The full views are plain JSON types, so they are written as they
        are, without FastAPI's encoder (which took as long as the read)."""
        check_view(view, columns)
        if view == "brief":
            return Response(reads.brief_jobs(who, project, state, user, queue, limit, after,
                                             columns), media_type="application/json")
        return JSONResponse(reads.jobs(who, project, state, user, queue, limit, after))

    @app.get("/v1/jobs/{job_id}")
    def show(job_id: str, who: Principal = Depends(principal)) -> dict[str, Any]:
        """The job, whether its queue still admits its project (true; false: the binding
        changed after it was accepted, and it stays; null: the queue was deleted), and the
        history of its attempts."""
        return reads.job(job_id, who)

    @app.post("/v1/jobs/{job_id}/checkpoint")
    def checkpoint(job_id: str, who: Principal = Depends(principal)) -> dict[str, Any]:
        """The job's running attempt has just saved a checkpoint: victim choice counts only
        the work since then as lost. From inside the job: ``rota checkpoint``, or this route
        with ``$ROTA_URL`` and ``$ROTA_TOKEN`` (the attempt's own token)."""
        visible_job(job_id, who)
        return job_view(store.record_checkpoint(job_id, who.attempt))

    @app.post("/v1/jobs/{job_id}/exited")
    async def exited(job_id: str, body: ExitedBody, who: Principal = Depends(principal)
                     ) -> dict[str, Any]:
        """The job's running attempt ended with ``status`` (and each replica with its code
        in ``replicas``, by rank, where it knows them): sent by the attempt itself (a
        Slurm batch script, after its replicas ended and before it exits), with its own token;
        any other token is refused (403). Answered once the control plane has acted on it:
        the attempt counts as ended, and what it placed on the freed GPUs is launched
        (``taken``: false when the control plane leaves it to its backend to see the end).
        The wait holds no worker thread: every running job may be waiting at once."""
        await run_in_threadpool(visible_job, job_id, who)
        if who.job != job_id or who.attempt is None:
            raise Forbidden("only the attempt's own token ($ROTA_TOKEN inside the job) may "
                            "report its end")
        taken = None if on_exit is None else await run_in_threadpool(
            on_exit, job_id, who.attempt, body.status,
            None if body.replicas is None else tuple(body.replicas))
        if taken is not None:
            try:
                await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(taken)), exit_wait_s)
            except asyncio.TimeoutError:
                pass  # answered anyway: the script must not wait longer
        return {"job": job_id, "attempt": who.attempt, "taken": taken is not None}

    @app.post("/v1/jobs/{job_id}/hold")
    def hold(job_id: str, body: HoldBody = Body(HoldBody()),
             who: Principal = Depends(principal)) -> dict[str, Any]:
        """Keep a pending job from being scheduled until it is released."""
        visible_job(job_id, who)
        return job_view(store.hold(job_id, body.reason, by=who.user))

    @app.post("/v1/jobs/{job_id}/release")
    def release(job_id: str, who: Principal = Depends(principal)) -> dict[str, Any]:
        """Let a held job be scheduled again."""
        visible_job(job_id, who)
        rec = store.release(job_id, by=who.user)
        changed()
        return job_view(rec)

    @app.post("/v1/jobs/{job_id}/cancel")
    def cancel(job_id: str, who: Principal = Depends(principal)) -> dict[str, Any]:
        visible_job(job_id, who)
        rec = store.request_cancel(job_id, by=who.user)
        changed()
        return job_view(rec)

    @app.get("/v1/jobs/{job_id}/events")
    def events(job_id: str, after: int = Query(0, ge=0, le=MAX_KEY), limit: int = Query(1000, ge=1, le=1000),
               who: Principal = Depends(principal)) -> list[dict[str, Any]]:
        return reads.events(job_id, who, after, limit)

    add_admin_routes(app, store, reads, principal, operator, changed)
    add_access_routes(app, store, operator, changed)
    add_accounting_routes(app, store, clock, principal, changed)
    add_io_routes(app, store, principal, visible_job, uploads, read_log, log_poll_s,
                  offload, quota)
    add_dashboard(app, store, reads, read_log)  # /ui/: the same reads, for a browser
    if serving is not None:
        add_service_routes(app, store, serving, principal, upload_usable,
                           screen.refuse_if_never_runs)
        add_gateway(app, serving, principal, identify)
    return app


def _stored(made: JobRecord | Replayed | list[JobRecord] | None,
            held: int) -> dict[str | None, int]:
    """What a submit that held ``held`` bytes of storage stored, by job id."""
    if isinstance(made, JobRecord):
        return {made.id: held}
    if isinstance(made, list) and made:
        return {rec.id: held // len(made) for rec in made}
    return {}


def _created(made: JobRecord | Replayed | list[JobRecord], replayed: bool = False) -> Response:
    """The answer to a submit: the job (an array: its first task, and the array), 201 when
    it was made now, 200 when an idempotency key named it (``Idempotent-Replayed: true``)."""
    tasks = None
    if isinstance(made, Replayed):
        first, tasks, replayed = made.record, made.tasks, True
    elif isinstance(made, list):
        first, tasks = made[0], len(made)
    else:
        first = made
    view = job_view(first)
    if tasks is not None:
        view["array"] = {"id": first.array_id, "tasks": tasks, "limit": first.array_limit}
    return Response(json.dumps(view, allow_nan=False), 200 if replayed else 201,
                    headers={"Idempotent-Replayed": "true"} if replayed else None,
                    media_type="application/json")


PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
JOB_ROUTES = (("GET", "/v1/whoami"), ("GET", "/v1/jobs/{job}"),
              ("GET", "/v1/jobs/{job}/events"), ("POST", "/v1/jobs/{job}/checkpoint"),
              ("POST", "/v1/jobs/{job}/exited"))


def _job_may(method: str, path: str, job: str) -> bool:
    """Whether a job token of ``job`` may send ``method path`` (``JOB_ROUTES``)."""
    return any(method == allowed and path == route.format(job=job)
               for allowed, route in JOB_ROUTES)
