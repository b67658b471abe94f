"""Operators take access away (``rota.store.access``); every route needs an operator token:

- ``POST /v1/users/{name}/disable`` and ``/enable``: every token of the user is refused (401)
  from the next request on, or accepted again.
- ``DELETE /v1/users/{name}/tokens``: revoke every token of the user at once.
- ``DELETE /v1/users/{name}/projects/{project}?jobs=cancel|keep``: end a membership; the
  user's pending jobs of the project are cancelled or kept, as ``jobs`` says (required: the
  operator chooses).

The control loop is woken (``changed``) when jobs were cancelled.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Callable

from fastapi import Depends, FastAPI, Query

from rota.store import Principal, Store


class PendingJobs(str, Enum):
    CANCEL = "cancel"
    KEEP = "keep"


def add_access_routes(app: FastAPI, store: Store, operator: Callable[..., Principal],
                      changed: Callable[[], None]) -> None:
    @app.post("/v1/users/{name}/disable")
    def disable(name: str, _: Principal = Depends(operator)) -> dict[str, Any]:
        store.set_disabled(name, True)
        return {"name": name, "disabled": True}

    @app.post("/v1/users/{name}/enable")
    def enable(name: str, _: Principal = Depends(operator)) -> dict[str, Any]:
        store.set_disabled(name, False)
        return {"name": name, "disabled": False}

    @app.delete("/v1/users/{name}/tokens")
    def revoke_all(name: str, _: Principal = Depends(operator)) -> dict[str, Any]:
        return {"name": name, "revoked": store.revoke_tokens(name)}

    @app.delete("/v1/users/{name}/projects/{project}")
    def remove_member(name: str, project: str, jobs: PendingJobs = Query(...),
                      _: Principal = Depends(operator)) -> dict[str, Any]:
        pending = store.remove_member(name, project, cancel=jobs is PendingJobs.CANCEL)
        if pending and jobs is PendingJobs.CANCEL:
            changed()
        return {"name": name, "project": project, "pending_jobs": pending,
                "jobs": jobs.value}
