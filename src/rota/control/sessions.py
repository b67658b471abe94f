"""The API's way inside running jobs: ``Sessions`` opens interactive streams (``Channel``s:
``rota.backends.base``) through the backend that runs a job, from the handle the store keeps.

The API hands over a job's stored handle, never parses it. A backend without the capability
(``Capabilities.interactive``), or a handle another backend wrote, is refused with a
``BackendError`` whose code is ``unsupported``. Each channel opened counts as interaction for
idle reclamation (``rota.control.idle``: ``opened``) until it is closed.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Mapping, Sequence

from rota.backends.base import Backend, BackendError, Channel, Handle, Interactive
from rota.backends.several import launched_by

__all__ = ["BackendError", "Channel", "Sessions"]  # the API sees backends only through here


class Sessions:
    def __init__(self, backend: Backend, opened: Callable[[str], None] = lambda job: None,
                 closed: Callable[[str], None] = lambda job: None) -> None:
        self.backend, self._opened, self._closed = backend, opened, closed

    def open_exec(self, stored: Mapping[str, Any], rank: int, argv: Sequence[str],
                  tty: bool) -> Channel:
        handle, backend = self._reach(stored)
        return self._counted(handle.job_id, backend.open_exec(handle, rank, argv, tty))

    def open_port(self, stored: Mapping[str, Any], rank: int, port: int) -> Channel:
        handle, backend = self._reach(stored)
        return self._counted(handle.job_id, backend.open_port(handle, rank, port))

    def _reach(self, stored: Mapping[str, Any]) -> tuple[Handle, Interactive]:
        backend = self.backend
        if not backend.capabilities.interactive or not isinstance(backend, Interactive):
            raise BackendError("unsupported", f"the {backend.name} backend cannot reach inside "
                                              "running jobs: rota exec, shell and forward need "
                                              "a backend that can (local, slurm)")
        handle = Handle.from_dict(stored)
        if not launched_by(backend, handle):
            raise BackendError("unsupported", f"job {handle.job_id} was launched by the "
                                              f"{handle.backend} backend, and this control "
                                              f"plane runs the {backend.name} backend")
        return handle, backend

    def _counted(self, job_id: str, channel: Channel) -> Channel:
        self._opened(job_id)
        return _Counted(channel, lambda: self._closed(job_id))


class _Counted:
    """A channel that tells ``on_close`` once when it is closed."""

    def __init__(self, inner: Channel, on_close: Callable[[], None]) -> None:
        self.inner, self._on_close = inner, on_close
        self._once = threading.Lock()
        self._done = False

    def read(self, n: int = 65536) -> bytes:
        return self.inner.read(n)

    def write(self, data: bytes) -> None:
        self.inner.write(data)

    def resize(self, rows: int, cols: int) -> None:
        self.inner.resize(rows, cols)

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            with self._once:
                done, self._done = self._done, True
            if not done:
                self._on_close()

    def exit_code(self) -> int | None:
        return self.inner.exit_code()
