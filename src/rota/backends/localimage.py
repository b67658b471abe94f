"""Container images on the local backend: a replica of a job that names an ``image`` runs as
``podman run`` under its supervisor (``rota.backends.shim``), like any other command.

Whether podman works here is probed once (``probe``): ``podman version``, ``podman info``
(which fails where its storage cannot work), then a container of an empty root filesystem,
which must get as far as not finding its command (where the runtime cannot make its cgroups
or set its resource limits, it does not). The answer is the node's feature
``containers`` and its label ``rota.dev/containers`` (``podman 4.3.1``, or ``not available:
<why>``), so that without a working podman a job naming an image is refused at submit.

What ``podman run`` is given (``image_fields``), for the replica as a process would have it:

- a name of the replica's own (``rota-<digest of the data directory>-<job>-<attempt>-<rank>``),
  which the supervisor removes (``podman rm --force``) once the command ended however it
  ended, so that a container killed with its podman (a SIGKILL after a grace period) does not
  outlive the replica. Not ``--rm``: podman 4.3's own removal races ``podman run``'s wait for
  the exit code, which then exits 127 ("container has already been removed") for a command
  that exited 0;
- ``--cgroup-parent``: the container's cgroup is made inside the replica's
  (``rota.backends.cgroups``), so that the replica's CPU, memory and process limits hold for
  the container and its OOM kills are named; podman itself runs in the replica's cgroup, as
  any command; the cgroups podman leaves behind (its monitor's) are removed with the
  container;
- ``--network=host`` and ``--pid=host``: the job listens on this machine's ports (``rota
  forward``, a gang's master address) and its processes are this machine's, signalled as any
  (podman passes SIGTERM, SIGUSR1 and the rest on to the command) and seen by NVML as they are;
- the environment the job would see as a process (``rota.backends.env``), from a file in the
  replica's directory (``--env-file``), never on the command line, which every user may read;
  podman itself runs with the control plane's short inherited environment, its ``HOME`` and
  its ``CONTAINERS_*`` settings, never the job's;
- the job's account: where the job has an owner (``run_as``), ``--user uid:gid`` with its
  supplementary groups (``--group-add``), every capability dropped and no privilege gained by
  set-user-id files; a control plane that runs as root and has no owner to run a job as runs
  it as root, and one that runs as an ordinary user runs podman rootless with
  ``--userns=keep-id``, its own uid inside;
- the working directory, mounted at the same path and entered (``--workdir``), and the
  checkpoint directory and the API's CA file where they lie outside it; the working directory
  is resolved as the owner (``cd -P``), so that a link in it leads only where she may go;
- the device files of the replica's GPUs only (``/dev/nvidia<index>``), and the driver's
  control devices (``/dev/nvidiactl``, ``/dev/nvidia-uvm``, ``/dev/nvidia-uvm-tools``,
  ``/dev/nvidia-modeset``), those that exist (virtual GPUs have none);
  ``CUDA_VISIBLE_DEVICES`` as rota sets it;
- for a GPU share while an MPS daemon runs: its pipe directory and the host's IPC namespace,
  so that CUDA reaches the daemon and the share's MPS limits hold.

Not done here: the NVIDIA driver's user-space libraries are not mounted (an image brings
CUDA's runtime; ``libcuda`` must come with the image or the site's podman hooks), and an image
missing here is pulled by podman as it pulls any (``--pull=missing``).
"""

from __future__ import annotations

import functools
import glob
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from rota.backends.base import LaunchSpec, RunAs
from rota.backends.env import inherited
from rota.core import InvalidSpec

PROBE_TIMEOUT_S = 60.0
CONTROL_DEVICES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
ENV_FILE = "container.env"
# the directories given (shell patterns: a container's cgroup is named after its id, not
# known beforehand), removed, for up to 30 s while a process (podman's monitor, which outlives
# its container a moment, seconds on a loaded machine) still holds one
RMDIRS = ("IFS='\n'; n=0; while [ \"$n\" -lt 300 ]; do left=; "
          'for p; do for d in $p; do [ -d "$d" ] || continue; '
          'rmdir "$d" 2>/dev/null || left=1; done; done; [ -z "$left" ] && exit 0; '
          'n=$((n + 1)); sleep 0.1; done; exit 1')
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
# what podman itself may take from the control plane's environment, besides ``inherited``
PODMAN_OWN = ("HOME", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "TMPDIR")


