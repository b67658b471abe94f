"""What the backend needs to run a job, read from the job's ``run`` mapping, and its uploads.

``Submission.run`` is persisted with the job; its format (version 1)::

    {"command": ["python", "train.py"],          # argv; a job file's string entrypoint
                                                  # arrives as ["/bin/sh", "-c", "..."]
     "workdir": "/abs/dir" | null,                # where the command runs
     "image": "python:3.12" | null,               # the container image (container backends)
     "env": {"NAME": "value"},
     "upload": "<upload id>" | null,              # <data_dir>/uploads/<id>.tar.gz
     "checkpoint": {"dir": str | null, "signal": "SIGTERM", "grace_s": 30.0},
     "restart": {"max_retries": 0, "backoff_s": 10.0},
     "idle": {...} | null,                        # read by idle reclamation, not here
     "port": 8000 | 0 | null,                     # a service replica's ROTA_PORT (0: any free)
     "disk_mib": 20480}                           # optional: the working directory's disk limit

Working directory: ``workdir`` when set (an existing directory the job's OS account may enter
and list, ``rota.control.accounts.may_enter``); otherwise ``<data_dir>/jobs/<job id>/work``, where an
upload is extracted once, before the first launch (a later attempt reuses what the job left
there). That directory is 0700 and, with everything extracted into it, owned by the job's
account; so is ``checkpoints`` beside it, the default ``ROTA_CHECKPOINT_DIR`` that every
attempt of the job shares; ``jobs`` and ``jobs/<job id>`` are 0711, so that its owner can
reach it and nobody can list what else is there. Extraction checks the archive again by the
rule it was accepted with at upload (``rota.core.archive``); it happens in a temporary
directory renamed into place, so a crash half-way leaves no half-extracted tree.

A malformed ``run`` is an ``InvalidSpec`` naming the field (``run.command[1]``): the job can
never start as written, so the control loop fails it instead of retrying.
"""

from __future__ import annotations

import os
import re
import shutil
import signal as signals
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from rota.backends.base import RunAs
from rota.backends.procs import make_dirs
from rota.control.accounts import may_enter
from rota.core import InvalidSpec
from rota.core.archive import check_members

UPLOAD_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")
KNOWN_KEYS = frozenset({"command", "workdir", "image", "env", "upload", "checkpoint", "restart",
                        "idle", "port", "disk_mib"})


@dataclass(frozen=True, slots=True)
class RunSpec:
    command: tuple[str, ...]
    workdir: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    upload: str | None = None
    checkpoint_dir: str | None = None
    checkpoint_signal: int = int(signals.SIGTERM)
    grace_s: float | None = None  # None: the job's own grace period
    max_retries: int = 0
    image: str | None = None  # the container image the job names
    backoff_s: float = 10.0       # before the first retry; doubled for each further one
    port: int | None = None       # ROTA_PORT (``LaunchSpec.port``)
    disk_mib: int | None = None   # the working directory's disk limit (``LaunchSpec.disk_mib``)


def parse_run(run: Mapping[str, Any]) -> RunSpec:
    """The ``RunSpec`` of a job's ``run`` mapping; ``InvalidSpec`` with a ``run.*`` field."""
    if not isinstance(run, Mapping):
        raise InvalidSpec("run", f"must be a mapping, got {type(run).__name__}")
    unknown = sorted(set(run) - KNOWN_KEYS)
    if unknown:
        raise InvalidSpec(f"run.{unknown[0]}", f"unknown key; known: {', '.join(sorted(KNOWN_KEYS))}")
    checkpoint = _mapping(run.get("checkpoint"), "run.checkpoint")
    restart = _mapping(run.get("restart"), "run.restart")
    return RunSpec(
        command=_command(run.get("command")),
        workdir=_optional_text(run.get("workdir"), "run.workdir"),
        env=_env(run.get("env")),
        upload=_upload(run.get("upload")),
        image=_optional_text(run.get("image"), "run.image"),
        checkpoint_dir=_optional_text(checkpoint.get("dir"), "run.checkpoint.dir"),
        checkpoint_signal=_signal(checkpoint.get("signal", "SIGTERM")),
        grace_s=_grace(checkpoint.get("grace_s")),
        max_retries=_retries(restart.get("max_retries", 0)),
        backoff_s=_backoff(restart.get("backoff_s", 10.0)),
        port=_port(run.get("port")),
        disk_mib=_disk(run.get("disk_mib")),
    )


def _port(value: object) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 65535:
        raise InvalidSpec("run.port", f"must be a port number (0: any free one), got {value!r}")
    return value


def _disk(value: object) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise InvalidSpec("run.disk_mib", f"must be a positive number of MiB, got {value!r}")
    return value


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidSpec(where, f"must be a mapping, got {value!r}")
    return value


def _command(value: object) -> tuple[str, ...]:
    if value is None:
        raise InvalidSpec("run.command", "is missing: a job needs a command to run")
    if isinstance(value, str):
        if not value.strip():
            raise InvalidSpec("run.command", "must not be empty")
        return ("/bin/sh", "-c", value)
    if not isinstance(value, list) or not value:
        raise InvalidSpec("run.command", "must be a non-empty list of strings (argv)")
    for k, arg in enumerate(value):
        if not isinstance(arg, str):
            raise InvalidSpec(f"run.command[{k}]", f"must be a string, got {arg!r}")
        if "\0" in arg:
            raise InvalidSpec(f"run.command[{k}]", "must not contain a NUL character")
    if not value[0]:
        raise InvalidSpec("run.command[0]", "must name a program")
    return tuple(value)


