"""The application factory: ``create_app`` builds the API's state (``rota.api.state``), the
middleware and the error handlers, and includes the routers, one module per resource (listed in
``rota.api``).

Every route under ``/v1`` needs ``Authorization: Bearer <token>`` (401 otherwise;
``rota.api.auth``); the web dashboard under ``/ui/`` (``rota.api.dashboard``) takes the token
from its login form instead and reads through the same functions (``rota.api.reads``). An
operator sees and acts on everything; a member sees and acts only on jobs of its user's
projects, and a job of another project answers 404, exactly like a job that does not exist, so
ids reveal nothing. Time (usage decay) comes from the injected ``clock``; the store stamps rows
with its own.
"""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from typing import Callable

from fastapi import FastAPI

from rota.api import (access_routes, accounting_routes, admin_routes, dashboard,
                      dataset_routes, errors,
                      gateway, interact_routes, io_routes, jobs_routes, metrics_routes,
                      service_routes, submit_routes, users_routes)
from rota.api.bodylimit import MAX_BODY_BYTES, BodyLimit
from rota.api.budgetcheck import HardBudgets
from rota.api.fairuse import SubmitRate
from rota.api.logs import LogReader, no_reader
from rota.api.offload import Offload
from rota.api.reads import Reads
from rota.api.state import Api
from rota.api.storage import StorageQuota
from rota.api.uploads import DEFAULT_MAX_BYTES, Uploads
from rota.control.loop import HANDOFF_WAIT_S
from rota.control.screen import Screen
from rota.control.serving import Serving
from rota.control.sessions import Sessions
from rota.core.archive import MAX_UNPACKED_BYTES
from rota.store import Store


def create_app(store: Store, clock: Callable[[], float] | None = None,
               data_dir: str | Path | None = None, on_change: Callable[[], None] | None = None,
               max_upload_bytes: int = DEFAULT_MAX_BYTES,
               max_unpacked_bytes: int = MAX_UNPACKED_BYTES, log_poll_s: float = 0.25,
               read_log: LogReader = no_reader,
               workdir_refusal: Callable[[str, str], str | None] | None = None,
               on_touch: Callable[[str], None] = lambda job_id: None,
               metrics: Callable[[], bytes] | None = None,
               serving: Serving | None = None,
               on_exit: Callable[[str, int, int, tuple[int, ...] | None],
                                 Future[None] | None] | None = None,
               exit_wait_s: float = HANDOFF_WAIT_S,
               offload: Offload | None = None,
               role: Callable[[], dict[str, object]] | None = None,
               sessions: Sessions | None = None) -> FastAPI:
    """``data_dir`` holds uploads (none without it); ``on_change`` is called after a job is
    submitted or cancelled, to wake the control loop; an upload is refused past
    ``max_upload_bytes`` as sent and ``max_unpacked_bytes`` unpacked; ``read_log`` reads jobs' logs from the
    backend that runs them (``rota.api.logs``); ``workdir_refusal(user, path)`` says why a job
    of ``user`` may not run in directory ``path`` of the server (None: it may), so that a
    submit naming a directory its owner cannot use is refused at once; ``on_touch(job_id)``
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
    ``app.state.offload`` for its owner to ``close``; ``role`` says whether this control
    plane leads or stands by, and who leads (``GET /v1/control-plane``; without it: a
    leader holding no lease, as an API composed with its own loop is); ``sessions`` opens
    commands and ports inside running jobs (``rota.api.interact_routes``; without it, every
    session is refused)."""
    clock = clock or store.clock
    uploads = Uploads(data_dir, max_upload_bytes, max_unpacked_bytes)
    offload = offload or Offload()
    quota = StorageQuota(Path(data_dir or "."), store.storage_rows, uploads.all,
                         lambda: {u.name: frozenset(u.projects) for u in store.user_records()})
    api = Api(store=store, clock=clock, reads=Reads(store, clock, on_touch), uploads=uploads,
              offload=offload, quota=quota, rate=SubmitRate(), screen=Screen(store),
              read_log=read_log, log_poll_s=log_poll_s, on_change=on_change,
              workdir_refusal=workdir_refusal,
              on_exit=on_exit, exit_wait_s=exit_wait_s, metrics=metrics, serving=serving,
              budgets=HardBudgets(store, clock), role=role or _no_lease, sessions=sessions)
    app = FastAPI(title="rota", version="0.1.0")
    app.state.api, app.state.offload = api, offload
    errors.install(app)
    app.add_middleware(BodyLimit, limit_of=lambda method, path: (
        max_upload_bytes if (method, path) == ("POST", "/v1/uploads") else MAX_BODY_BYTES))
    for router in ROUTERS:
        app.include_router(router)
    if metrics is not None:
        app.include_router(metrics_routes.router)
    dashboard.install_dashboard(app)  # /ui/: the same reads, for a browser
    app.include_router(dashboard.router)
    if serving is not None:
        app.include_router(service_routes.router)
        app.include_router(gateway.router)
        gateway.install_gateway(app, api)
    return app


def _no_lease() -> dict[str, object]:
    return {"role": "leader", "holder": None, "leader": None, "lease_left_s": None,
            "leading_since": None}


ROUTERS = (users_routes.router, access_routes.router, accounting_routes.router,
           submit_routes.router, jobs_routes.router, io_routes.router, admin_routes.router,
           interact_routes.router, dataset_routes.router)
