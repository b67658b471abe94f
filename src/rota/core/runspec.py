"""A job's launch spec: one frozen value, read once from the ``run`` mapping stored with it.

``RunSpec`` is what the backend needs to run a job (command, working directory, image,
environment, upload, checkpoint signal and grace, restart budget, idle rules, port, disk limit).
It is built when the job is submitted (``read_run``: every refusal an ``InvalidSpec`` naming
its ``run.*`` field) and stored as ``RunSpec.stored()``, a plain JSON mapping with a
``"version"`` key, so that what a later release reads is never guessed (version 2)::

    {"version": 2,
     "command": ["python", "train.py"],           # argv, never a string
     "workdir": "/abs/dir" | null,                # where the command runs
     "image": "python:3.12" | null,               # the container image (container backends)
     "env": {"NAME": "value"},
     "upload": "<upload id>" | null,              # <data_dir>/uploads/<id>.tar.gz
     "checkpoint": {"dir": str | null, "signal": "SIGTERM", "grace_s": 30.0 | null},
     "restart": {"max_retries": 0, "backoff_s": 10.0},
     "idle": {"gpu_util_below": 5.0, ...} | null, # read by idle reclamation
     "port": 8000 | 0,                            # a service replica's ROTA_PORT (0: any free)
     "disk_mib": 20480,                           # the working directory's disk limit
     "volumes": [{"claim": "data", "path": "/data", "read_only": false}],  # container backends
     "shm_mib": 8192,                             # /dev/shm's size (container backends)
     "slurm": {"partition": "gpu", "qos": "normal"},  # batch system options (Slurm)
     "datasets": ["imagenet"]}                    # read at $ROTA_DATASETS/<name>

``port``, ``disk_mib``, ``volumes``, ``shm_mib``, ``slurm`` and ``datasets`` are left out when
the job has none (``rota.core.mounts``: the rules of volumes and shm; ``rota.core.batchopts``:
those of ``slurm``, whose values are what the job runs with once its queue filled them in;
``rota.core.datasets``: those of dataset names).

Version 1, the mapping stored before versions existed, has no ``"version"`` key, may leave any
key but ``command`` out, and may hold the command as one string (a job file's entrypoint, run
by ``/bin/sh -c``); ``read_run`` upgrades it. A version it does not know, or a field it cannot
read, is an ``InvalidSpec`` naming the field: the job can never start as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from rota.core.batchopts import read_options
from rota.core.datasets import check_names
from rota.core.errors import InvalidSpec
from rota.core.mounts import Volume, check_mounts, read_volumes

# Linux's signal numbers by name (x86-64 and arm64 alike), as ``signal.Signals`` has them: the
# core does no I/O, so it keeps the table instead of importing ``signal``
# (tests/core/test_runspec_stored.py checks it against the ``signal`` module)
SIGNALS: Mapping[str, int] = MappingProxyType({
    "SIGHUP": 1, "SIGINT": 2, "SIGQUIT": 3, "SIGILL": 4, "SIGTRAP": 5, "SIGABRT": 6,
    "SIGIOT": 6, "SIGBUS": 7, "SIGFPE": 8, "SIGKILL": 9, "SIGUSR1": 10, "SIGSEGV": 11,
    "SIGUSR2": 12, "SIGPIPE": 13, "SIGALRM": 14, "SIGTERM": 15, "SIGSTKFLT": 16,
    "SIGCHLD": 17, "SIGCLD": 17, "SIGCONT": 18, "SIGSTOP": 19, "SIGTSTP": 20, "SIGTTIN": 21,
    "SIGTTOU": 22, "SIGURG": 23, "SIGXCPU": 24, "SIGXFSZ": 25, "SIGVTALRM": 26,
    "SIGPROF": 27, "SIGWINCH": 28, "SIGIO": 29, "SIGPOLL": 29, "SIGPWR": 30, "SIGSYS": 31,
    "SIGRTMIN": 34, "SIGRTMAX": 64})
# each number's own name (not an alias), as ``signal.Signals(number).name`` gives it
SIGNAL_NAMES: Mapping[int, str] = MappingProxyType(
    {n: name for name, n in SIGNALS.items()
     if name not in ("SIGIOT", "SIGCLD", "SIGPOLL")})

VERSION = 2
UPLOAD_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")
KNOWN_KEYS = frozenset({"version", "command", "workdir", "image", "env", "upload",
                        "checkpoint", "restart", "idle", "port", "disk_mib", "volumes",
                        "shm_mib", "slurm", "datasets"})
IDLE_KEYS = frozenset({"gpu_util_below", "for_s", "inactive_for_s", "max_lifetime_s",
                       "warn_before_s"})


@dataclass(frozen=True, slots=True)
class RunSpec:
    command: tuple[str, ...]
    workdir: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    upload: str | None = None
    checkpoint_dir: str | None = None
    checkpoint_signal: int = SIGNALS["SIGTERM"]
    grace_s: float | None = None  # None: the job's own grace period
    max_retries: int = 0
    image: str | None = None  # the container image the job names
    backoff_s: float = 10.0       # before the first retry; doubled for each further one
    port: int | None = None       # ROTA_PORT (``LaunchSpec.port``)
    disk_mib: int | None = None   # the working directory's disk limit (``LaunchSpec.disk_mib``)
    idle: Mapping[str, float | None] | None = None  # the job's own idle rules
    volumes: tuple[Volume, ...] = ()  # claims mounted in its container (``LaunchSpec``)
    shm_mib: int | None = None        # /dev/shm's size in its container (``LaunchSpec``)
    slurm: Mapping[str, str] = field(default_factory=dict)  # batch options (``batchopts``)
    datasets: tuple[str, ...] = ()    # the datasets it reads (``rota.core.datasets``)

    def __post_init__(self) -> None:
        """Freeze the mappings too: one value is shared by every pass that reads the job."""
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))
        object.__setattr__(self, "slurm", MappingProxyType(dict(self.slurm)))
        if self.idle is not None:
            object.__setattr__(self, "idle", MappingProxyType(dict(self.idle)))

    def stored(self) -> dict[str, Any]:
        """The versioned JSON form kept with the job; ``read_run`` reads it back equal."""
        out = {
            "version": VERSION, "command": list(self.command), "workdir": self.workdir,
            "image": self.image, "env": dict(self.env), "upload": self.upload,
            "checkpoint": {"dir": self.checkpoint_dir, "grace_s": self.grace_s,
                           "signal": SIGNAL_NAMES[self.checkpoint_signal]},
            "restart": {"max_retries": self.max_retries, "backoff_s": self.backoff_s},
            "idle": None if self.idle is None else dict(self.idle),
        }
        if self.port is not None:  # only a service's replica serves
            out["port"] = self.port
        if self.disk_mib is not None:  # only a job that names its disk limit has one
            out["disk_mib"] = self.disk_mib
        if self.volumes:
            out["volumes"] = [v.stored() for v in self.volumes]
        if self.shm_mib is not None:
            out["shm_mib"] = self.shm_mib
        if self.slurm:
            out["slurm"] = dict(self.slurm)
        if self.datasets:
            out["datasets"] = list(self.datasets)
        return out


def read_run(run: object) -> RunSpec:
    """The ``RunSpec`` of a stored or submitted ``run`` mapping of any version (module
    docstring); ``InvalidSpec`` with the ``run.*`` field it cannot read."""
    if not isinstance(run, Mapping):
        raise InvalidSpec("run", f"must be a mapping, got {type(run).__name__}")
    version = run.get("version", 1)
    if isinstance(version, bool) or version not in (1, VERSION):
        raise InvalidSpec("run.version", f"unknown version {version!r}: this release reads "
                          f"versions 1 to {VERSION}")
    return _read_2(_upgrade_1(run) if version == 1 else run)


def _upgrade_1(run: Mapping[str, Any]) -> dict[str, Any]:
    """Version 1 in the shape of version 2: its string command becomes the shell's argv."""
    out = {**run, "version": VERSION}
    command = run.get("command")
    if isinstance(command, str):
        if not command.strip():
            raise InvalidSpec("run.command", "must not be empty")
        out["command"] = ["/bin/sh", "-c", command]
    return out


