"""rota's HTTP API: ``create_app(store, clock)`` returns a FastAPI application.

- ``errors``: the one table from error codes to HTTP statuses and the JSON error body;
- ``models``: request bodies (pydantic) and the JSON views of stored values;
- ``app``: authentication (bearer tokens) and the routes;
- ``offload``: archive checks and YAML reading in worker processes, bounded per user.
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
