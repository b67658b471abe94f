"""A project's storage quota (``fair_use.project.storage``, ``rota.store.records.Cap``).

What counts: the directories the control plane keeps for the project's jobs
(``<data_dir>/jobs/<job id>``: working directory with its unpacked upload, checkpoints, logs),
as their blocks on disk, plus what the submit being checked would add (its upload's unpacked
size, once per task of an array). The quota is checked when a job that names an upload is
submitted, as that is when a member can make the control plane write much at once; over it,
the submit is ``StorageFull`` (HTTP 507, field ``upload``) and nothing is written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from rota.core import RotaError


class StorageFull(RotaError):
    code = "storage_full"

    def __init__(self, project: str, used: int, adding: int, cap: int) -> None:
        super().__init__(f"project {project} uses {used} of its {cap} bytes of storage (its "
                         f"jobs' directories), and this job's upload would add {adding}: "
                         "delete what old jobs left in their directories, or ask an operator "
                         "to raise fair_use.project.storage")
        self.field = "upload"


def used_bytes(data_dir: Path, job_ids: Iterable[str]) -> int:
    """The blocks on disk under ``<data_dir>/jobs/<id>`` for every job in ``job_ids``."""
    return sum(disk_use(data_dir / "jobs" / job_id) for job_id in job_ids)


def disk_use(path: Path) -> int:
    """Bytes of the blocks under ``path`` (what ``du`` says; 0 when it does not exist)."""
    total = 0
    for root, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:  # removed while it was counted
                continue
    return total


def check_storage(data_dir: Path, project: str, job_ids: Iterable[str], adding: int,
                  cap: int | None) -> None:
    """``StorageFull`` when ``project`` would pass ``cap`` bytes by adding ``adding``."""
    if cap is None:
        return
    used = used_bytes(data_dir, job_ids)
    if used + adding > cap:
        raise StorageFull(project, used, adding, cap)
