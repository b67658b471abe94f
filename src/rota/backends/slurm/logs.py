"""The output of rota's attempts on Slurm, on the filesystem the nodes share with rota.

Each replica's step writes ``rank-<r>.out`` and ``rank-<r>.err`` (the paths are in the
replica's handle ``ref``: ``stdout``, ``stderr``; ``attempts`` says where they live). Here:
reading one from an offset (``read_from``), when a launch last wrote output (``last_output``,
for idle reclamation: Slurm reports no GPU utilisation rota could read), and putting a line
from rota where the job's owner reads its output (``notify``: appended to each replica's
stderr file).
"""

from __future__ import annotations

import os

from rota.backends.base import Handle
from rota.backends.logfiles import STREAMS, read_from

__all__ = ["STREAMS", "last_output", "read_from"]

def last_output(handle: Handle) -> float | None:
    """When any replica's output file last grew (seconds since the epoch); None: none yet."""
    times = []
    for replica in handle.replicas:
        for stream in STREAMS:
            path = replica.ref.get(stream)
            if not isinstance(path, str):
                continue
            try:
                times.append(os.stat(path).st_mtime)
            except OSError:
                continue
    return max(times, default=None)


def notify(handle: Handle, message: str) -> None:
    """Append ``[rota] message`` to every replica's stderr file (those that exist)."""
    for replica in handle.replicas:
        path = replica.ref.get("stderr")
        if not isinstance(path, str) or not os.path.exists(path):
            continue
        try:
            with open(path, "a") as f:
                f.write(f"[rota] {message}\n")
        except OSError:
            continue