@dataclass(frozen=True, slots=True)
class Podman:
    """How podman is run here (``argv``: the command and its global options), its version,
    and why it cannot run containers (``problem``; "" when it can)."""

    argv: tuple[str, ...]
    version: str = ""
    problem: str = ""

    @property
    def works(self) -> bool:
        return not self.problem

    def label(self) -> str:
        """The node label ``rota.dev/containers``: ``podman <version>`` or ``not available``."""
        return f"podman {self.version}" if self.works else f"not available: {self.problem}"


def probe(argv: Sequence[str] = ("podman",),
          environ: Mapping[str, str] | None = None) -> Podman:
    """Whether ``argv`` (podman, found on ``PATH``) runs containers here: ``version``, then
    ``info``, each answering within ``PROBE_TIMEOUT_S``; asked once per process for one
    command and environment (a podman installed later is seen by the next process)."""
    environ = os.environ if environ is None else environ
    return _probe(tuple(argv), tuple(sorted(podman_env(environ).items())))


@functools.lru_cache(maxsize=16)
def _probe(argv: tuple[str, ...], env: tuple[tuple[str, str], ...]) -> Podman:
    environ = dict(env)
    path = environ.get("PATH", "")
    if not argv or shutil.which(argv[0], path=path) is None:
        return Podman(argv, problem=f"podman is not installed on this machine "
                                    f"({argv[0] if argv else '?'} is not found on PATH {path}): "
                                    "install podman (Debian's package) and restart rota up")
    version = _ask(argv, environ, "version", "--format", "{{.Client.Version}}")
    if version.startswith("!"):
        return Podman(argv, problem=f"`podman version` fails: {version[1:]}")
    info = _ask(argv, environ, "info", "--format", "{{.Store.GraphDriverName}}")
    if info.startswith("!"):
        return Podman(argv, version, problem=f"`podman info` fails: {info[1:]}")
    ran = _try_run(argv, environ)
    if ran:
        return Podman(argv, version, problem=f"`podman run` fails: {ran}")
    return Podman(argv, version)


def _try_run(argv: tuple[str, ...], environ: Mapping[str, str]) -> str:
    """Why podman cannot start a container here ("" when it can): a container of an empty
    root filesystem, on this machine's network and processes as a job's, must get as far as
    not finding its command (exit code 127), past what the runtime sets up (its cgroups, its
    resource limits)."""
    with tempfile.TemporaryDirectory(prefix="rota-podman-probe-") as root:
        try:
            done = subprocess.run([*argv, "run", "--rm", "--rootfs", "--network=host",
                                   "--pid=host", root, "/rota-probe"], env=podman_env(environ),
                                  capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError) as exc:
            return str(exc)
    said = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
    return "" if done.returncode == 127 and "/rota-probe" in said else said


