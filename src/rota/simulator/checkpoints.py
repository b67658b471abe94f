"""Periodic checkpoints in a replay: what an eviction loses, and when a run last saved.

Vocabulary:
- *interval* ``every``: a job saves a checkpoint each time its progress (seconds of run
  time, over all its attempts) reaches a multiple of ``every``;
- *saved progress*: the last multiple of ``every`` its progress reached; an eviction sends
  the job back to it, and the progress beyond it is *lost* (run again later);
- an attempt resumes from saved progress (a multiple of ``every``), so its checkpoints fall
  every ``every`` seconds of its run time, counted from when it resumed.

Invariants: saved progress <= progress, and progress - saved progress < ``every``.
"""

from __future__ import annotations

import math


def saved_progress(progress: float, every: float) -> float:
    """The progress an eviction at ``progress`` sends a job back to."""
    return math.floor(progress / every) * every


def last_checkpoint(resumed_at: float, now: float, every: float) -> float | None:
    """When the attempt that resumed at ``resumed_at`` last saved, by ``now``; None if it
    has not saved yet (an eviction then loses everything it ran)."""
    saves = math.floor(max(0.0, now - resumed_at) / every)
    return resumed_at + saves * every if saves else None
