"""Composition: a running control plane built from a validated configuration.

``rota up`` parses its options into a ``ServerConfig`` and calls ``open_control_plane``; tests and
deployments call the same function. This package is the only one that knows every part (store,
backend, control loop, accounts, API) and wires them together; the parts know nothing of each
other beyond their contracts.
"""

from rota.backends.base import BackendError  # what a backend that cannot start raises
from rota.server.compose import ControlPlane, ServerConfig, open_control_plane
from rota.server.secure import private_umask, secure_data_dir
from rota.store.lease import LeaseHeld  # what open_control_plane raises when another holds it

__all__ = ["BackendError", "ControlPlane", "LeaseHeld", "ServerConfig", "open_control_plane", "private_umask",
           "secure_data_dir"]
