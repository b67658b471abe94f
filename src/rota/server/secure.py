"""What a control plane keeps to itself, and how its data directory is made so.

A job runs under its owner's OS account (multi-user mode, ``rota.control.accounts``), so what
keeps the control plane's secrets from jobs is file permissions:

- the data directory, ``jobs/`` and ``jobs/<job id>/`` are 0711: a job's owner can reach its
  own working directory inside (0700, owned by that account), and nobody can list anything;
- the store (``rota.db`` and its ``-wal``, ``-shm`` and ``-journal`` files), the lock file,
  the log of ``rota up -d`` and everything under ``uploads/`` are 0600 (directories 0700);
- each attempt's directory (supervisor state, the job's spec with its environment, its logs)
  and each of its replicas' is 0700, their files 0600 at most; a job's ``work`` and
  ``checkpoints`` (its account's own) are 0700 at most; the credentials file
  (``rota.control.setup``) is 0600 in a 0700 directory;
- ``tls/``, rota's own CA and server certificate (``rota.server.certs``), is 0700 and its keys
  0600; the copy of the CA that jobs verify the API with, ``api-certificate.pem``, is 0644.

``private_umask`` makes the control plane create everything 0600/0700 unless it widens a mode
on purpose; ``secure_data_dir`` tightens, at every start, what an earlier version (or a hand)
left more open than this. A job's own files get the usual umask (``rota.backends.local``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from rota.backends.procs import make_dirs
from rota.core.datadir import (
    JOB_OWN_DIRS, LOCK_FILE, LOG_FILE, STORE_FILES, jobs_root, uploads_root)

OPEN_DIRS = 0o711
PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
PRIVATE_FILES = (*STORE_FILES, LOCK_FILE, LOG_FILE)  # the store, the lock, the log


def private_umask() -> None:
    """From now on this process creates files 0600 and directories 0700 unless told otherwise."""
    os.umask(0o077)


def secure_data_dir(directory: Path) -> None:
    """Create ``directory`` if needed and bring it and its contents to the modes above."""
    make_dirs(directory, OPEN_DIRS)
    _chmod(directory, OPEN_DIRS)
    for name in PRIVATE_FILES:
        _chmod(directory / name, PRIVATE_FILE)
    uploads = uploads_root(directory)
    if uploads.is_dir():
        _chmod(uploads, PRIVATE_DIR)
        for entry in os.scandir(uploads):
            _chmod(Path(entry.path), PRIVATE_FILE if entry.is_file(follow_symlinks=False)
                   else PRIVATE_DIR)
    jobs = jobs_root(directory)
    if jobs.is_dir():
        _chmod(jobs, OPEN_DIRS)
        for job in os.scandir(jobs):
            if not job.is_dir(follow_symlinks=False):
                continue
            _chmod(Path(job.path), OPEN_DIRS)
            for entry in os.scandir(job.path):
                if not entry.is_dir(follow_symlinks=False):
                    continue
                if entry.name.startswith("attempt-"):
                    _secure_attempt(Path(entry.path))
                elif entry.name in JOB_OWN_DIRS:
                    _tighten(Path(entry.path), PRIVATE_DIR)


def _secure_attempt(attempt: Path) -> None:
    """An attempt's directory and its replicas' (0700), their files (0600 at most: a job's
    log files are its account's own, and stay so)."""
    _chmod(attempt, PRIVATE_DIR)
    for replica in os.scandir(attempt):
        if replica.is_dir(follow_symlinks=False):
            _chmod(Path(replica.path), PRIVATE_DIR)
            for item in os.scandir(replica.path):
                _tighten(Path(item.path), PRIVATE_FILE)
        else:
            _tighten(Path(replica.path), PRIVATE_FILE)


def _tighten(path: Path, mode: int) -> None:
    """Take from ``path``'s mode (never following a link) every bit ``mode`` lacks."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISLNK(st.st_mode) and stat.S_IMODE(st.st_mode) & ~mode:
        os.chmod(path, stat.S_IMODE(st.st_mode) & mode)


def _chmod(path: Path, mode: int) -> None:
    """Set ``mode`` on ``path`` (never following a link) when it differs; a missing path is
    left alone."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode) or stat.S_IMODE(st.st_mode) == mode:
        return
    os.chmod(path, mode)
