"""One control loop per data directory: an exclusive ``flock`` on ``<data_dir>/rota.lock``.

The kernel drops the lock when the holder exits, however it exits (``kill -9`` included), so a
stale lock file never blocks a restart. The file holds the holder's pid, for the message a
second ``rota up`` prints.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from rota.core.datadir import LOCK_FILE


class DataDirBusy(Exception):
    def __init__(self, data_dir: Path, holder: str) -> None:
        who = f" (pid {holder})" if holder else ""
        super().__init__(f"another control plane is already running on {data_dir}{who}; "
                         "stop it first, or use another --data-dir")
        self.data_dir = data_dir


class DataDirLock:
    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip()
            os.close(fd)
            raise DataDirBusy(self.path.parent, holder) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> DataDirLock:
        self.acquire()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()
