"""What ``rota up --backend slurm`` says about the cluster when it starts: its nodes and GPU
models, the placement mode, whether fractions can run, GPU types the site has not declared,
the nodes rota cannot use, and nodes that cannot reach the API at the URL jobs are given
(``ROTA_URL``: a loopback address where some node is another machine, by its ``NodeAddr``).
Such a node's jobs still run; they cannot report their ends (rota learns them from ``squeue``,
seconds later per GPU turn) or call the API (``rota checkpoint``)."""

from __future__ import annotations

import ipaddress
import socket
from typing import Iterable, Mapping
from urllib.parse import urlsplit

from rota.backends.slurm.config import SlurmConfig
from rota.backends.slurm.nodes import GPU, NodeReport, fractional_refusal
from rota.backends.slurm.records import SlurmNode


def describe(reports: Mapping[str, NodeReport], nodes: Iterable[SlurmNode], config: SlurmConfig,
             where: str, jobs_url: str | None = None) -> list[str]:
    models: dict[str, int] = {}
    for r in reports.values():
        for d in r.node.devices:
            models[d.model] = models.get(d.model, 0) + 1
    gpus = ", ".join(f"{n} x {m}" for m, n in models.items()) or "no GPUs"
    mode = ("rota chooses the nodes" if config.pinned else
            "rota admits and orders, Slurm chooses the nodes")
    refusal = fractional_refusal(reports.values())
    lines = [f"  Slurm: {len(reports)} nodes from {where}: {gpus}",
             f"  placement: {mode}" + (f"; partition {config.partition}"
                                       if config.partition else ""),
             "  fractional GPUs: " + ("on Slurm shards" if refusal is None else
                                      "refused, no schedulable node has shard GRES")]
    undeclared = sorted({g.type or "untyped" for n in nodes for g in n.gres if g.name == GPU} -
                        {t or "untyped" for t in config.gpu_types})
    if undeclared:
        lines.append(f"  warning: Slurm GPU types without a model: {', '.join(undeclared)}; "
                     f"their nodes take no jobs until declared, e.g. --slurm-gpu-types "
                     f"{undeclared[0]}=MODEL-<memory>GB")
    blocked = sorted(n for n, r in reports.items() if r.reason)
    if blocked:
        lines.append(f"  unavailable: {', '.join(blocked)} (rota nodes says why)")
    here = {"localhost", socket.gethostname().lower(), socket.getfqdn().lower()}
    elsewhere = sorted(n.name for n in nodes
                       if n.address.lower() not in here and not _loopback(n.address))
    if jobs_url is not None and elsewhere and _loopback(urlsplit(jobs_url).hostname or ""):
        lines.append(f"  warning: jobs are given the API at {jobs_url}, which "
                     f"{_listed(elsewhere)} cannot reach: their jobs run, but cannot report "
                     "their ends (rota learns them from squeue, seconds later) or call rota; "
                     "start rota up with --host set to an address the nodes reach, or "
                     "0.0.0.0 (docs/slurm.md)")
    return lines


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:3])
    return f"nodes {shown}" + (f" and {len(names) - 3} more" if len(names) > 3 else "")
