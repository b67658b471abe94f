"""Datasets: what a job reads, where it comes from, and which cached copies a node may drop.

Vocabulary:
- A **dataset** has a ``name`` (unique in the control plane, as a service's is), the
  ``project`` that owns it (its members see it and their jobs may name it; operators see all),
  a ``source`` it is copied from, a ``version`` (a label: a new version is a new copy) and a
  ``size_bytes`` (measured when the source is a path; else what its creator said, or unknown).
- A **source** is a ``path``: an absolute directory or file on storage the nodes share
  (``/shared/imagenet``); or an S3-compatible bucket and prefix (``s3://bucket/prefix``: the
  objects whose keys start with ``prefix/``, ``split_s3``). ``http(s)://`` sources are refused
  with a reason: they are not built yet.
- A node's **cache** holds copies of datasets, each an **entry** ``(dataset, version,
  bytes)``, up to the cache's capacity. A job that names a dataset reads the copy on its node,
  at ``$ROTA_DATASETS/<name>``.

Eviction (``choose_evictions``): to make room for ``need`` bytes, never drop an entry a
running job reads (``in_use``); drop first entries no queued or running job names
(``wanted``), least recently used first, then wanted ones, least recently used first. If even
that cannot make room, nothing is dropped and the answer says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from rota.core.errors import InvalidSpec

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,62}$")
DEFAULT_VERSION = "1"
MAX_DATASETS = 32  # datasets one job may name
S3 = "s3://"
_PLANNED = ("http://", "https://")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


@dataclass(frozen=True, slots=True)
class Dataset:
    name: str
    project: str
    source: str
    version: str = DEFAULT_VERSION
    size_bytes: int | None = None  # None: not known
    user: str = ""
    created_at: float = 0.0

    @property
    def key(self) -> str:
        """The name of its copy in a cache: one directory per name and version."""
        return cache_key(self.name, self.version)

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "project": self.project, "source": self.source,
                "version": self.version, "size_bytes": self.size_bytes, "user": self.user,
                "created_at": self.created_at}

    @classmethod
    def from_json(cls, data: dict) -> Dataset:
        return cls(str(data["name"]), str(data["project"]), str(data["source"]),
                   str(data.get("version", DEFAULT_VERSION)), data.get("size_bytes"),
                   str(data.get("user", "")), float(data.get("created_at", 0.0)))


def cache_key(name: str, version: str) -> str:
    return f"{name}@{version}"


def check_name(value: object, field: str = "name") -> str:
    if not isinstance(value, str) or not NAME.match(value):
        raise InvalidSpec(field, f"{value!r} is not a dataset name: use 1-63 letters, digits, "
                                 "'.', '_' or '-', starting with a letter or digit")
    return value


def check_version(value: object, field: str = "version") -> str:
    if not isinstance(value, str) or not VERSION.match(value):
        raise InvalidSpec(field, f"{value!r} is not a version: use 1-63 letters, digits, "
                                 "'.', '_', '+' or '-', starting with a letter or digit")
    return value


def check_source(value: object, field: str = "source") -> str:
    """A source rota can copy from: an absolute path without ``..`` (a directory or a file on
    storage the nodes share), or ``s3://bucket/prefix`` (``split_s3``)."""
    if not isinstance(value, str) or not value:
        raise InvalidSpec(field, f"must be an absolute path on shared storage or "
                                 f"s3://bucket/prefix, got {value!r}")
    if value.startswith(_PLANNED):
        raise InvalidSpec(field, f"{value!r}: HTTP sources are not supported yet; give an "
                                 "absolute path on storage the nodes share or s3://bucket/prefix")
    if value.startswith(S3):
        bucket, prefix = split_s3(value, field)
        return f"{S3}{bucket}/{prefix}" if prefix else f"{S3}{bucket}"
    if not value.startswith("/") or ".." in value.split("/") or "\0" in value \
            or value.rstrip("/") == "":
        raise InvalidSpec(field, f"must be an absolute path other than / (no '..'), got "
                                 f"{value!r}")
    return value.rstrip("/")


def is_s3(source: str) -> bool:
    return source.startswith(S3)


