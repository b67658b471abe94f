"""``rota up`` over a data directory an earlier version left more open tightens it.

A job directory of an older data directory is made world-readable, down to its working
directory, its attempt, its replica and the replica's log; ``rota up`` starts over it, and
every one of them is back to the modes a new job gets (docs/local-backend.md's layout).
"""

from __future__ import annotations

import os
from pathlib import Path

from serverkit import RotaServer


def _mode(path: Path) -> str:
    return oct(path.lstat().st_mode & 0o777)


def test_rota_up_tightens_an_old_job_directory(tmp_path: Path) -> None:
    server = RotaServer(tmp_path)
    job = server.data_dir / "jobs" / "7"
    replica = job / "attempt-0" / "replica-0"
    replica.mkdir(parents=True)
    (job / "work").mkdir()
    (job / "checkpoints").mkdir()
    for name in ("stdout.log", "stderr.log", "spec.json"):
        (replica / name).write_text("old\n")
        os.chmod(replica / name, 0o644)
    for path in (job, job / "attempt-0", replica, job / "work", job / "checkpoints"):
        os.chmod(path, 0o755)
    try:
        server.start()
        modes = {str(p.relative_to(job)): _mode(p) for p in
                 (job, job / "attempt-0", replica, replica / "stdout.log",
                  replica / "stderr.log", replica / "spec.json", job / "work",
                  job / "checkpoints")}
    finally:
        server.close()
    print(f"modes after rota up: {modes}")
    assert modes == {".": "0o711", "attempt-0": "0o700", "attempt-0/replica-0": "0o700",
                     "attempt-0/replica-0/stdout.log": "0o600",
                     "attempt-0/replica-0/stderr.log": "0o600",
                     "attempt-0/replica-0/spec.json": "0o600",
                     "work": "0o700", "checkpoints": "0o700"}
