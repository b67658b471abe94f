"""Wake the control loop as soon as a watched process exits (the local backend's ``watch``).

``ExitWatcher`` holds a pidfd (Linux 5.3+) per watched pid, for supervisors this process
started and for supervisors adopted after a restart alike (a pidfd does not need the process
to be our child). A background thread waits on all of them with ``select`` and calls
``on_exit`` when any becomes readable, i.e. when that process has ended. Without pidfd support
``watch`` does nothing and the loop's periodic pass notices exits instead.
"""

from __future__ import annotations

import os
import select
import threading
from typing import Callable


class ExitWatcher:
    def __init__(self, on_exit: Callable[[], None]) -> None:
        self.on_exit = on_exit
        self._fds: dict[int, int] = {}  # pidfd -> pid
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def supported(self) -> bool:
        return hasattr(os, "pidfd_open")

    def watch(self, pid: int) -> None:
        """Call ``on_exit`` once ``pid`` has ended (at once if it is already gone)."""
        if not self.supported:
            return
        with self._lock:
            if pid in self._fds.values():
                return
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            self.on_exit()
            return
        except OSError:
            return  # no pidfd here: the periodic pass covers it
        with self._lock:
            self._fds[fd] = pid
        os.write(self._wake_w, b"x")

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="rota-exits", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop watching and close every descriptor; a second call does nothing."""
        if self._halt.is_set():
            return
        self._halt.set()
        os.write(self._wake_w, b"x")
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            for fd in self._fds:
                os.close(fd)
            self._fds.clear()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _run(self) -> None:
        while not self._halt.is_set():
            with self._lock:
                fds = list(self._fds)
            ready, _, _ = select.select([self._wake_r, *fds], [], [], 5.0)
            if self._wake_r in ready:
                os.read(self._wake_r, 4096)
            ended = [fd for fd in ready if fd != self._wake_r]
            if ended:
                with self._lock:
                    for fd in ended:
                        self._fds.pop(fd, None)
                        os.close(fd)
                self.on_exit()