def _optional_text(value: object, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidSpec(where, f"must be a non-empty string or null, got {value!r}")
    return value


def _env(value: object) -> dict[str, str]:
    env = _mapping(value, "run.env")
    out = {}
    for key, item in env.items():
        if not isinstance(item, str):
            raise InvalidSpec(f"run.env.{key}", f"must be a string, got {item!r}")
        out[str(key)] = item
    return out


def _upload(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not UPLOAD_ID.match(value):
        raise InvalidSpec("run.upload", f"is not an upload id: {value!r}")
    return value


def _signal(value: object) -> int:
    name = value.upper() if isinstance(value, str) else ""
    if name and not name.startswith("SIG"):
        name = "SIG" + name
    try:
        return int(signals.Signals[name])
    except KeyError:
        raise InvalidSpec("run.checkpoint.signal",
                          f"expected a signal name such as SIGTERM or SIGUSR1, got {value!r}") from None


def _grace(value: object) -> float | None:
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= 0:
        raise InvalidSpec("run.checkpoint.grace_s", f"must be a non-negative number, got {value!r}")
    return float(value)


def _backoff(value: object) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 600:
        raise InvalidSpec("run.restart.backoff_s",
                          f"must be a number of seconds from 0 to 600, got {value!r}")
    return float(value)


def _retries(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidSpec("run.restart.max_retries",
                          f"must be a non-negative integer, got {value!r}")
    return value


# -- working directories and uploads ---------------------------------------------------------

def job_dir(data_dir: Path, job_id: str) -> Path:
    return data_dir / "jobs" / job_id


def upload_path(data_dir: Path, upload_id: str) -> Path:
    return data_dir / "uploads" / f"{upload_id}.tar.gz"


def prepare_workdir(spec: RunSpec, data_dir: Path, job_id: str,
                    run_as: RunAs | None = None) -> Path:
    """The directory the job runs in, with its upload extracted (once), owned by ``run_as``
    (None: the control plane's own account)."""
    if spec.workdir is not None:
        path = Path(spec.workdir)
        if not path.is_absolute():
            raise InvalidSpec("run.workdir", f"must be an absolute path, got {spec.workdir!r}")
        if run_as is not None:  # asked as the job's account: nothing it may not see is told
            if not may_enter(spec.workdir, run_as):
                raise InvalidSpec("run.workdir", f"is not a directory OS user {run_as.user} "
                                  f"may enter and list: {spec.workdir}")
        elif not path.is_dir():
            raise InvalidSpec("run.workdir", f"is not an existing directory: {spec.workdir}")
        return path
    work = job_dir(data_dir, job_id) / "work"
    if work.is_dir():
        return work  # extracted by an earlier attempt
    make_dirs(work.parent, 0o711)
    staging = work.with_name(f".work-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(mode=0o700)
    try:
        if spec.upload is not None:
            extract_upload(upload_path(data_dir, spec.upload), staging)
        if run_as is not None:
            _give(staging, run_as)
        staging.rename(work)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return work


def prepare_checkpoints(spec: RunSpec, data_dir: Path, job_id: str, workdir: Path,
                        run_as: RunAs | None = None) -> Path:
    """The job's checkpoint directory (``ROTA_CHECKPOINT_DIR``), the same for every attempt:
    ``checkpoint.dir`` when given (relative to the working directory; the job creates it if
    it must), else ``<data_dir>/jobs/<job id>/checkpoints``, created 0700 for ``run_as``."""
    if spec.checkpoint_dir is not None:
        return workdir / spec.checkpoint_dir  # an absolute dir stays itself
    path = job_dir(data_dir, job_id) / "checkpoints"
    if not path.is_dir():
        make_dirs(path.parent, 0o711)
        path.mkdir(mode=0o700, exist_ok=True)
        if run_as is not None:
            os.lchown(path, run_as.uid, run_as.gid)
    return path


def _give(tree: Path, run_as: RunAs) -> None:
    """Make ``tree`` and everything in it ``run_as``'s (links themselves, not their targets)."""
    os.lchown(tree, run_as.uid, run_as.gid)
    for root, dirs, files in os.walk(tree):
        for name in (*dirs, *files):
            os.lchown(os.path.join(root, name), run_as.uid, run_as.gid)


def extract_upload(archive: Path, dest: Path) -> None:
    """Extract a tar.gz into ``dest`` after checking every member; ``InvalidSpec`` on
    ``run.upload`` when the archive is missing, unreadable or unsafe."""
    if not archive.is_file():
        raise InvalidSpec("run.upload", f"no uploaded archive at {archive}")
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = tar.getmembers()
            check_members(members, "run.upload")
            tar.extractall(dest, members=members, filter="data")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise InvalidSpec("run.upload", f"cannot extract {archive.name}: {exc}") from None
