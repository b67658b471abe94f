"""Services over HTTP: ``POST /v1/services`` (a service file as JSON, ``rota serve``),
``GET /v1/services`` and ``GET /v1/services/{name}`` (with what the serving runtime sees now:
replicas, requests per second, queue, cold starts), ``DELETE /v1/services/{name}`` (its replicas
are stopped). A member creates services in its own projects and sees only theirs; another
project's service answers 404 as one that does not exist.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Depends
from fastapi.concurrency import run_in_threadpool

from rota.api.auth import principal
from rota.api.state import Api, api_of
from rota.api.submit import parse_service
from rota.control.serving import Serving
from rota.core import InvalidSpec
from rota.store import NotFound, Principal, Store
from rota.store.services import ServiceRecord

router = APIRouter()


def _serving(api: Api) -> Serving:
    """The serving runtime: the router is included only where there is one."""
    assert api.serving is not None
    return api.serving


def view(serving: Serving | None, record: ServiceRecord,
         views: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """What the runtime sees of the service (``views``: ``serving.views()`` when read
    already), else its stored settings with nothing running yet."""
    if views is None:
        views = {} if serving is None else serving.views()
    live = views.get(record.name)
    if live is not None:
        return live
    s = record.settings
    return {"name": record.name, "project": record.project, "queue": record.queue,
            "user": record.user, "models": list(s.models),
            "replicas": {"min": s.min_replicas, "max": s.max_replicas, "desired": 0,
                         "live": 0, "ready": 0},
            "target": s.target, "idle_s": s.idle_s, "headroom": s.headroom,
            "load_s": s.load_s, "in_flight": 0, "queued": 0,
            "requests": 0, "requests_per_s": 0.0, "cold_starts": 0, "jobs": []}


def visible(store: Store, name: str, who: Principal) -> ServiceRecord:
    record = store.services.get(name)
    if not who.may_see(record.project):
        raise NotFound("service", name)
    return record


@router.post("/v1/services", status_code=201)
async def create(body: Any = Body(...), who: Principal = Depends(principal),
                 api: Api = Depends(api_of)) -> dict:
    name, settings, template = parse_service(body, who.user, api.upload_usable(who))
    if not who.may_see(template.project):
        raise InvalidSpec("project", f"{who.user} is not a member of project "
                          f"{template.project!r}")
    await run_in_threadpool(api.screen.refuse_if_never_runs, template)  # what can never run
    record = await run_in_threadpool(api.store.services.create, name, settings, template,
                                     not who.operator)
    serving = _serving(api)
    serving.created(record)
    return view(serving, record)


@router.get("/v1/services")
def services(who: Principal = Depends(principal),
             api: Api = Depends(api_of)) -> list[dict[str, Any]]:
    return listed(api, who)


def listed(api: Api, who: Principal) -> list[dict[str, Any]]:
    """The services ``who`` may see, as the serving runtime sees them now (as stored, with
    nothing running, where this control plane runs none: a standby's dashboard)."""
    views = {} if api.serving is None else api.serving.views()
    return [view(api.serving, r, views) for r in api.store.services.list()
            if who.may_see(r.project)]


@router.get("/v1/services/{name}")
def service(name: str, who: Principal = Depends(principal),
            api: Api = Depends(api_of)) -> dict[str, Any]:
    return view(_serving(api), visible(api.store, name, who))


@router.delete("/v1/services/{name}")
def delete(name: str, who: Principal = Depends(principal),
           api: Api = Depends(api_of)) -> dict[str, Any]:
    visible(api.store, name, who)
    record = api.store.services.remove(name)
    _serving(api).deleted(name)
    return {"name": record.name, "deleted": True}
