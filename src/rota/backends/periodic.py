"""A piece of work repeated in a background thread: the disk watcher (``diskuse``) and the
GPU-memory watcher (``watcher``) each check their jobs this way.

``Periodic`` calls ``work`` every ``period_s`` in a named daemon thread from ``start`` until
``stop`` (both may be called again: a second ``start`` while running, or a ``stop`` while
stopped, does nothing). A call that raises does not end the thread: the exception goes to
``failed``, which says it loudly (it is called while the exception is handled, so
``log.exception`` there shows the traceback), and the next call comes one period later.
"""

from __future__ import annotations

import threading
from typing import Callable


class Periodic:
    """``work`` every ``period_s`` in the daemon thread ``name``; ``failed`` hears its errors."""

    def __init__(self, name: str, period_s: float, work: Callable[[], object],
                 failed: Callable[[Exception], None]) -> None:
        self.name, self.period_s = name, period_s
        self.work, self.failed = work, failed
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._halt.clear()
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Wait for a call under way to end; none comes after."""
        self._halt.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _loop(self) -> None:
        while not self._halt.wait(self.period_s):
            try:
                self.work()
            except Exception as exc:  # a bug or a failing device must not end the checks
                self.failed(exc)