def _read_2(run: Mapping[str, Any]) -> RunSpec:
    _known(run, KNOWN_KEYS, "run")
    checkpoint = _mapping(run.get("checkpoint"), "run.checkpoint")
    restart = _mapping(run.get("restart"), "run.restart")
    volumes = read_volumes(run.get("volumes"), "run.volumes")
    shm_mib = run.get("shm_mib")
    check_mounts(volumes, shm_mib, "run.", "shm_mib")  # type: ignore[arg-type]
    return RunSpec(
        volumes=volumes, shm_mib=shm_mib,  # type: ignore[arg-type]
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
        idle=_idle(run.get("idle")),
        slurm=read_options(run.get("slurm"), "run.slurm"),
        datasets=check_names(run.get("datasets"), "run.datasets"),
    )


def _known(mapping: Mapping[str, Any], known: frozenset[str], where: str) -> None:
    unknown = sorted(set(mapping) - known)
    if unknown:
        raise InvalidSpec(f"{where}.{unknown[0]}",
                          f"unknown key; known: {', '.join(sorted(known))}")


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


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
    if not isinstance(value, (list, tuple)) or not value:
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
        return SIGNALS[name]
    except KeyError:
        raise InvalidSpec("run.checkpoint.signal", "expected a signal name such as SIGTERM or "
                          f"SIGUSR1, got {value!r}") from None


def _grace(value: object) -> float | None:
    if value is None:
        return None
    if not _number(value) or not value >= 0:  # type: ignore[operator]
        raise InvalidSpec("run.checkpoint.grace_s", f"must be a non-negative number, got {value!r}")
    return float(value)  # type: ignore[arg-type]


def _backoff(value: object) -> float:
    if not _number(value) or not 0 <= value <= 600:  # type: ignore[operator]
        raise InvalidSpec("run.restart.backoff_s",
                          f"must be a number of seconds from 0 to 600, got {value!r}")
    return float(value)  # type: ignore[arg-type]


def _retries(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidSpec("run.restart.max_retries",
                          f"must be a non-negative integer, got {value!r}")
    return value


def _idle(value: object) -> dict[str, float | None] | None:
    if value is None:
        return None
    rules = _mapping(value, "run.idle")
    out: dict[str, float | None] = {}
    _known(rules, IDLE_KEYS, "run.idle")
    for key, item in rules.items():
        if item is not None and (not _number(item) or not item >= 0):
            raise InvalidSpec(f"run.idle.{key}", f"must be a non-negative number or null, "
                              f"got {item!r}")
        out[key] = None if item is None else float(item)
    return out
