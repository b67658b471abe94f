"""Jobs after their submit (``rota.api.submit_routes``): ``GET /v1/jobs`` (a page, newest
first), ``GET /v1/jobs/{job_id}``, its ``events``, ``hold``, ``release``, ``requeue`` and
``cancel``, and
what a running attempt reports with its own token: ``checkpoint`` and ``exited``.

A member sees and acts only on jobs of its projects; another project's job answers 404, as one
that does not exist (``rota.api.reads``). The control loop is woken (``changed``) after a
release or a cancel.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Callable

from fastapi import APIRouter, Body, Depends, Query, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from rota.api.auth import principal
from rota.api.errors import Forbidden
from rota.api.io_routes import MAX_KEY
from rota.api.models import job_view
from rota.api.reads import check_view
from rota.api.state import Api, api_of
from rota.core import parse_duration_s
from rota.store import JobRecord, Principal
from rota.store.changes import Change
from rota.store.briefs import MAX_BRIEF_PAGE

router = APIRouter()


class HoldBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = ""


class ExitedBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: int = Field(ge=0, le=255, strict=True)  # the attempt's, as its batch script exits
    replicas: list[Annotated[int, Field(ge=0, le=255, strict=True)]] | None = Field(
        None, max_length=10_000)  # each replica's exit code, by rank, where the script knows


@router.get("/v1/jobs")
def list_jobs(project: list[str] | None = Query(None), state: list[str] | None = Query(None),
              user: str | None = None, queue: str | None = None,
              limit: int = Query(100, ge=1, le=MAX_BRIEF_PAGE), after: str | None = None,
              view: str = "full", columns: list[str] | None = Query(None),
              who: Principal = Depends(principal), api: Api = Depends(api_of)) -> Response:
    """A page of jobs newest first (``rota.api.reads``); ``view=brief`` for the fields
    ``rota ps`` shows (``columns``: only those), in pages of up to 10,000, sent as the
    database wrote them. The full views are plain JSON types, so they are written as they
    are, without FastAPI's encoder (which took as long as the read)."""
    check_view(view, columns)
    if view == "brief":
        return Response(api.reads.brief_jobs(who, project, state, user, queue, limit, after,
                                             columns), media_type="application/json")
    return JSONResponse(api.reads.jobs(who, project, state, user, queue, limit, after))


@router.get("/v1/jobs/{job_id}")
def show(job_id: str, who: Principal = Depends(principal),
         api: Api = Depends(api_of)) -> dict[str, Any]:
    """The job, whether its queue still admits its project (true; false: the binding
    changed after it was accepted, and it stays; null: the queue was deleted), and the
    history of its attempts."""
    return api.reads.job(job_id, who)


@router.post("/v1/jobs/{job_id}/checkpoint")
def checkpoint(job_id: str, who: Principal = Depends(principal),
               api: Api = Depends(api_of)) -> dict[str, Any]:
    """The job's running attempt has just saved a checkpoint: victim choice counts only
    the work since then as lost. From inside the job: ``rota checkpoint``, or this route
    with ``$ROTA_URL`` and ``$ROTA_TOKEN`` (the attempt's own token)."""
    api.reads.visible_job(job_id, who)
    return job_view(api.store.record_checkpoint(job_id, who.attempt))


@router.post("/v1/jobs/{job_id}/exited")
async def exited(job_id: str, body: ExitedBody, who: Principal = Depends(principal),
                 api: Api = Depends(api_of)) -> dict[str, Any]:
    """The job's running attempt ended with ``status`` (and each replica with its code
    in ``replicas``, by rank, where it knows them): sent by the attempt itself (a
    Slurm batch script, after its replicas ended and before it exits), with its own token;
    any other token is refused (403). Answered once the control plane has acted on it:
    the attempt counts as ended, and what it placed on the freed GPUs is launched
    (``taken``: false when the control plane leaves it to its backend to see the end).
    The wait holds no worker thread: every running job may be waiting at once."""
    await run_in_threadpool(api.reads.visible_job, job_id, who)
    if who.job != job_id or who.attempt is None:
        raise Forbidden("only the attempt's own token ($ROTA_TOKEN inside the job) may "
                        "report its end")
    taken = None if api.on_exit is None else await run_in_threadpool(
        api.on_exit, job_id, who.attempt, body.status,
        None if body.replicas is None else tuple(body.replicas))
    if taken is not None:
        try:
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(taken)), api.exit_wait_s)
        except asyncio.TimeoutError:
            pass  # answered anyway: the script must not wait longer
    return {"job": job_id, "attempt": who.attempt, "taken": taken is not None}


