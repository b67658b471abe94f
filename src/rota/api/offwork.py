"""What a worker process of ``rota.api.offload`` runs: the CPU-heavy reads of what members send.

Checking an upload archive (``tarfile`` walks every member header in Python: about 5 s for a
1.4 MB archive of 100,000 empty files) and reading a YAML job file (PyYAML's pure-Python reader:
about a second for 64 KiB of bad YAML) hold the interpreter lock for as long as they run, so
run on the API's event loop, or on one of its threads, they stall every other request. Here
they run in a process of their own.

A worker is ``python -m rota.api.offwork``: it reads one request per line on stdin, a JSON
array ``[name, args...]`` (``FUNCTIONS``; bytes as base64), and writes one JSON array per line
on stdout: ``["ok", value]`` or ``["invalid", field, reason]``, which ``rota.api.offload`` turns
back into the error. It exits when stdin closes (its server is gone). This module imports only
``rota.core`` and ``rota.spec``, so a worker starts in a fraction of a second, and being started
by its module name it never runs the server's own ``__main__`` again (as ``multiprocessing``
would).
"""

from __future__ import annotations

import base64
import json
import os
import sys
import tarfile
from typing import Any

from rota.core import InvalidSpec
from rota.core.archive import ArchiveLimits, check_members
from rota.spec.load import decode, json_ready, parse_yaml

WORKER_NICE = 10  # the API's own process keeps the CPU it needs while workers are busy


def lower_priority() -> None:
    """Initializer of each worker: below the control plane on the CPU."""
    try:
        os.nice(WORKER_NICE)
    except OSError:  # not allowed here: run at the same priority
        pass


def check_archive(path: str, members: int, unpacked: int) -> tuple[Any, ...]:
    """The members and unpacked size of a safe tar.gz at ``path`` (``rota.core.archive``),
    with at most ``members`` members and ``unpacked`` bytes unpacked."""
    limits = ArchiveLimits(members, unpacked)
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            summary = check_members(tar, "body", limits)
    except InvalidSpec as exc:
        return ("invalid", exc.field, exc.reason)
    except (tarfile.TarError, EOFError, OSError) as exc:
        return ("invalid", "body", f"is not a tar.gz archive ({exc.__class__.__name__})")
    return ("ok", (summary.members, summary.unpacked_bytes))


def parse_job_file(data: str) -> tuple[Any, ...]:
    """The YAML (or JSON) document in ``data`` (base64) as JSON-ready values
    (``rota.spec.load``); a document that is not a mapping is ``None``, as no job file is."""
    try:
        found = parse_yaml(decode(base64.b64decode(data)))
    except InvalidSpec as exc:
        return ("invalid", exc.field, exc.reason)
    return ("ok", json_ready(found) if isinstance(found, dict) else None)


FUNCTIONS = {"check_archive": check_archive, "parse_job_file": parse_job_file}


def main() -> None:
    lower_priority()
    for line in sys.stdin.buffer:
        name, *args = json.loads(line)
        try:
            answer = FUNCTIONS[name](*args)
        except Exception as exc:  # noqa: BLE001 - a bug here: the server answers 500
            answer = ("error", f"{exc.__class__.__name__}: {exc}")
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
