"""rota's HTTP API: ``create_app(store, clock)`` returns a FastAPI application.

The application and what its routes share:

- ``app``: ``create_app``: the API's state, middleware and error handlers, and the routers;
- ``state``: ``Api``, what every router reads (store, reads, uploads, hooks of the control loop),
  and the dependency ``api_of`` that gives it;
- ``auth``: bearer tokens: the dependencies ``principal`` and ``operator``, job tokens' reach;
- ``errors``: the one table from error codes to HTTP statuses and the JSON error body;
- ``bodylimit``: the limit on request bodies, enforced before and while they are read.

The routers, one per resource (each a module-level ``router``):

- ``users_routes``: who the caller is, projects, users and memberships;
- ``access_routes``: tokens, and disabling users, revoking their tokens, ending memberships;
- ``submit_routes``: ``POST /v1/jobs``, a job file checked, capped and stored;
- ``jobs_routes``: listing and showing jobs, their events, hold, release, cancel, and what
  a running attempt reports (checkpoint, exit);
- ``io_routes``: replica logs and uploads;
- ``interact_routes``: WebSocket sessions inside running jobs: exec and port forwarding;
- ``admin_routes``: queues, fair-use caps, deleting projects, node cordon and drain;
- ``accounting_routes``: accounting, project budgets and decayed usage;
- ``metrics_routes``: ``GET /metrics`` for Prometheus (only with ``metrics``);
- ``service_routes``: services (only with a serving runtime);
- ``dataset_routes``: datasets, what nodes' caches hold of them, quotas on cached bytes;
- ``gateway``: the OpenAI-compatible gateway: ``/v1/models`` and the raw ASGI POST routes;
- ``dashboard``: the web pages under ``/ui/`` (a package: sessions, shapes, templates).

What the routes are made of:

- ``reads``: what reading routes and the dashboard answer, for a caller;
- ``views``: JSON views of the cluster that need the live jobs (GPU allocations);
- ``models``: request bodies (pydantic) and the JSON views of stored values;
- ``submit``: the job-file format and the ``run`` mapping stored with a job;
- ``jobfile``: a job file as it is on disk, with the command line's choices;
- ``accounting``: times as the API reads and writes them, and a project's budget view;
- ``budgetcheck``: whether a new job's project is past its hard budget, for the submit's
  answer (remembered a few seconds);
- ``fairuse``: members' submit rate, and the fingerprint of idempotent submits;
- ``storage``: a project's storage quota;
- ``uploads``: uploaded working directories;
- ``logs``: reading one replica's stdout or stderr from its backend;
- ``offload``: archive checks and YAML reading in worker processes, bounded per user;
- ``offwork``: what those worker processes run (imported without FastAPI);
- ``upstream``: the gateway's HTTP client to model replicas.
"""

from typing import Any

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    """``create_app``, imported on first use: a worker process of ``rota.api.offload`` imports
    ``rota.api.offwork`` alone, without FastAPI."""
    if name == "create_app":
        from rota.api.app import create_app
        return create_app
    raise AttributeError(f"module 'rota.api' has no attribute {name!r}")
