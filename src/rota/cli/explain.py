"""Scheduling reasons as the CLI tells them: ``rota.core.wording`` (re-exported here) turns a
reason into a sentence; ``sentence_among`` tells a capacity reason (``resources``, ``gang``)
together with the nodes that take no new job (cordoned, draining, drained, unavailable), which
a count of free CPUs or GPUs alone hides: on a cluster whose every node is drained, the drain
is the reason.
"""

from __future__ import annotations

from typing import Any

from rota.core import Reason
from rota.core.wording import (
    CAPACITY, amount, duration, hint, normalised, reason_json, sentence,
)

__all__ = ["amount", "closed_nodes", "duration", "hint", "normalised", "reason_json",
           "sentence", "sentence_among"]


def closed_nodes(nodes: list[dict[str, Any]]) -> list[str]:
    """``gpu-0 is drained (bad fan)`` for each node (as ``GET /v1/nodes`` gives them) that
    takes no new job."""
    from rota.cli.remote import node_state
    return [f"{n['name']} is {node_state(n)}" for n in nodes
            if node_state(n) != "ok"]


def sentence_among(reason: Reason, nodes: list[dict[str, Any]]) -> str:
    """``sentence(reason)``, told with the nodes that take no new job (module docstring)."""
    closed = closed_nodes(nodes)
    if reason.code not in CAPACITY or not closed:
        return sentence(reason)
    if len(closed) == len(nodes):
        return f"No node takes new jobs: {'; '.join(closed)}."
    return f"{sentence(reason)} Not counted, as they take no new job: {'; '.join(closed)}."
