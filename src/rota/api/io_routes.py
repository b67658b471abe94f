"""Routes that move bytes or manage access: replica logs, uploads, and the caller's tokens.

Registered by ``create_app`` with its ``principal`` and ``visible_job`` dependencies, so the
same authentication and visibility rules hold: a member reads logs only of its projects' jobs
(others answer 404) and lists or revokes only its own tokens.
"""

from __future__ import annotations

from typing import Any, Callable

from fastapi import Depends, FastAPI, Query, Request
from fastapi.responses import StreamingResponse

from rota.api.errors import Forbidden
from fastapi.concurrency import run_in_threadpool

from rota.api.logs import LogReader, check_request, log_chunks
from rota.api.offload import Offload
from rota.api.storage import StorageQuota
from rota.api.uploads import Uploads
from rota.core import InvalidSpec
from rota.store import JobRecord, NotFound, Principal, Store, TokenInfo

MAX_KEY = 2 ** 62


def add_io_routes(app: FastAPI, store: Store, principal: Callable[..., Principal],
                  visible_job: Callable[[str, Principal], JobRecord], uploads: Uploads,
                  read_log: LogReader, log_poll_s: float, offload: Offload,
                  quota: StorageQuota) -> None:
    @app.get("/v1/jobs/{job_id}/logs")
    def logs(job_id: str, replica: int = Query(0, ge=0, le=MAX_KEY),
             stream: str = Query("stdout"), follow: bool = False,
             who: Principal = Depends(principal)) -> StreamingResponse:
        """One replica's stdout or stderr; ``follow`` streams until the job ends."""
        rec = visible_job(job_id, who)
        check_request(rec, replica, stream, follow)
        chunks = log_chunks(lambda: store.get_job(job_id), read_log, replica, stream, follow,
                            log_poll_s)
        return StreamingResponse(chunks, media_type="text/plain; charset=utf-8")

    @app.post("/v1/uploads", status_code=201)
    async def upload(request: Request, project: str | None = Query(None, max_length=253),
                     who: Principal = Depends(principal)) -> dict[str, Any]:
        """A working directory as a tar.gz body (see ``rota.api.uploads``), charged to
        ``project`` (default: every project of the caller); a body over the server's limit is
        refused before it is read (``rota.api.bodylimit``). A token uploads at most at its
        rate, checks at most its user's bound at once (``rota.api.offload``: 429), and a
        member may not upload for a project already at its storage cap (507)."""
        offload.refuse_if_striking(who.user, who.token)
        offload.take_upload(who.user, who.token)
        if project is not None and not who.may_see(project):
            raise InvalidSpec("project", f"{who.user} is not a member of project {project!r}")
        charged = (project,) if project is not None else tuple(sorted(who.projects))
        cap = None
        if not who.operator:
            cap = (await run_in_threadpool(store.fair_use)).project.storage
            for name in charged:
                await run_in_threadpool(quota.refuse_if_full, name, cap, "upload")
        with offload.slot(who.user, who.token, "upload"):
            rec = await uploads.receive(request.stream(), who, offload, project)
        if cap is not None:
            blocks = uploads.path(rec.id).stat().st_blocks * 512
            for name in charged:
                quota.settle(name, 0, {None: blocks})
        return {"id": rec.id, "size": rec.size, "sha256": rec.sha256, "files": rec.members,
                "unpacked": rec.unpacked, "project": rec.project}

    @app.get("/v1/tokens")
    def list_tokens(user: str | None = None,
                    who: Principal = Depends(principal)) -> list[dict[str, Any]]:
        """The caller's tokens; an operator may name another ``user``."""
        target = _token_owner(who, user, store.list_users)
        return [token_view(t) for t in store.list_tokens(target)]

    @app.delete("/v1/tokens/{name}")
    def revoke_token(name: str, user: str | None = None,
                     who: Principal = Depends(principal)) -> dict[str, Any]:
        target = _token_owner(who, user, store.list_users)
        store.revoke_token(target, name)
        return {"name": name, "user": target, "revoked": True}


def _token_owner(who: Principal, user: str | None, users: Callable[[], list[str]]) -> str:
    if user is None or user == who.user:
        return who.user
    if not who.operator:
        raise Forbidden("a member may list and revoke only its own tokens")
    if user not in users():
        raise NotFound("user", user)
    return user


def token_view(t: TokenInfo) -> dict[str, Any]:
    return {"id": t.id, "name": t.name, "user": t.user, "role": str(t.role),
            "display": t.display, "created_at": t.created_at, "revoked_at": t.revoked_at}