def split_s3(source: str, field: str = "source") -> tuple[str, str]:
    """``s3://bucket/a/b/`` -> ``("bucket", "a/b")``: a bucket name as S3 allows one, and a
    prefix without empty, ``.`` or ``..`` parts (its objects' keys become paths in a copy);
    ``InvalidSpec`` on ``field`` saying what is wrong."""
    bucket, _, prefix = source[len(S3):].partition("/")
    if not _BUCKET.match(bucket):
        raise InvalidSpec(field, f"{source!r}: {bucket!r} is not a bucket name: 3-63 lowercase "
                                 "letters, digits, '.' or '-', starting and ending with a "
                                 "letter or digit")
    prefix = prefix.strip("/")
    if "\0" in prefix or any(p in ("", ".", "..") for p in prefix.split("/") if prefix):
        raise InvalidSpec(field, f"{source!r}: the prefix has an empty, '.' or '..' part")
    return bucket, prefix


def check_names(value: object, field: str = "datasets") -> tuple[str, ...]:
    """The datasets a job names: a list of names, each once, at most ``MAX_DATASETS``."""
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        raise InvalidSpec(field, f"must be a list of dataset names, got {type(value).__name__}")
    if len(value) > MAX_DATASETS:
        raise InvalidSpec(field, f"names {len(value)} datasets; at most {MAX_DATASETS}")
    names = tuple(check_name(v, f"{field}.{k}") for k, v in enumerate(value))
    for k, name in enumerate(names):
        if name in names[:k]:
            raise InvalidSpec(f"{field}.{k}", f"names dataset {name!r} twice")
    return names


@dataclass(frozen=True, slots=True)
class CacheEntry:
    """One dataset's copy in a node's cache; ``last_used`` is when a job last started with it."""

    key: str  # ``cache_key(name, version)``
    bytes: int
    last_used: float


@dataclass(frozen=True, slots=True)
class Evictions:
    """What to drop (``drop``, in order), or, when room cannot be made, ``blocked``: why."""

    drop: tuple[str, ...] = ()
    blocked: str = ""


def choose_evictions(entries: Iterable[CacheEntry], capacity: int, need: int,
                     in_use: frozenset[str], wanted: frozenset[str]) -> Evictions:
    """The entries to drop so that ``need`` more bytes fit in ``capacity`` (module docstring).

    Example: capacity 100, entries a (40, unwanted), b (40, wanted, older), need 50: free is
    20, dropping a frees 40 -> 60 >= 50, so only a goes, although b is older."""
    entries = list(entries)
    free = capacity - sum(e.bytes for e in entries)
    if need > capacity:
        return Evictions(blocked=f"needs {need} bytes, more than the cache's capacity "
                                 f"({capacity})")
    if free >= need:
        return Evictions()
    movable = [e for e in entries if e.key not in in_use]
    order = sorted(movable, key=lambda e: (e.key in wanted, e.last_used, e.key))
    drop: list[str] = []
    for entry in order:
        if free >= need:
            break
        drop.append(entry.key)
        free += entry.bytes
    if free < need:
        pinned = sorted(e.key for e in entries if e.key in in_use)
        return Evictions(blocked=f"needs {need} bytes; running jobs read {', '.join(pinned)}, "
                                 f"which cannot be evicted, and the rest frees too little")
    return Evictions(drop=tuple(drop))


_UNITS = {"": 1, "K": 1000, "M": 1000 ** 2, "G": 1000 ** 3, "T": 1000 ** 4,
          "Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3, "Ti": 1024 ** 4}
_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]i?)?B?\s*$")


def parse_bytes(text: object, field: str) -> int:
    """``500``, ``10Gi``, ``2T`` (B optional) as bytes; ``InvalidSpec`` naming ``field``."""
    if isinstance(text, int) and not isinstance(text, bool) and text >= 0:
        return text
    found = _SIZE.match(text) if isinstance(text, str) else None
    if found is None:
        raise InvalidSpec(field, f"must be a number of bytes, optionally with K, M, G, T or "
                                 f"Ki, Mi, Gi, Ti (10Gi), got {text!r}")
    return int(found.group(1)) * _UNITS[found.group(2) or ""]


def human_bytes(value: int | None) -> str:
    """``1536`` -> ``1.5 KiB``; None -> ``?``."""
    if value is None:
        return "?"
    size, unit = float(value), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
