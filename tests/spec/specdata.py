"""Builders for the file-format tests: a small valid cluster and jobs as parsed YAML, to vary."""

from __future__ import annotations

import copy
from typing import Any


def base_cluster() -> dict[str, Any]:
    """Two 8x H100 nodes, one 2x L4 node, flavours h100/l4, two queues in a cohort."""
    return {
        "nodes": [
            {"name": "h", "count": 2, "cpu": 64, "memory": "512Gi",
             "gpus": {"count": 8, "model": "H100-80GB", "memory": "80Gi", "nvlink": "pairs"}},
            {"name": "l4", "cpu": 16, "memory": "64Gi",
             "gpus": [{"index": 0, "model": "L4", "memory": "24Gi"},
                      {"index": 1, "model": "L4", "memory": "24Gi"}]},
        ],
        "flavors": {"h100": "*H100*", "l4": ["L4"]},
        "queues": [
            {"name": "research", "cohort": "lab",
             "quota": {"h100": {"nominal": {"gpu": 8}, "borrowing_limit": {"gpu": 4}}}},
            {"name": "product", "cohort": "lab",
             "quota": {"h100": {"nominal": {"gpu": 8}, "lending_limit": {"gpu": 2}},
                       "l4": {"nominal": {"gpu": 2}}}},
        ],
        "projects": [{"name": "vision", "weight": 2}, {"name": "llm"}],
    }


def base_job(name: str = "train", **changes: Any) -> dict[str, Any]:
    job = {"name": name, "project": "vision", "queue": "research",
           "resources": {"cpu": 4, "memory": "32Gi", "gpu": 2}}
    job.update(changes)
    return job


def running(name: str = "run", node: str = "h-0", gpus=(0, 1), **changes: Any) -> dict[str, Any]:
    job = base_job(name, placement=[{"node": node, "gpus": list(gpus)}], started_at=100)
    job.update(changes)
    return job


def setin(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``data`` with ``path`` (``queues.0.quota.h100``) set to ``value``."""
    data = copy.deepcopy(data)
    *head, last = path.split(".")
    target: Any = data
    for part in head:
        target = target[int(part)] if isinstance(target, list) else target[part]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return data
