"""Routes that move bytes: replica logs (``GET /v1/jobs/{job_id}/logs``) and uploads
(``POST /v1/uploads``).

The same authentication and visibility rules hold as on every route: a member reads logs only
of its projects' jobs (others answer 404) and uploads only for its projects.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from rota.api.auth import principal
from rota.api.logs import check_request, earlier_attempt, log_chunks
from rota.api.state import Api, api_of
from rota.core import InvalidSpec
from rota.store import Principal

MAX_KEY = 2 ** 62

router = APIRouter()


@router.get("/v1/jobs/{job_id}/logs")
def logs(job_id: str, replica: int = Query(0, ge=0, le=MAX_KEY),
         stream: str = Query("stdout"), follow: bool = False,
         attempt: int | None = Query(None, ge=0, le=MAX_KEY),
         who: Principal = Depends(principal), api: Api = Depends(api_of)) -> StreamingResponse:
    """One replica's stdout or stderr; ``follow`` streams until the job ends. ``attempt``:
    an earlier attempt's (the attempt numbers of ``rota show``), as its backend kept them."""
    rec = api.reads.visible_job(job_id, who)
    if attempt is not None and attempt != rec.attempts:
        rec = earlier_attempt(rec, attempt, lambda: api.store.attempt_handle(job_id, attempt),
                              follow)
        check_request(rec, replica, stream, False)
        chunks = log_chunks(lambda: rec, api.read_log, replica, stream, False, api.log_poll_s)
        return StreamingResponse(chunks, media_type="text/plain; charset=utf-8")
    check_request(rec, replica, stream, follow)
    store = api.store
    chunks = log_chunks(lambda: store.get_job(job_id), api.read_log, replica, stream, follow,
                        api.log_poll_s)
    return StreamingResponse(chunks, media_type="text/plain; charset=utf-8")


@router.post("/v1/uploads", status_code=201)
async def upload(request: Request, project: str | None = Query(None, max_length=253),
                 who: Principal = Depends(principal),
                 api: Api = Depends(api_of)) -> dict[str, Any]:
    """A working directory as a tar.gz body (see ``rota.api.uploads``), charged to
    ``project`` (default: every project of the caller); a body over the server's limit is
    refused before it is read (``rota.api.bodylimit``). A token uploads at most at its
    rate, checks at most its user's bound at once (``rota.api.offload``: 429), and a
    member may not upload for a project already at its storage cap (507)."""
    offload, quota = api.offload, api.quota
    offload.refuse_if_striking(who.user, who.token)
    offload.take_upload(who.user, who.token)
    if project is not None and not who.may_see(project):
        raise InvalidSpec("project", f"{who.user} is not a member of project {project!r}")
    charged = (project,) if project is not None else tuple(sorted(who.projects))
    cap = None
    if not who.operator:
        cap = (await run_in_threadpool(api.store.fair_use)).project.storage
        for name in charged:
            await run_in_threadpool(quota.refuse_if_full, name, cap, "upload")
    with offload.slot(who.user, who.token, "upload"):
        rec = await api.uploads.receive(request.stream(), who, offload, project)
    if cap is not None:
        blocks = api.uploads.path(rec.id).stat().st_blocks * 512
        for name in charged:
            quota.settle(name, 0, {None: blocks})
    return {"id": rec.id, "size": rec.size, "sha256": rec.sha256, "files": rec.members,
            "unpacked": rec.unpacked, "project": rec.project}
