"""``POST /v1/jobs``: a job file as JSON (``rota.api.submit``), or as it is on disk
(``rota.api.jobfile``), checked, held to the fair-use caps and the storage quota, and stored.

The answer is the job (an array: its first task, and the array), 201 when it was made now,
200 when an idempotency key named a job made before (``Idempotent-Replayed: true``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import APIRouter, Body, Depends, Header, Response
from fastapi.concurrency import run_in_threadpool

from rota.api.auth import principal
from rota.api.fairuse import fingerprint
from rota.api.jobfile import Given, check_file_size, choose, is_job_file, job_file_body, unchosen
from rota.api.models import job_view
from rota.api.state import Api, api_of
from rota.api.submit import array_tasks, parse_body
from rota.core import InvalidSpec
from rota.store import JobRecord, Principal, Submission
from rota.store.records import Replayed, SubmitOptions
from rota.store.submit import check_key

router = APIRouter()


@router.post("/v1/jobs", status_code=201)
async def submit(body: Any = Body(...), who: Principal = Depends(principal),
                 idempotency_key: str | None = Header(None),
                 content_type: str | None = Header(None),
                 options_given: Given = Depends(Given), api: Api = Depends(api_of)) -> Response:
    """A job file as JSON (see ``rota.api.submit``), or as it is on disk, with the command
    line's choices as query parameters and rota's choice of project and queue where none
    is named (``rota.api.jobfile``). Runs on the event loop: validation is pure, and the
    insert is awaited (group commit, ``rota.store.group``) without holding a worker
    thread; the answer comes once the job is committed. With ``Idempotency-Key``, the same
    key and body again within a day answer the job the first made (200), never a second
    one. A member is held to the fair-use caps (``rota.api.fairuse``): 429, and to its
    project's storage quota (``rota.api.storage``): 507. A YAML job file is read in a
    worker process, within the user's bound (``rota.api.offload``): 429 past it."""
    store = api.store
    if is_job_file(content_type):  # read in a worker process (rota.api.offload)
        check_file_size(body)
        with api.offload.slot(who.user, who.token, "job file"):
            found = await api.offload.parse_job_file(who.user, who.token, body)
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
    sub = parse_body(body, who.user, api.upload_usable(who))
    if not who.may_see(sub.project):
        raise InvalidSpec("project", f"{who.user} is not a member of project {sub.project!r}")
    await _refuse_if_unrunnable(api, who, body, sub)
    tasks = array_tasks(body, sub)
    held = 0
    if not who.operator:
        caps = await run_in_threadpool(store.fair_use)
        api.rate.take(who.user, sub.project, caps)
        held = await run_in_threadpool(_storage_held, api, sub, max(1, len(tasks)),
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
            api.quota.settle(sub.project, held, _stored(made, held))
    api.changed()
    known, budget = api.budgets.remembered(sub.project)
    if not known:
        budget = await run_in_threadpool(api.budgets.over, sub.project)
    return _created(made, budget=budget)


async def _refuse_if_unrunnable(api: Api, who: Principal, body: Any,
                                sub: Submission) -> None:
    """Refuse what can never run (``rota.control.screen``: a container ``image`` where no
    node runs container images among the rest), and a ``workdir`` its owner may not use on
    the server."""
    await run_in_threadpool(api.screen.refuse_if_never_runs, sub,
                            "run.image" if "run" in body else "image")
    workdir = sub.run.get("workdir")
    if workdir is not None and api.workdir_refusal is not None:
        refusal = await run_in_threadpool(api.workdir_refusal, who.user, workdir)
        if refusal is not None:
            raise InvalidSpec("run.workdir" if "run" in body else "workdir", refusal)


def _storage_held(api: Api, sub: Submission, copies: int, cap: int | None) -> int:
    """The project's storage quota (``rota.api.storage``): the bytes the job will unpack,
    held until it is stored; ``StorageFull`` past the cap."""
    if api.uploads.root is None:
        return 0
    found = api.uploads.get(sub.run.get("upload") or "")
    adding = 0 if found is None else found.unpacked * copies
    return api.quota.admit(sub.project, adding, cap, "job")


def _stored(made: JobRecord | Replayed | list[JobRecord] | None,
            held: int) -> dict[str | None, int]:
    """What a submit that held ``held`` bytes of storage stored, by job id."""
    if isinstance(made, JobRecord):
        return {made.id: held}
    if isinstance(made, list) and made:
        return {rec.id: held // len(made) for rec in made}
    return {}


def _created(made: JobRecord | Replayed | list[JobRecord], replayed: bool = False,
             budget: dict[str, Any] | None = None) -> Response:
    """The answer to a submit: the job (an array: its first task, and the array), 201 when
    it was made now, 200 when an idempotency key named it (``Idempotent-Replayed: true``);
    with ``budget``, its project's budget, past its hard limit (``rota.api.budgetcheck``)."""
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
    if budget is not None:
        view["budget"] = budget
    return Response(json.dumps(view, allow_nan=False), 200 if replayed else 201,
                    headers={"Idempotent-Replayed": "true"} if replayed else None,
                    media_type="application/json")
