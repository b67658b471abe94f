"""Services over HTTP: ``POST /v1/services`` (a service file as JSON, ``rota serve``),
``GET /v1/services`` and ``GET /v1/services/{name}`` (with what the serving runtime sees now:
replicas, requests per second, queue, cold starts), ``DELETE /v1/services/{name}`` (its replicas
are stopped). A member creates services in its own projects and sees only theirs; another
project's service answers 404 as one that does not exist.
"""

from __future__ import annotations

from typing import Any, Callable

from fastapi import Body, Depends, FastAPI
from fastapi.concurrency import run_in_threadpool

from rota.api.submit import parse_service
from rota.control.serving import Serving
from rota.core import InvalidSpec
from rota.store import NotFound, Principal, Store
from rota.store.services import ServiceRecord


def add_service_routes(app: FastAPI, store: Store, serving: Serving,
                       principal: Callable[..., Any],
                       upload_usable: Callable[[Principal], Callable[[str], bool]],
                       screen: Callable[[Any], None]) -> None:
    def view(record: ServiceRecord, views: dict[str, dict[str, Any]] | None = None
             ) -> dict[str, Any]:
        """What the runtime sees of the service (``views``: ``serving.views()`` when read
        already), else its stored settings with nothing running yet."""
        live = (serving.views() if views is None else views).get(record.name)
        if live is not None:
            return live
        s = record.settings
        return {"name": record.name, "project": record.project, "queue": record.queue,
                "user": record.user, "models": list(s.models),
                "replicas": {"min": s.min_replicas, "max": s.max_replicas, "desired": 0,
                             "live": 0, "ready": 0},
                "target": s.target, "idle_s": s.idle_s, "in_flight": 0, "queued": 0,
                "requests": 0, "requests_per_s": 0.0, "cold_starts": 0, "jobs": []}

    def visible(name: str, who: Principal) -> ServiceRecord:
        record = store.services.get(name)
        if not who.may_see(record.project):
            raise NotFound("service", name)
        return record

    @app.post("/v1/services", status_code=201)
    async def create(body: Any = Body(...), who: Principal = Depends(principal)) -> dict:
        name, settings, template = parse_service(body, who.user, upload_usable(who))
        if not who.may_see(template.project):
            raise InvalidSpec("project", f"{who.user} is not a member of project "
                              f"{template.project!r}")
        await run_in_threadpool(screen, template)  # refuses what can never run
        record = await run_in_threadpool(store.services.create, name, settings, template,
                                         not who.operator)
        serving.created(record)
        return view(record)

    @app.get("/v1/services")
    def services(who: Principal = Depends(principal)) -> list[dict[str, Any]]:
        views = serving.views()
        return [view(r, views) for r in store.services.list() if who.may_see(r.project)]

    @app.get("/v1/services/{name}")
    def service(name: str, who: Principal = Depends(principal)) -> dict[str, Any]:
        return view(visible(name, who))

    @app.delete("/v1/services/{name}")
    def delete(name: str, who: Principal = Depends(principal)) -> dict[str, Any]:
        visible(name, who)
        record = store.services.remove(name)
        serving.deleted(name)
        return {"name": record.name, "deleted": True}
