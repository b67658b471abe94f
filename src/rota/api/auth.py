"""Who sends a request: the bearer token checked on every route (401 without a good one).

``principal`` and ``operator`` are the dependencies routers take; the gateway's raw routes
call ``identify`` itself. A metrics token reaches only ``/metrics``; a job's own token reaches
only ``JOB_ROUTES`` of its job, and the gateway's routes (``job_may_call``; the gateway is
``rota.api.gateway``) for the models of its job's project only.
"""

from __future__ import annotations

from dataclasses import replace

from fastapi import Depends, Header, Request
from fastapi.concurrency import run_in_threadpool

from rota.api.errors import Forbidden
from rota.store import NotFound, Principal, Role, Store, Unauthenticated

JOB_ROUTES = (("GET", "/v1/whoami"), ("GET", "/v1/jobs/{job}"),
              ("GET", "/v1/jobs/{job}/events"), ("POST", "/v1/jobs/{job}/checkpoint"),
              ("POST", "/v1/jobs/{job}/exited"))
GATEWAY_ROUTES = frozenset({"/v1/chat/completions", "/v1/completions", "/v1/embeddings"})


def job_may_call(method: str, path: str) -> bool:
    """Whether a job's own token may send ``method path``: the gateway's routes, so that a job
    (an evaluation, an agent) calls the models of its project (the API narrows the token's
    projects to its job's before any route sees it)."""
    if method == "POST":
        return path in GATEWAY_ROUTES
    return method == "GET" and (path == "/v1/models" or path.startswith("/v1/models/"))


async def identify(store: Store, authorization: str | None, method: str,
                   path: str) -> Principal:
    """Who sends ``authorization`` for ``method path``: answered from the store's cache on the
    event loop when it can be; a lookup in the database runs on a worker thread."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthenticated("send Authorization: Bearer <token>")
    token = token.strip()
    who = store.cached_principal(token) or await run_in_threadpool(store.authenticate, token)
    if who.role is Role.METRICS and path != "/metrics":
        raise Forbidden("a metrics token may only read /metrics")
    if who.job is not None:
        project = await run_in_threadpool(_job_token_alive, store, who)
        if _job_may(method, path, who.job):
            return who
        if job_may_call(method, path):
            return replace(who, projects=frozenset({project}))
        raise Forbidden(f"the token of job {who.job} may only read that job, report its "
                        "checkpoints and its end, and call its project's models")
    return who


async def principal(request: Request, authorization: str | None = Header(None)) -> Principal:
    """The dependency of every route under ``/v1``: the caller, or 401 / 403."""
    return await identify(request.app.state.api.store, authorization, request.method,
                          request.url.path)


async def operator(who: Principal = Depends(principal)) -> Principal:
    """The dependency of operators' routes: 403 for anyone else."""
    if not who.operator:
        raise Forbidden("only an operator may do this")
    return who


def _job_token_alive(store: Store, who: Principal) -> str:
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


def _job_may(method: str, path: str, job: str) -> bool:
    """Whether a job token of ``job`` may send ``method path`` (``JOB_ROUTES``)."""
    return any(method == allowed and path == route.format(job=job)
               for allowed, route in JOB_ROUTES)
