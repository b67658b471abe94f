"""Composition: a running control plane built from a validated configuration.

``rota up`` parses its options into a ``ServerConfig`` and calls ``open_control_plane``; tests and
deployments call the same function. This package is the only one that knows every part (store,
backend, control loop, accounts, API) and wires them together; the parts know nothing of each
other beyond their contracts.

- ``compose``: ``ServerConfig`` and ``open_control_plane``: data directory, lock, store and
  lease, first start, backend, accounts, loop and API, in order; the ``ControlPlane`` it returns;
- ``factory``: ``BackendFactory``, what a backend tells composition about itself (its ``rota up``
  options, this machine as a node, whether jobs run here, how the backend is built);
- ``backends``: the registry of backend factories by the name ``rota up --backend`` takes;
- ``factories``: the factories of rota's own backends, one module each;
- ``secure``: what a control plane keeps to itself: the private umask and the permissions of
  its data directory;
- ``certs``: HTTPS beyond loopback: a certificate authority and certificate made for the
  control plane, and the checks of one given to it;
- ``leaks``: tokens found in the control plane's log revoked when it starts;
- ``retention``: what the control plane removes from its data directory (ended jobs' working
  directories and logs, old uploads) and from its store (old idempotency keys), and when;
- ``hidepid``: whether other tenants can read a job's command line (``/proc``'s ``hidepid``).
"""

from rota.backends.base import BackendError  # what a backend that cannot start raises
from rota.server.compose import ControlPlane, ServerConfig, open_control_plane
from rota.server.secure import private_umask, secure_data_dir
from rota.store.lease import LeaseHeld  # what open_control_plane raises when another holds it

__all__ = ["BackendError", "ControlPlane", "LeaseHeld", "ServerConfig", "open_control_plane", "private_umask",
           "secure_data_dir"]
