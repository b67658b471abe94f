"""The data directory's layout, written once (paths only: nothing here touches the disk).

``rota up`` keeps everything of one control plane in its data directory
(``$XDG_DATA_HOME/rota`` by default, ``--data-dir``)::

    rota.db, rota.db-wal, -shm, -journal   the store on SQLite (rota.store.engine)
    rota.lock                               one control plane per data directory (rota.control.lock)
    rota-up.log, rota-up.log.N(.gz)         the log of a detached rota up (rota.cli.daemon)
    tls/                                    its own CA and server certificate (rota.server.certs)
    uploads/<id>.tar.gz, <id>.json          kept uploads and their records (rota.api.uploads)
    jobs/<job id>/                          a job's home, 0711 (rota.control.runspec)
        work/, checkpoints/                 its working directory and checkpoints, its account's
        attempt-<n>.../                     one attempt's files, each backend's own
                                            (rota.backends.local, rota.backends.slurm.attempts)
    slurm-instance, slurm-reports.json      the Slurm backend's (rota.backends.slurm.attempts)
    local-gpus                              the virtual GPUs of the last rota up --gpus, used
                                            again while none are given (rota.server.factories.local)

Modes are set in one place too (``rota.server.secure``); what is removed when, in
``rota.server.retention``.
"""

from __future__ import annotations

from typing import Protocol, TypeVar


class Joinable(Protocol):
    """A directory path (``pathlib.Path``): joined with ``/``. Named by its shape, so that the
    core, which does no I/O, imports no file-system module."""

    def __truediv__(self: D, name: str) -> D: ...


D = TypeVar("D", bound=Joinable)

STORE_FILE = "rota.db"
STORE_FILES = (STORE_FILE, f"{STORE_FILE}-wal", f"{STORE_FILE}-shm", f"{STORE_FILE}-journal")
LOCK_FILE = "rota.lock"
LOG_FILE = "rota-up.log"
TLS_DIR = "tls"
UPLOADS_DIR = "uploads"
JOBS_DIR = "jobs"
WORK_DIR, CHECKPOINTS_DIR = "work", "checkpoints"  # in a job's home
JOB_OWN_DIRS = (WORK_DIR, CHECKPOINTS_DIR)  # a job's account's, 0700
SLURM_INSTANCE = "slurm-instance"
SLURM_REPORTS = "slurm-reports.json"
LOCAL_GPUS = "local-gpus"
ARCHIVE = ".tar.gz"  # an upload's archive: <id>.tar.gz
RECORD = ".json"  # and its record beside it: <id>.json


def jobs_root(data_dir: D) -> D:
    """``jobs/``: every job's home."""
    return data_dir / JOBS_DIR


def job_home(data_dir: D, job_id: str) -> D:
    """``jobs/<job id>``, the id quoted so that no id can name another path."""
    return data_dir / JOBS_DIR / quoted(job_id)


def uploads_root(data_dir: D) -> D:
    """``uploads/``: kept archives and their records."""
    return data_dir / UPLOADS_DIR


def upload_archive(data_dir: D, upload_id: str) -> D:
    """``uploads/<id>.tar.gz``."""
    return data_dir / UPLOADS_DIR / (upload_id + ARCHIVE)


def quoted(name: str) -> str:
    """``name`` as one path part: every byte of its UTF-8 but letters, digits and ``_.-~`` as
    ``%XX`` (what ``urllib.parse.quote(name, safe="")`` gives)."""
    return "".join(c if c in _UNQUOTED else "".join(f"%{b:02X}" for b in c.encode())
                   for c in name)


_UNQUOTED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~")
