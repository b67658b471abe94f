"""rota's HTTP API: ``create_app(store, clock)`` returns a FastAPI application.

- ``errors``: the one table from error codes to HTTP statuses and the JSON error body;
- ``models``: request bodies (pydantic) and the JSON views of stored values;
- ``app``: authentication (bearer tokens) and the routes.
"""

from rota.api.app import create_app

__all__ = ["create_app"]