def _ask(argv: tuple[str, ...], environ: Mapping[str, str], *args: str) -> str:
    """The first line podman answers, or ``!`` and why it failed."""
    try:
        done = subprocess.run([*argv, *args], env=podman_env(environ), capture_output=True,
                              text=True, timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"!{exc}"
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return f"!{said}"
    return (done.stdout.strip().splitlines() or ["?"])[0]


def podman_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment podman runs with: the control plane's short inherited list, its own
    home and runtime directories, and its ``CONTAINERS_*`` settings (storage, registries)."""
    env = inherited(environ)
    env.update((k, environ[k]) for k in PODMAN_OWN if k in environ)
    env.update((k, v) for k, v in environ.items() if k.startswith("CONTAINERS_"))
    return env


def container_name(data_dir: Path, replica_dir: Path) -> str:
    """``rota-<digest of the data directory>-<job>-<attempt>-<rank>``: unique on this machine
    to one replica, so that two control planes never take each other's containers."""
    digest = hashlib.sha256(str(data_dir).encode()).hexdigest()[:8]
    attempt, replica = replica_dir.parent, replica_dir.name.removeprefix("replica-")
    job = _UNSAFE.sub("_", attempt.parent.name)
    return f"rota-{digest}-{job}-{attempt.name.removeprefix('attempt-')}-{replica}"


def image_fields(podman: Podman, name: str, replica_dir: Path, spec: LaunchSpec,
                 env: Mapping[str, str], argv: Sequence[str], device_indices: Sequence[int],
                 mps: bool, cgroup: Mapping[str, Any] | None,
                 dev: str = "/dev") -> dict[str, Any]:
    """What ``spec.json`` says of a replica that runs in ``spec.image``: podman's command line
    (``command``), podman's own environment, no account of its own (podman runs as the
    control plane; the job's account is ``--user``) and the ``cleanup`` after it."""
    assert spec.image is not None
    _write_env_file(replica_dir / ENV_FILE, env)
    workdir = os.path.abspath(spec.workdir)
    if ":" in workdir:
        raise InvalidSpec("workdir", f"must not contain ':' in a job that runs in a container "
                                     f"image (podman's --volume separates paths with it): "
                                     f"{workdir}")
    real = resolved_as(workdir, spec.run_as)
    user, rights = _account(spec.run_as)
    inside = ["--env-file", str(replica_dir / ENV_FILE), *user,
              "--workdir", workdir]  # what ``podman exec`` repeats (``exec_argv``)
    parent, made = _cgroup_parent(cgroup)
    command = [*podman.argv, "run", "--name", name, *parent,
               "--network=host", "--pid=host", *inside, *rights,
               "--volume", f"{real}:{workdir}"]
    for extra in _extra_paths(env, workdir):
        command += ["--volume", f"{extra}:{extra}"]
    for device in _devices(device_indices, dev):
        command += ["--device", device]
    if mps:
        pipes = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")
        command += ["--ipc=host", "--volume", f"{pipes}:{pipes}"]
    command += ["--", spec.image, *argv]
    return {"command": command, "workdir": "/", "env": podman_env(os.environ),
            "run_as": None,
            "container": {"podman": list(podman.argv), "name": name, "exec": inside,
                          **({"ROTA_PORT": env["ROTA_PORT"]} if "ROTA_PORT" in env else {})},
            "cleanup": [[*podman.argv, "rm", "--force", "--ignore", "--time", "0", name],
                        *([["/bin/sh", "-c", RMDIRS, "sh", *made]] if made else [])]}


def _cgroup_parent(plan: Mapping[str, Any] | None) -> tuple[list[str], list[str]]:
    """``--cgroup-parent`` (the replica's cgroup: the container's is made inside it, under its
    limits) and ``--pids-limit=-1`` (no limit of podman's own below the replica's), and the
    cgroup directories podman makes for it that may outlive the container, children first,
    as shell patterns: the container's own (``libpod-<id>``) and its monitor's (``conmon``) in
    every hierarchy, and the replica's path where it is not the replica's own cgroup: in the
    hierarchies rota limits nothing in (cgroup v1's cpuset, devices, ...), and in those where
    this process's cgroup, and so the replica's, is not at the same path as in the memory
    hierarchy (one ``--cgroup-parent`` is one path in every hierarchy: there the container runs
    outside the replica's cgroup, limited by the memory hierarchy's alone). Nothing without a
    plan."""
    if not plan:
        return [], []
    key = "memory" if plan.get("version") == 1 else ""
    mount, leaf = plan["mounts"][key], plan["dirs"][key]
    relative = "/" + os.path.relpath(leaf, mount)
    ours = set(plan["dirs"].values())
    hierarchies = sorted(_cgroup_mounts())
    made = [f"{m}{glob.escape(relative)}/libpod-*" for m in hierarchies] + [
        f"{m}{glob.escape(relative)}/conmon" for m in hierarchies] + [
        f"{m}{glob.escape(relative)}" for m in hierarchies if f"{m}{relative}" not in ours]
    return [f"--cgroup-parent={relative}", "--pids-limit=-1"], made


def _cgroup_mounts() -> set[str]:
    """The mount points of this machine's cgroup hierarchies (v1 and v2)."""
    found = set()
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        fields = line.split(" - ", 1)
        if len(fields) == 2 and fields[1].split()[0] in ("cgroup", "cgroup2"):
            found.add(fields[0].split()[4])
    return found


def exec_argv(container: Mapping[str, Any], argv: Sequence[str], tty: bool) -> list[str]:
    """``podman exec`` of ``argv`` in a replica's container (``container``: what
    ``image_fields`` recorded), with the replica's environment, account and directory."""
    return [*container["podman"], "exec", "--interactive", *(["--tty"] if tty else []),
            *container["exec"], container["name"], *argv]


def _account(run_as: RunAs | None) -> tuple[list[str], list[str]]:
    """Who the command is (``--user``, which ``podman exec`` repeats) and what else it may
    (its groups, its capabilities: options of ``podman run`` only)."""
    if run_as is not None:
        groups = [f"--group-add={g}" for g in run_as.groups if g != run_as.gid]
        return [f"--user={run_as.uid}:{run_as.gid}"], [
            *groups, "--cap-drop=all", "--security-opt=no-new-privileges"]
    return [], ([] if os.geteuid() == 0 else ["--userns=keep-id"])


def _extra_paths(env: Mapping[str, str], workdir: str) -> list[str]:
    """The checkpoint directory and the API's CA file, where they exist outside ``workdir``."""
    out = []
    for key in ("ROTA_CHECKPOINT_DIR", "ROTA_CA_FILE"):
        path = env.get(key)
        if path and os.path.isabs(path) and os.path.exists(path) and not (
                path == workdir or path.startswith(workdir.rstrip("/") + "/")):
            out.append(path)
    return out


def _devices(indices: Sequence[int], dev: str) -> list[str]:
    """``--device`` values: the device files of the GPUs ``indices`` and the driver's control
    devices, those that exist in ``dev`` (virtual GPUs have none), each at its place in
    ``/dev`` in the container."""
    if not indices:
        return []
    names = [f"nvidia{i}" for i in indices] + list(CONTROL_DEVICES)
    return [f"{dev}/{name}:/dev/{name}" for name in names if os.path.exists(f"{dev}/{name}")]


def _write_env_file(path: Path, env: Mapping[str, str]) -> None:
    """``NAME=value`` lines, 0600: podman's env file has no way to write a newline."""
    for key, value in env.items():
        if "\n" in value or "\r" in value:
            raise InvalidSpec(f"env.{key}", "must not contain a line break in a job that runs "
                                            "in a container image (podman's env file has one "
                                            "variable per line)")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        out.writelines(f"{key}={value}\n" for key, value in env.items())


def resolved_as(workdir: str, run_as: RunAs | None) -> str:
    """``workdir`` with every link resolved, as ``run_as`` resolves it (``cd -P``): podman,
    which runs as the control plane, then mounts a directory the owner may reach, never one
    only a link she made would lead it to. ``InvalidSpec`` when she cannot enter it."""
    account: dict[str, Any] = {}
    if run_as is not None:
        account = {"user": run_as.uid, "group": run_as.gid, "extra_groups": list(run_as.groups)}
    done = subprocess.run(["/bin/sh", "-c", 'cd -P -- "$1" && pwd -P', "sh", workdir],
                          capture_output=True, text=True, cwd="/", stdin=subprocess.DEVNULL,
                          env={"PATH": "/usr/bin:/bin"}, timeout=PROBE_TIMEOUT_S, **account)
    if done.returncode != 0 or not done.stdout.strip():
        who = f"OS user {run_as.user}" if run_as is not None else "the control plane's account"
        why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "cannot enter it"
        raise InvalidSpec("workdir", f"cannot be entered as {who}: {why}")
    return done.stdout.rstrip("\n")
