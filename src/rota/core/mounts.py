"""What a job mounts into its container besides its image: volume claims and a sized /dev/shm.

Only a backend that runs jobs in containers acts on them (Kubernetes: a PersistentVolumeClaim
of the job's namespace as a volume, and ``/dev/shm`` as an ``emptyDir`` of medium ``Memory``
with that size limit: a container's default ``/dev/shm`` is 64 MiB, too small for PyTorch's
DataLoader workers or NCCL). A backend that runs commands on its hosts refuses a job that
names either, rather than ignore it.

Rules, each refusal an ``InvalidSpec`` naming its field:
- ``claim``: a PersistentVolumeClaim's name (a DNS subdomain: lower-case letters, digits,
  ``-`` and ``.``, alphanumeric ends, at most 253 characters);
- ``path``: an absolute path, not ``/``, without ``..`` or ``:``, each path mounted once
  (``/dev/shm`` not at all when ``shm`` sizes it);
- ``read_only``: true or false (default false);
- ``shm``: more than 0 MiB.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

from rota.core.errors import InvalidSpec

SHM_PATH = "/dev/shm"
MAX_CLAIM = 253
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


@dataclass(frozen=True, slots=True)
class Volume:
    """A volume claim mounted at ``path`` in the job's container."""

    claim: str
    path: str
    read_only: bool = False

    def stored(self) -> dict[str, Any]:
        return {"claim": self.claim, "path": self.path, "read_only": self.read_only}


def check_volume(claim: object, path: object, read_only: object = False,
                 where: str = "") -> Volume:
    """One ``Volume``; ``where`` prefixes the field an error names (``volumes[0].``)."""
    if not isinstance(claim, str) or len(claim) > MAX_CLAIM or not _SUBDOMAIN.match(claim):
        raise InvalidSpec(f"{where}claim", f"{claim!r} is not a volume claim's name (lower-case "
                                           "letters, digits, '-' and '.', alphanumeric ends, at "
                                           f"most {MAX_CLAIM} characters)")
    if not isinstance(path, str) or not path.startswith("/") or path.rstrip("/") == "" \
            or ".." in path.split("/") or ":" in path:
        raise InvalidSpec(f"{where}path", f"must be an absolute path other than / (no '..', "
                                          f"no ':'), got {path!r}")
    if not isinstance(read_only, bool):
        raise InvalidSpec(f"{where}read_only", f"must be true or false, got {read_only!r}")
    return Volume(claim, path.rstrip("/"), read_only)


def check_mounts(volumes: Iterable[Volume], shm_mib: int | None, where: str = "",
                 shm_key: str = "shm") -> None:
    """Each path mounted once, ``/dev/shm`` not a volume's when ``shm`` sizes it, and that
    size more than 0; the fields an error names are ``<where>volumes[k].path`` and
    ``<where><shm_key>``."""
    seen: set[str] = set()
    for k, volume in enumerate(volumes):
        if volume.path in seen:
            raise InvalidSpec(f"{where}volumes[{k}].path", f"{volume.path} is mounted twice")
        if volume.path == SHM_PATH and shm_mib is not None:
            raise InvalidSpec(f"{where}volumes[{k}].path", f"is {SHM_PATH}, which shm sizes "
                                                           "already; keep one of the two")
        seen.add(volume.path)
    if shm_mib is not None and (isinstance(shm_mib, bool) or not isinstance(shm_mib, int)
                                or shm_mib <= 0):
        raise InvalidSpec(f"{where}{shm_key}", f"must be a size of more than 0, got {shm_mib!r}")


def read_volumes(value: object, where: str) -> tuple[Volume, ...]:
    """The stored list of volumes (``Volume.stored``); ``where`` names it (``run.volumes``)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidSpec(where, f"must be a list, got {type(value).__name__}")
    out = []
    for k, item in enumerate(value):
        if not isinstance(item, dict) or set(item) - {"claim", "path", "read_only"}:
            raise InvalidSpec(f"{where}[{k}]", "must be a mapping of claim, path and read_only")
        out.append(check_volume(item.get("claim"), item.get("path"),
                                item.get("read_only", False), f"{where}[{k}]."))
    return tuple(out)
