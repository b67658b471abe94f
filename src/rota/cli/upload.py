"""Sending a working directory: pack it as a tar.gz, upload it with a progress bar.

What is packed: every regular file, directory and symbolic link under the directory, with names
relative to it, except ``.git`` and ``__pycache__`` directories; files hard-linked to each other
are packed once, the other names as hard links to it. A link that points outside the
directory (or anywhere absolute) and anything that is not a file, directory or link (sockets,
pipes) is left out and named on stderr (the first few; the rest counted), since the server would
refuse the archive.
"""

from __future__ import annotations

import os
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn,
)

from rota.client import Client

SKIP_DIRS = frozenset({".git", "__pycache__"})
SKIPS_NAMED = 5  # the rest of what was left out is counted, not named


def pack(directory: Path, out: Path) -> list[str]:
    """Write ``directory`` as a tar.gz to ``out``; the relative paths left out."""
    root = directory.resolve()
    skipped: list[str] = []
    with tarfile.open(out, "w:gz") as tar:
        for current, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            here = Path(current)
            for name in [*dirs, *sorted(files)]:
                path = here / name
                rel = path.relative_to(root).as_posix()
                if path.is_symlink() and not _inside(root, path):
                    skipped.append(rel)
                elif path.is_symlink() or path.is_file() or path.is_dir():
                    tar.add(path, arcname=rel, recursive=False)
                else:
                    skipped.append(rel)
    return skipped


def _inside(root: Path, link: Path) -> bool:
    target = os.readlink(link)
    if os.path.isabs(target):
        return False
    resolved = os.path.normpath(os.path.join(os.path.dirname(link), target))
    return resolved == str(root) or resolved.startswith(str(root) + os.sep)


def upload_dir(client: Client, directory: Path, quiet: bool = False,
               project: str | None = None) -> dict[str, Any]:
    """Pack and upload ``directory``, charged to ``project``'s storage (the job's); the
    server's answer (``id``, ``size``, ``files``). A 429 is waited out and sent again
    (``Client.upload``)."""
    err = Console(file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="rota-upload-") as tmp:
        archive = Path(tmp) / "workdir.tar.gz"
        skipped = pack(directory, archive)
        for rel in skipped[:SKIPS_NAMED]:
            err.print(f"note: left out {rel} (a link out of the directory or a special file)")
        if len(skipped) > SKIPS_NAMED:
            err.print(f"note: left out {len(skipped) - SKIPS_NAMED} more links out of the "
                      "directory or special files")
        size = archive.stat().st_size
        columns = (TextColumn(f"uploading {directory.name or directory}"), BarColumn(),
                   DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn())
        with Progress(*columns, console=err, disable=quiet, transient=False) as bar:
            task = bar.add_task("upload", total=size)
            with open(archive, "rb") as f:
                return client.upload(f, progress=lambda n: bar.update(
                    task, completed=f.tell()), project=project)
