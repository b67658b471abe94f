"""The job's launch spec as the control loop reads it, and its working directory and uploads.

``rota.core.runspec`` defines the spec (``RunSpec``) and its stored, versioned form; a job's
spec is read once per job and kept (``SpecCache``): it never changes after submit, so the
passes that judge a running job (its checkpoint signal, grace, restart budget) read the
typed value, not the mapping.

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
import shutil
import tarfile
import threading
from pathlib import Path
from typing import Any, Mapping

from rota.backends.base import RunAs
from rota.backends.procs import make_dirs
from rota.control.accounts import may_enter
from rota.core import InvalidSpec
from rota.core.archive import check_members
from rota.core.datadir import CHECKPOINTS_DIR, WORK_DIR, job_home, upload_archive
from rota.core.runspec import RunSpec, read_run
from rota.store import JobRecord

parse_run = read_run  # the name the control package has always exported


class SpecCache:
    """Each job's ``RunSpec``, or the ``InvalidSpec`` its stored ``run`` gives, read once.

    Keyed by job id and the stored mapping's content: a job's ``run`` is written at submit and
    never changed, so a job is read again only if it was (a store edited by hand)."""

    def __init__(self) -> None:
        self._specs: dict[str, tuple[Mapping[str, Any], RunSpec | InvalidSpec]] = {}
        self._lock = threading.Lock()  # the launcher's threads read it too

    def spec(self, rec: JobRecord) -> RunSpec:
        """The job's spec; ``InvalidSpec`` naming the field when its ``run`` cannot be read."""
        with self._lock:
            found = self._specs.get(rec.id)
        if found is None or found[0] != rec.run:  # a dict compare: cheaper than a read
            try:
                read: RunSpec | InvalidSpec = read_run(rec.run)
            except InvalidSpec as exc:
                read = exc
            found = (rec.run, read)
            with self._lock:
                self._specs[rec.id] = found
        if isinstance(found[1], InvalidSpec):
            raise InvalidSpec(found[1].field, found[1].reason)
        return found[1]

    def forget(self, job_id: str) -> None:
        with self._lock:
            self._specs.pop(job_id, None)


# -- working directories and uploads ---------------------------------------------------------

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
    work = job_home(data_dir, job_id) / WORK_DIR
    if work.is_dir():
        return work  # extracted by an earlier attempt
    make_dirs(work.parent, 0o711)
    staging = work.with_name(f".work-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(mode=0o700)
    try:
        if spec.upload is not None:
            extract_upload(upload_archive(data_dir, spec.upload), staging)
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
    path = job_home(data_dir, job_id) / CHECKPOINTS_DIR
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
