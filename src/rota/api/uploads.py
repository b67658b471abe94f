"""Uploaded working directories: a gzip-compressed tar archive per upload, under the data dir.

Layout: ``<data_dir>/uploads/<id>.tar.gz`` and beside it ``<id>.json`` (who uploaded it, its
size and SHA-256, when); the directory is 0700 and every file 0600, the control plane's alone
(a job gets its upload unpacked into its own working directory). ``id`` is 32 lowercase hex characters, random, so it names nothing
and cannot be guessed; only its uploader (or an operator) may submit a job that uses it.

An archive is accepted only when it can be extracted safely, which is checked before it is
kept, in a worker process (``rota.api.offload``: reading 100,000 member headers takes seconds
of CPU, which must not stall the event loop), by the same rule the control plane applies
when it unpacks it (``rota.core.archive``): regular files, directories and symbolic links only, nothing outside
the directory (by name, by link, or through a link), at most ``MAX_MEMBERS`` members and at
most ``max_unpacked_bytes`` unpacked (422 naming ``body``). The body is streamed to disk and
refused past ``max_bytes`` (413, code ``too_large``) without being read whole. An upload's
record keeps its unpacked size (``unpacked``) and the project it is charged to (``project``,
given by ``POST /v1/uploads?project=P``; without it, every project of its uploader), which a
project's storage quota counts (``rota.api.storage``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import secrets
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, BinaryIO

from rota.core import InvalidSpec, RotaError
from rota.core.archive import MAX_MEMBERS, MAX_UNPACKED_BYTES, ArchiveLimits
from rota.core.datadir import ARCHIVE, RECORD, uploads_root

if TYPE_CHECKING:
    from rota.api.offload import Offload
    from rota.store import Principal

DEFAULT_MAX_BYTES = 1024 ** 3
CHUNK = 1024 * 1024


class TooLarge(RotaError):
    """A request body (or what it unpacks to) is over a limit; ``field`` names it."""

    code = "too_large"

    def __init__(self, message: str, field: str = "body") -> None:
        super().__init__(message)
        self.field = field


class NoDataDir(RotaError):
    code = "unavailable"


@dataclass(frozen=True, slots=True)
class Upload:
    id: str
    user: str
    size: int
    sha256: str
    created_at: float
    members: int
    unpacked: int = 0  # bytes of its regular files (0: recorded before it was kept)
    project: str | None = None  # the project it is charged to (None: its uploader's every)


class Uploads:
    """The uploads directory of one server. ``root`` is None when the server has no data dir."""

    def __init__(self, data_dir: Path | str | None, max_bytes: int = DEFAULT_MAX_BYTES,
                 max_unpacked_bytes: int = MAX_UNPACKED_BYTES) -> None:
        self.root = None if data_dir is None else uploads_root(Path(data_dir))
        self.max_bytes = max_bytes
        self.limits = ArchiveLimits(MAX_MEMBERS, max_unpacked_bytes)
        self._records: dict[str, Upload] = {}  # read by ``all``
        self._records_lock = threading.Lock()

    def _dir(self) -> Path:
        if self.root is None:
            raise NoDataDir("this server has no data directory, so it keeps no uploads; "
                            "start it with rota up --data-dir DIR")
        if not self.root.is_dir():
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(self.root, 0o700)
        return self.root

    def path(self, upload_id: str) -> Path:
        return self._dir() / (upload_id + ARCHIVE)

    async def receive(self, chunks: AsyncIterator[bytes], who: Principal, offload: Offload,
                      project: str | None = None) -> Upload:
        """Stream a request body to disk, check it in a worker process (``rota.api.offload``),
        and keep it; the new upload's record, charged to ``project`` (None: every project of
        its uploader)."""
        root = self._dir()
        upload_id = secrets.token_hex(16)
        partial = root / f".{upload_id}.partial"
        digest, size = hashlib.sha256(), 0
        try:
            with os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600),
                           "wb") as out:
                async for chunk in chunks:
                    size += len(chunk)
                    if size > self.max_bytes:
                        raise TooLarge(f"the upload is over the server's limit of "
                                       f"{self.max_bytes} bytes; leave large data out of the "
                                       "working directory and read it from shared storage")
                    await asyncio.to_thread(_keep, chunk, digest, out)
            if size == 0:
                raise InvalidSpec("body", "is empty; send a tar.gz archive of the directory")
            members, unpacked = await offload.check_archive(who.user, who.token, str(partial),
                                                            self.limits)
            os.replace(partial, root / (upload_id + ARCHIVE))
        finally:
            partial.unlink(missing_ok=True)
        record = Upload(upload_id, who.user, size, digest.hexdigest(), time.time(),
                        members, unpacked, project)
        meta = root / (upload_id + RECORD)
        with os.fdopen(os.open(meta, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(json.dumps(asdict(record)))
        return record

    def get(self, upload_id: str) -> Upload | None:
        if self.root is None or len(upload_id) != 32 or not all(
                c in "0123456789abcdef" for c in upload_id):
            return None
        meta = self.root / (upload_id + RECORD)
        if not meta.is_file() or not (self.root / (upload_id + ARCHIVE)).is_file():
            return None
        return Upload(**json.loads(meta.read_text()))

    def all(self) -> list[Upload]:
        """Every upload kept: one listing of the directory, each record read once (a record
        never changes) and remembered while its archive is there."""
        if self.root is None or not self.root.is_dir():
            return []
        with self._records_lock:
            return self._all(self.root)

    def _all(self, root: Path) -> list[Upload]:
        names = set(os.listdir(root))
        found = []
        for name in names:
            upload_id = name.removesuffix(RECORD)
            if name == upload_id or upload_id + ARCHIVE not in names:
                continue
            kept = self._records.get(upload_id) or self.get(upload_id)
            if kept is not None:
                self._records[upload_id] = kept
                found.append(kept)
        for gone in self._records.keys() - {u.id for u in found}:
            self._records.pop(gone, None)
        return found


def _keep(chunk: bytes, digest: Any, out: BinaryIO) -> None:
    """Hash and write one chunk (on a worker thread: both release the interpreter lock)."""
    digest.update(chunk)
    out.write(chunk)
