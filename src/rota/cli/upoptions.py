"""The options of ``rota up`` read into what ``rota.server.ServerConfig`` takes: addresses,
the database URL (never echoed with its password), retention, and each backend's options,
those of another backend refused. Every refusal names its option (``error: --OPTION:
REASON``, exit 2) before anything starts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

from rota.core import InvalidSpec


def check_url(text: str, option: str) -> None:
    from urllib.parse import urlsplit

    from rota.cli.app import fail
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as exc:
        fail(option, InvalidSpec("", f"{text!r} is not a URL: {exc}"))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        fail(option, InvalidSpec("", f"expected http://HOST[:PORT] or https://..., got "
                                 f"{text!r}"))


def address(text: str, option: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; ``:PORT`` for 127.0.0.1) as a (host, port)."""
    from rota.cli.app import fail
    host, sep, port = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not sep or not port.isascii() or not port.isdigit() or not 0 <= int(port) <= 65535:
        fail(option, InvalidSpec("", f"must be HOST:PORT with a port 0-65535, got {text!r}"))
    return host, int(port)


def slurm_options(backend: str, gpus: Optional[str], node_file: Optional[Path],
                  gpu_types: Optional[str], placement: str,
                  partition: Optional[str]) -> dict[str, str]:
    """The Slurm options as ``ServerConfig.backend_options``; each refused with another
    backend, and this machine's inventory refused with Slurm."""
    from rota.cli.app import fail
    given = {"--slurm-gpu-types": gpu_types, "--slurm-partition": partition,
             "--slurm-placement": None if placement == "rota" else placement}
    if backend != "slurm":
        for option, value in given.items():
            if value is not None:
                fail(option, InvalidSpec("", "applies only with --backend slurm"))
        return {}
    for option, value in (("--gpus", gpus), ("--node-file", node_file)):
        if value is not None:
            fail(option, InvalidSpec("", "describes this machine for --backend local; with "
                                         "--backend slurm the nodes come from Slurm (name "
                                         "their GPU models with --slurm-gpu-types)"))
    return {"gpu_types": gpu_types or "", "placement": placement, "partition": partition or ""}


def local_options(backend: str, job_pids: int, job_disk: Optional[str]) -> dict:
    """The local backend's limits of each job (``--job-pids``, ``--job-disk``), refused with
    another backend (whose jobs the local backend's cgroups do not reach)."""
    from rota.cli.app import fail
    from rota.core import parse_memory_mib
    if backend != "local":
        for option, value in (("--job-pids", job_pids != 4096 or None),
                              ("--job-disk", job_disk)):
            if value:
                fail(option, InvalidSpec("", "applies only with --backend local"))
        return {}
    options: dict = {"job_pids": job_pids}
    if job_disk is not None:
        try:
            options["job_disk_mib"] = parse_memory_mib(job_disk, "")
        except InvalidSpec as exc:
            fail("--job-disk", InvalidSpec("", exc.reason))
        if options["job_disk_mib"] <= 0:
            fail("--job-disk", InvalidSpec("", f"must be more than 0, got {job_disk!r}"))
    return options


def retention_of(workdirs: str, logs: str, uploads: str):
    """The ``--keep-*`` options as a ``Retention``, each error naming its option."""
    from rota.cli.app import fail
    from rota.core import parse_duration_s
    from rota.server.retention import Retention
    seconds = {}
    for option, text in (("keep-workdirs", workdirs), ("keep-logs", logs),
                         ("keep-uploads", uploads)):
        try:
            seconds[option] = parse_duration_s(text, option)
        except InvalidSpec as exc:
            fail(f"--{option}", InvalidSpec("", exc.reason))
    try:
        return Retention(seconds["keep-workdirs"], seconds["keep-logs"], seconds["keep-uploads"])
    except InvalidSpec as exc:
        fail(f"--{exc.field}", InvalidSpec("", exc.reason))


BACKEND_FIELDS = {"backend": "--backend", "kubeconfig": "--kubeconfig",
                   "namespace": "--kube-namespace", "image": "--kube-default-image",
                   "node_selector": "--kube-node-selector"}


def kube_options(backend: str, kubeconfig: Optional[Path], namespace: str,
                 image: Optional[str], pod_user: Optional[str],
                 tolerate: Optional[List[str]], node_selector: Optional[str],
                 node_lost_after: float = 300.0) -> dict:
    """The options of the chosen backend (``rota.server.ServerConfig.backend_options``); a
    kubernetes option given with another backend is refused."""
    from rota.cli.app import fail
    given = {"--kubeconfig": kubeconfig, "--kube-namespace": namespace != "rota" or None,
             "--kube-default-image": image, "--kube-pod-user": pod_user,
             "--kube-tolerate": tolerate, "--kube-node-selector": node_selector,
             "--kube-node-lost-after": node_lost_after != 300.0 or None}
    if backend != "kubernetes":
        for option, value in given.items():
            if value:
                fail(option, InvalidSpec("", "is an option of --backend kubernetes"))
        return {}
    options: dict = {"namespace": namespace, "node_lost_after_s": node_lost_after}
    if kubeconfig is not None:
        options["kubeconfig"] = str(kubeconfig)
    if image is not None:
        from rota.spec.types import check_image
        try:
            options["default_image"] = check_image(image)
        except InvalidSpec as exc:
            fail("--kube-default-image", InvalidSpec("", exc.reason))
    if pod_user is not None:
        options["pod_user"] = pod_user
    if tolerate:
        options["tolerate"] = tuple(tolerate)
    if node_selector:
        options["node_selector"] = node_selector
    return options


def database_url(db: Optional[str], db_file: Optional[Path]) -> Optional[str]:
    """The URL from ``--db``/``ROTA_DB_URL`` or ``--db-file``; a warning when a password was
    typed on the command line."""
    import os

    from rota.cli.app import fail
    if db is not None and db_file is not None:
        fail("--db-file", InvalidSpec("", "give --db (or ROTA_DB_URL) or --db-file, not both"))
    if db_file is not None:
        try:
            lines = db_file.read_text().splitlines()
        except OSError as exc:
            fail("--db-file", InvalidSpec("", f"cannot read {db_file}: {exc.strerror}"))
        if not lines or not lines[0].strip():
            fail("--db-file", InvalidSpec("", f"{db_file} is empty; write the URL on its first "
                                              "line"))
        return lines[0].strip()
    if db is not None and db != os.environ.get("ROTA_DB_URL") and _has_password(db):
        print("warning: --db: the database password on the command line is visible to every "
              "local user in ps; give the URL in ROTA_DB_URL or --db-file instead",
              file=sys.stderr)
    return db


def _has_password(url: str) -> bool:
    from sqlalchemy.engine import make_url
    try:
        return bool(make_url(url).password)
    except Exception:  # not a URL: the store says so, naming --db
        return False
