"""Scheduling reasons as the CLI tells them: ``rota.core.wording`` (re-exported here) turns a
reason into a sentence; ``sentence_among`` (``rota.core.jobwords``, shared with the web
dashboard) tells a capacity reason (``resources``, ``gang``)
together with the nodes that take no new job (cordoned, draining, drained, unavailable), which
a count of free CPUs or GPUs alone hides: on a cluster whose every node is drained, the drain
is the reason.
"""

from __future__ import annotations

from rota.core.jobwords import closed_nodes, sentence_among
from rota.core.wording import (
    amount, duration, hint, normalised, reason_json, sentence,
)

__all__ = ["amount", "closed_nodes", "duration", "hint", "normalised", "reason_json",
           "sentence", "sentence_among"]
