"""What a backend tells composition about itself: ``BackendFactory``.

A control plane is composed the same way whatever runs its jobs; what differs per backend is
asked of its factory, never decided from its name:

- ``flags``: the ``rota up`` options only it reads, each with its default. An option of
  another backend given a value other than its default is refused, naming the backend it
  belongs to (``rota.server.backends.check_flags``).
- ``options(values)``: those options checked and turned into ``ServerConfig.backend_options``;
  ``InvalidSpec`` names the option (``--kube-default-image``) and the reason.
- ``inventory(values)``: this machine as a node. Only a backend whose jobs run here probes its
  GPUs (NVML); one whose nodes are elsewhere describes this machine without touching them.
- ``runs_here``: jobs run on this machine, so this machine is registered as a node, its GPUs
  are watched and measured, jobs' working directories are in the data directory, and jobs
  reach the API on loopback.
- ``fields``: the fields of the errors its backend raises while built, by the option to name.
- ``build(config)``: the backend, from the server configuration; imports the backend's
  modules only then, so that the SDK of a backend nobody uses is never loaded.
- ``describe(plane)``: the lines ``rota up`` prints about where jobs run.
- ``attach(loop, config)``, where a factory has it: its backend's own part of the control
  loop, added once the loop is built (the local backend's MIG plan).
- ``standby_refusal(config)``: why a control plane of this backend may not stand by
  (``rota.control.standby``) when another one leads its database, or None when it may: a
  standby must be able to adopt every job the leader started, from another machine.

A factory is registered by name in ``rota.server.backends``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Protocol

from rota.backends.base import Backend
from rota.core.shortforms import counted
from rota.control.setup import Inventory

if TYPE_CHECKING:
    from rota.server.compose import ControlPlane, ServerConfig


class BackendFactory(Protocol):
    name: str
    runs_here: bool
    flags: Mapping[str, Any]
    fields: Mapping[str, str]

    def options(self, values: Mapping[str, Any]) -> dict[str, Any]: ...

    def inventory(self, values: Mapping[str, Any]) -> Inventory: ...

    def build(self, config: ServerConfig) -> Backend: ...

    def describe(self, plane: ControlPlane) -> list[str]: ...

    def standby_refusal(self, config: ServerConfig) -> str | None: ...


def nodes_line(plane: ControlPlane) -> str:
    """Where jobs run, for a backend whose nodes are elsewhere: how many it reports, how many
    of them are usable, their GPUs, and the options it was given."""
    config = plane.config
    nodes = plane.loop.backend.inventory()
    gpus = sum(len(n.devices) for n in nodes)
    usable = sum(1 for n in nodes if not n.problem)
    return (f"  backend {config.backend}: {counted(len(nodes), 'node')}, {usable} usable, "
            f"{counted(gpus, 'GPU')} "
            f"({', '.join(f'{k}={v}' for k, v in sorted(config.backend_options.items()))})")
