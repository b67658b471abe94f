"""rota's HTTP client: where the server is (``credentials``), how to talk to it (``http``,
through ``transport``) and what can go wrong (``errors``).

The CLI never touches the store: every command goes through ``Client`` to the API; the fast
commands of ``rota.cli.fast`` go through ``rota.client.bare``, which sends through the same
``transport`` and loads nothing of rota's domain model (``rota.core``) unless a request fails.
So this package imports its modules when a name is first asked for, not when it is imported.
"""

from __future__ import annotations

from importlib import import_module


_HOMES = {"ApiError": "errors", "ConnectionLost": "errors", "Unreachable": "errors",
          "Untrusted": "errors", "Client": "http",
          "Credentials": "credentials", "credentials_path": "credentials",
          "discover": "credentials", "save": "credentials"}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"rota.client.{home}"), name)
