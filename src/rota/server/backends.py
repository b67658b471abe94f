"""Which backend a control plane drives, built from its configuration.

``BACKENDS`` maps the name ``rota up --backend`` takes to a factory ``(config) -> Backend``;
each backend's factory lives with the backend and is imported only when chosen, so that the
SDK of a backend nobody uses is never loaded. The local backend runs jobs on this machine;
``ServerConfig.inventory`` describes it. The Slurm backend drives the cluster ``SLURM_CONF``
names, with ``ServerConfig.backend_options`` (``rota.backends.slurm.config``). The kubernetes
backend schedules Pods on a cluster (``rota.backends.kube``), with the options of
``ServerConfig.backend_options`` (the fields of ``KubeConfig``); the rota user of offered Pods
defaults to the operator a first start makes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from rota.backends.base import Backend
from rota.core import InvalidSpec

if TYPE_CHECKING:
    from rota.server.compose import ServerConfig


def _local(config: ServerConfig) -> Backend:
    from rota.backends.cgroups import DEFAULT_PIDS
    from rota.backends.local import LocalBackend
    options = config.backend_options
    return LocalBackend(config.data_dir, node=config.inventory.node, nvml=config.inventory.nvml,
                        job_pids=int(options.get("job_pids", DEFAULT_PIDS)),
                        job_disk_mib=options.get("job_disk_mib"))


def _slurm(config: ServerConfig) -> Backend:
    from rota.backends.slurm.config import build
    return build(config.data_dir, config.backend_options)


def _kubernetes(config: ServerConfig) -> Backend:
    from rota.backends.kube.backend import KubeBackend, KubeConfig
    from rota.control.setup import operator_name
    options = {"pod_user": operator_name(), **config.backend_options}
    return KubeBackend(KubeConfig(**options))


BACKENDS: dict[str, Callable[[ServerConfig], Backend]] = {
    "local": _local,
    "slurm": _slurm,
    "kubernetes": _kubernetes,
}


def build_backend(config: ServerConfig) -> Backend:
    factory = BACKENDS.get(config.backend)
    if factory is None:
        raise InvalidSpec("backend", f"unknown backend {config.backend!r}; known: "
                          f"{', '.join(sorted(BACKENDS))}")
    return factory(config)
