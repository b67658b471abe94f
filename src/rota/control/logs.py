"""The API's view of job logs: a ``LogReader`` over the backend that ran the job.

The API reads logs through a function of the stored handle (``rota.api.logs.LogReader``) and
never parses handles or opens files itself. ``log_reader(backend)`` is that function: it reads
the handle back and asks ``backend.read_log``. A handle that cannot be read, or that another
backend wrote (the control plane was started with another one since), has no logs to give.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping

from rota.backends.base import Backend, Handle
from rota.backends.several import launched_by
from rota.core import InvalidSpec


def log_reader(backend: Backend) -> Callable[[Mapping[str, Any], int, str, int], Iterator[bytes]]:
    def read(stored: Mapping[str, Any], rank: int, stream: str, offset: int) -> Iterator[bytes]:
        try:
            handle = Handle.from_dict(stored)
            if not launched_by(backend, handle):
                return
            yield from backend.read_log(handle, rank, stream, offset)
        except InvalidSpec:
            return
    return read
