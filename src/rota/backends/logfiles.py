"""Log files as backends that write them keep them (the local backend's replica directories,
the Slurm backend's shared data directory): the two streams, and reading one from an offset."""

from __future__ import annotations

from typing import Iterator

LOG_CHUNK = 64 * 1024
STREAMS = ("stdout", "stderr")


def read_from(path: object, offset: int) -> Iterator[bytes]:
    """The bytes of the file at ``path`` from ``offset`` on; nothing if it does not exist (or
    ``path`` is not a path: a handle's ``ref`` read as it was stored)."""
    if not isinstance(path, str):
        return
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            while chunk := f.read(LOG_CHUNK):
                yield chunk
    except FileNotFoundError:
        return
