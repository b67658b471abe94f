"""What a safe upload archive is: one rule, applied where an archive is accepted (the API, at
upload) and again where it is unpacked (the control plane, at a job's launch).

Vocabulary: a *member* is one entry of a tar archive (``tarfile.TarInfo``); its *path* is its
name as POSIX parts. An archive is safe when, for every member in order:

1. it is a regular file, a directory, a symbolic link or a hard link (no devices or FIFOs);
2. its path is relative and has no ``..`` part;
3. no proper prefix of its path is a symbolic link met earlier (so a chain ``a/b -> ..``,
   ``a/b/c -> ..`` cannot walk out through a link);
4. a symbolic link's target is relative and, joined to the link's directory, stays inside;
   a hard link's target is a regular file met earlier in the archive (so a directory with
   hard links in it can be sent, and none can lead out);
5. there are at most ``limits.members`` members, and the regular files' sizes add up to at
   most ``limits.unpacked_bytes`` (a small archive of zeros cannot fill the disk).

``check_members`` is pure: it reads the members' headers only, never the disk.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from rota.core.errors import InvalidSpec

if TYPE_CHECKING:  # the members are given: nothing here opens an archive
    import tarfile

MAX_MEMBERS = 100_000
MAX_UNPACKED_BYTES = 1024 ** 3  # as much as the largest upload the API takes by default


@dataclass(frozen=True, slots=True)
class ArchiveLimits:
    members: int = MAX_MEMBERS
    unpacked_bytes: int = MAX_UNPACKED_BYTES


@dataclass(frozen=True, slots=True)
class ArchiveSummary:
    members: int
    unpacked_bytes: int


def check_members(members: Iterable[tarfile.TarInfo], field: str,
                  limits: ArchiveLimits = ArchiveLimits()) -> ArchiveSummary:
    """The size of a safe archive; ``InvalidSpec(field)`` naming the first member that is not
    (see the module docstring for the rules, in the order they are checked)."""
    links: set[str] = set()
    files: set[str] = set()  # the regular files met so far: what a hard link may name
    count = unpacked = 0
    for member in members:
        count += 1
        if count > limits.members:
            raise InvalidSpec(field, f"has more than {limits.members} files")
        path = _path_of(member, field)
        through = next((p for p in _parents(path) if p in links), None)
        if through is not None:
            raise InvalidSpec(field, f"unsafe member {member.name!r}: it lies under the "
                              f"symbolic link {through!r}")
        if member.issym():
            _check_link(member, path, field)
            links.add(path)
        elif member.islnk():
            _check_hard_link(member, files, field)
        if member.isfile():
            files.add(path)
        else:
            files.discard(path)
        unpacked += member.size if member.isfile() else 0
        if unpacked > limits.unpacked_bytes:
            raise InvalidSpec(field, f"unpacks to more than {limits.unpacked_bytes} bytes; "
                              "leave large data out of the working directory and read it from "
                              "shared storage")
    return ArchiveSummary(count, unpacked)


def _parents(path: str) -> list[str]:
    """``a/b/c`` -> ``a/b``, ``a``."""
    parts = path.split("/")
    return ["/".join(parts[:n]) for n in range(len(parts) - 1, 0, -1)]


def _path_of(member: tarfile.TarInfo, field: str) -> str:
    if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
        raise InvalidSpec(field, f"unsafe member {member.name!r}: not a file, directory or "
                          "link")
    path = "/".join(p for p in member.name.split("/") if p not in ("", "."))
    if not member.name or member.name.startswith("/") or ".." in path.split("/"):
        raise InvalidSpec(field, f"unsafe member {member.name!r}: outside the directory "
                          "(absolute or with '..')")
    return path


def _check_link(member: tarfile.TarInfo, path: str, field: str) -> None:
    target = member.linkname
    if not target or target.startswith("/") or _escapes(posixpath.join(
            posixpath.dirname(path), target)):
        raise InvalidSpec(field, f"unsafe link {member.name!r} -> {member.linkname!r}: points "
                          "outside the directory")


def _check_hard_link(member: tarfile.TarInfo, files: set[str], field: str) -> None:
    target = "/".join(p for p in member.linkname.split("/") if p not in ("", "."))
    if member.linkname.startswith("/") or target not in files:
        raise InvalidSpec(field, f"unsafe hard link {member.name!r} -> {member.linkname!r}: "
                          "not a file of the directory packed before it")


def _escapes(path: str) -> bool:
    depth = 0
    for part in (p for p in path.split("/") if p):
        depth += -1 if part == ".." else (0 if part == "." else 1)
        if depth < 0:
            return True
    return False
