"""``rota up --detach`` and ``rota down``: the control plane in the background.

``--detach`` starts the same ``rota up`` as a new session with its output in
``<data dir>/rota-up.log``, and returns once the server answers with the credentials it wrote
(or prints the log and fails if it stopped). ``rota down`` finds the control plane of a data
directory through the pid in its lock file, sends SIGTERM and waits until the lock is free.
Running jobs keep running either way; the next ``rota up`` adopts them.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from rota.core.datadir import LOG_FILE

READY_TIMEOUT_S = 90.0


def detach(argv: list[str], directory: Path, credentials: Path) -> None:
    """Start ``rota up`` with ``argv`` (without --detach) in the background; wait until ready."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o711)
    log = directory / LOG_FILE
    before = credentials.stat().st_mtime_ns if credentials.exists() else None
    offset = log.stat().st_size if log.exists() else 0  # what this start writes comes after
    # 0600: what rota up prints names no secret, but its jobs' owners have no business here
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "ab") as out:
        child = subprocess.Popen([sys.executable, "-m", "rota.cli.main", "up", *argv],
                                 stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                 start_new_session=True)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if child.poll() is not None:
            sys.stderr.write(_since(log, offset))
            print(f"error: rota up stopped (exit status {child.returncode}); log: {log}",
                  file=sys.stderr)
            raise SystemExit(1)
        if _ready(credentials, before):
            sys.stdout.write(_for_people(_since(log, offset)))
            print(f"running in the background (pid {child.pid}); log: {log}\n"
                  f"stop it with: rota down" + ("" if _default(directory) else
                                                 f" --data-dir {directory}"))
            return
        time.sleep(0.2)
    print(f"error: rota up did not answer within {READY_TIMEOUT_S:.0f} s; log: {log}",
          file=sys.stderr)
    raise SystemExit(1)


def down(directory: Path) -> None:
    """Stop the control plane that holds ``directory``'s lock."""
    from rota.control.lock import DataDirLock

    lock_path = DataDirLock(directory).path
    if not lock_path.exists() or _lock_free(lock_path):
        print(f"no control plane is running for {directory}")
        return
    pid = int(lock_path.read_text().split()[0])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if _lock_free(lock_path):
            print(f"stopped the control plane (pid {pid}); running jobs keep running and are "
                  f"adopted by the next rota up")
            return
        time.sleep(0.2)
    print(f"error: the control plane (pid {pid}) has not stopped after 60 s", file=sys.stderr)
    raise SystemExit(1)


def _ready(credentials: Path, before: int | None) -> bool:
    if not credentials.exists() or credentials.stat().st_mtime_ns == before:
        return False
    try:
        creds = json.loads(credentials.read_text())
        from rota.client import Client
        from rota.client.credentials import Credentials
        with Client(Credentials(creds["url"], creds["token"], str(credentials),
                                creds.get("ca_file")), timeout_s=2.0) as client:
            client.whoami()
            return True
    except (OSError, ValueError, KeyError, Exception):  # noqa: BLE001 - not up yet
        return False


def _lock_free(path: Path) -> bool:
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def _since(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _for_people(text: str) -> str:
    """What ``rota up`` printed, without the log records its first moments wrote beside it
    (``2026-11-29 16:21:39,546 rota.control: ...``: they stay in the log): a start that
    succeeded says what the banner says; one that failed prints everything."""
    return "".join(line for line in text.splitlines(keepends=True) if not _RECORD.match(line))


_RECORD = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [\w.]+: ")


def _default(directory: Path) -> bool:
    from rota.control import setup
    return directory == setup.default_data_dir().expanduser().resolve()
