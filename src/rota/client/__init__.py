"""rota's HTTP client: where the server is (``credentials``), how to talk to it (``http``,
through ``transport``) and what can go wrong (``errors``).

The CLI never touches the store: every command goes through ``Client`` to the API; the fast
commands of ``rota.cli.fast`` go through ``rota.client.bare``, which sends through the same
``transport`` and loads nothing of rota's domain model (``rota.core``) unless a request fails.
So this package imports its modules when a name is first asked for, not when it is imported.
Of the rest of rota it imports only ``rota.core``'s errors: at the top of ``http``, and
elsewhere only where a request or a setting fails.

- ``credentials``: where the CLI finds the server and its token (environment, then the
  credentials file ``rota up`` and ``rota login`` write);
- ``config``: a user's defaults for new jobs: the project and queue a job goes to when none
  is named;
- ``http``: ``Client``, one method per API route, JSON in and out;
- ``errors``: what can go wrong (``ApiError``, ``Unreachable``, ``ConnectionLost``,
  ``Untrusted``) and the check of an error answer, loaded only when a request fails;
- ``transport``: HTTP/1.1 to one server on a socket, without ``http.client``: keep-alive,
  JSON, streamed answers and chunked upload bodies, TLS against a pinned CA, and the one
  retry loop of submits;
- ``streams``: sessions inside running jobs over WebSocket (exec, shell, forward), with the
  same token and TLS trust;
- ``bare``: the fast commands' client, on the same transport;
- ``pinning``: a server's own certificate authority trusted on first contact, as ``ssh``
  trusts a host key.
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
