"""What ``rota up --backend slurm`` says about the cluster when it starts: its nodes and GPU
models, the placement mode, whether fractions can run, GPU types the site has not declared,
and the nodes rota cannot use."""

from __future__ import annotations

from typing import Iterable, Mapping

from rota.backends.slurm.config import SlurmConfig
from rota.backends.slurm.nodes import GPU, NodeReport, fractional_refusal
from rota.backends.slurm.records import SlurmNode


def describe(reports: Mapping[str, NodeReport], nodes: Iterable[SlurmNode], config: SlurmConfig,
             where: str) -> list[str]:
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
    return lines