@router.post("/v1/jobs/{job_id}/hold")
def hold(job_id: str, body: HoldBody = Body(HoldBody()), who: Principal = Depends(principal),
         api: Api = Depends(api_of)) -> dict[str, Any]:
    """Keep a pending job from being scheduled until it is released."""
    api.reads.visible_job(job_id, who)
    return job_view(api.store.hold(job_id, body.reason, by=who.user))


class UpdateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    walltime: str | float | None = None  # a duration (4h, 90m) or seconds
    priority: int | None = None
    queue: str | None = Field(None, max_length=253)


@router.patch("/v1/jobs/{job_id}")
def update(job_id: str, body: UpdateBody, who: Principal = Depends(principal),
           api: Api = Depends(api_of)) -> dict[str, Any]:
    """Change a pending job's walltime, priority or queue (``rota.store.changes``): a member
    may only lower the first two; an operator may set them. The job, and what changed."""
    api.reads.visible_job(job_id, who)
    walltime = None if body.walltime is None else parse_duration_s(body.walltime, "walltime")
    rec, said = api.store.update_pending(job_id, Change(walltime, body.priority, body.queue),
                                         by=who.user, operator=who.operator)
    api.changed()
    return {**job_view(rec), "changes": said}


@router.post("/v1/jobs/{job_id}/release")
def release(job_id: str, who: Principal = Depends(principal),
            api: Api = Depends(api_of)) -> dict[str, Any]:
    """Let a held job be scheduled again."""
    return _acted(api, job_id, who, api.store.release)


@router.post("/v1/jobs/{job_id}/requeue")
def requeue(job_id: str, who: Principal = Depends(principal),
            api: Api = Depends(api_of)) -> dict[str, Any]:
    """Send a scheduled or running job back to pending, as ``scontrol requeue``: it gets its
    checkpoint signal and grace period, as a preemption's victim (``rota.store.changes``).
    Its owner or an operator only: another member of its project is refused (403)."""
    rec = api.reads.visible_job(job_id, who)
    if not who.operator and rec.job.user != who.user:
        raise Forbidden(f"only job {job_id}'s owner ({rec.job.user}) or an operator may requeue "
                        f"it ({who.user} is neither)")
    rec = api.store.requeue(job_id, by=who.user)
    api.changed()
    return job_view(rec)


@router.post("/v1/jobs/{job_id}/cancel")
def cancel(job_id: str, force: bool = False, who: Principal = Depends(principal),
           api: Api = Depends(api_of)) -> dict[str, Any]:
    """Cancel the job: a pending one at once, an active one after its grace period. With
    ``force`` (operators only) an active job ends CANCELLED at once, without waiting for its
    backend to say it stopped, and its resources are freed: for a job whose backend can no
    longer be asked about it (the control loop then makes one best-effort stop)."""
    if force and not who.operator:
        raise Forbidden(f"force: only an operator may force a cancel ({who.user} is not one); "
                        "cancel without force, or ask an operator")
    return _acted(api, job_id, who, api.store.force_cancel if force else api.store.request_cancel)


def _acted(api: Api, job_id: str, who: Principal,
           act: Callable[..., JobRecord]) -> dict[str, Any]:
    """``act(job_id, by=user)`` on a job ``who`` may see, then wake the control loop."""
    api.reads.visible_job(job_id, who)
    rec = act(job_id, by=who.user)
    api.changed()
    return job_view(rec)


@router.get("/v1/jobs/{job_id}/events")
def events(job_id: str, after: int = Query(0, ge=0, le=MAX_KEY),
           limit: int = Query(1000, ge=1, le=1000), who: Principal = Depends(principal),
           api: Api = Depends(api_of)) -> list[dict[str, Any]]:
    return api.reads.events(job_id, who, after, limit)
