"""The local backend: each replica of a job is a supervised process group on this machine.

Layout under the data directory (one *attempt* per launch of a job)::

    jobs/<job id>/attempt-<n>/handle.json          the handle, as returned by launch
    jobs/<job id>/attempt-<n>/replica-<rank>/      supervisor.json, spec.json, child.json,
                                                   stop.json, status.json, stdout.log, stderr.log

Launching attempt ``n`` is idempotent. The directory is named after the attempt, so a control
plane that died before saving the handle can find the attempt again (``recover``): each
replica's supervisor creates ``supervisor.json`` exclusively before it starts anything, and
``recover`` creates it itself (*fences* the replica, recording it as never started) where no
supervisor did. Exactly one of the two wins, so a replica either runs under a supervisor the
handle names, or never runs. An attempt none of whose replicas started is started again in
``attempt-<n>.<k>`` (k = 1, 2, ...): a fenced directory is never reused.

Each replica runs under its own supervisor (``rota.backends.shim``, forked by the spawner the
backend keeps: ``rota.backends.spawner``), in a session of its own so that it survives the
control plane. The supervisor owns the replica's fate: it forwards
signals, escalates a stop to SIGKILL after the grace period, and writes ``status.json`` when the
command ends. This backend only writes requests (``stop.json``) and reads results
(``rota.backends.localstatus``), so a new instance over the same data directory (``adopt``)
knows everything the old one knew:

- ``status.json`` present: the replica exited, with that exit code;
- the supervisor still runs (same pid, same start time, same boot): running;
- neither: lost (the supervisor was killed, or the machine rebooted).

A replica's ``ref`` in its handle holds ``pid`` and ``start_ticks`` of its supervisor, its
directory ``dir`` and its log files ``stdout`` and ``stderr``; the handle's ``ref`` holds the
``boot_id`` of the machine it was launched on, and its ``launch_id`` is the attempt directory.

Isolation. Attempt and replica directories are 0700 and the control plane's alone: a job
cannot read its supervisor's files, nor forge how it ended. A job's log files are its own
(0600, owned by the account it runs as), and ``jobs/<job id>`` is 0711 so that its owner can
reach the working directory inside it (``rota.control.runspec``) without listing anything.
When the launch names an OS account (``LaunchSpec.run_as``), the supervisor, which runs as the
control plane's own user (root), starts the command with that account's uid, gid and
supplementary groups, so that a job has its owner's rights and never the control plane's. Its
working directory is entered after that, as the account (``rota.backends.shim``): no path a job
names is followed as root, so a link its owner swaps after every check leads only where she may
go. Log files are opened without following links. The environment a job inherits from the
control plane is the short list of ``rota.backends.env``.

Limits (``rota.backends.joblimits``): each replica runs in a cgroup with its job's CPU and
memory request and a process limit, and a job's working directory is measured against its disk
limit; the node's label ``JOB_LIMITS`` says how they are enforced, or why they are not.
"""

from __future__ import annotations

import os
import signal as signals
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from rota.backends import cgroups, localexec, localimage, localstatus
from rota.backends.base import (
    Activity, BackendError, Capabilities, Channel, Handle, LaunchSpec, ReplicaHandle,
    ReplicaState, Status,
)
from rota.backends.datacache import DataCache, Held
from rota.backends.env import ReplicaContext, account_env, check_job_env, inherited, replica_env
from rota.backends.exits import ExitWatcher
from rota.backends.gpus import local_node
from rota.backends.health import GpuHealth
from rota.backends.joblimits import JobLimits
from rota.backends.logfiles import STREAMS, read_from
from rota.backends.localfiles import (  # noqa: F401 - Proc, proc and free_port are used from here
    JOB_UMASK, Proc, account_json, argv_of, boot_of, free_port, log_file, marked,
    mps_running, proc, served_port, try_name,
)
from rota.backends.localdata import Datasets
from rota.backends.localstatus import live_child, on_sick_gpu, replica_status
from rota.backends.nvml import Nvml
from rota.backends.procs import (
    boot_id, claim_json, is_running, make_dirs, read_json, signal_group, signal_pid,
    start_ticks, write_json_atomic,
)
from rota.backends.shim import CLAIM, FORWARDED
from rota.backends.spawner import Spawner
from rota.core import (
    GPU_MEMORY_ENFORCEMENT, JOB_LIMITS, MILLI, InvalidSpec, Job, Node, Placement,
    ReplicaPlacement,
)
from rota.core.nodelabels import CONTAINER_IMAGES
from rota.core.nodes import CONTAINERS
from rota.core.datadir import job_home
from rota.core.datasets import Dataset


class LocalBackend:
    """Runs jobs on this machine. ``nvml`` (``Nvml.load()`` on a GPU machine) is used for the
    inventory when ``node`` is not given; ``device_ids`` chooses what ``CUDA_VISIBLE_DEVICES``
    holds: device ``index`` or ``uuid`` (a MIG instance: its ``MIG-...`` UUID either way);
    ``podman``: the command that runs podman, for jobs that name a container image (probed
    once, on first use: ``rota.backends.localimage``)."""

    name = "local"

    def __init__(self, data_dir: str | Path, node: Node | None = None, nvml: Nvml | None = None,
                 *, master_addr: str = "127.0.0.1", device_ids: str = "index",
                 health: GpuHealth | None = None, job_pids: int = cgroups.DEFAULT_PIDS,
                 job_disk_mib: int | None = None,
                 podman: Sequence[str] = ("podman",),
                 dataset_cache: DataCache | None = None) -> None:
        if device_ids not in ("index", "uuid"):
            raise InvalidSpec("device_ids", f"must be index or uuid, got {device_ids!r}")
        self.data_dir = Path(data_dir).resolve()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.nvml = nvml
        self.node = node if node is not None else local_node(nvml=nvml)
        self.master_addr = master_addr
        self.device_ids = device_ids
        self._lock = threading.Lock()
        self.spawner = Spawner()  # forks each replica's supervisor (rota.backends.spawner)
        self._tracked: dict[str, Handle] = {}
        self._exits: ExitWatcher | None = None
        self.health = health if health is not None else (GpuHealth(nvml) if nvml else None)
        self.memory_watcher: Any = None  # a rota.backends.watcher.MemoryWatcher attaches itself
        self._podman_argv, self._podman = tuple(podman), None
        self.limits = JobLimits(self.data_dir, job_pids, job_disk_mib, self.tracked,
                                self.stop_replica)  # cgroups and disk (rota.backends.joblimits)
        self.data = Datasets(self.data_dir, dataset_cache, self.tracked)

    @property
    def capabilities(self) -> Capabilities:
        # not ``containers``: a job here, in an image or not, has its workdir on this machine
        return Capabilities(fractional_gpu=True,
                            memory_enforcement=self.nvml is not None and not self.unenforced(),
                            compute_enforcement=mps_running(), gang=True, signals=True,
                            interactive=True, datasets=self.data.cache is not None)

    def podman(self) -> localimage.Podman:
        """Whether podman runs container images here, probed on first use."""
        with self._lock:
            if self._podman is None:
                self._podman = localimage.probe(self._podman_argv)
            return self._podman

    def unenforced(self) -> str:
        """Why GPU-memory shares are not enforced now ("": they are, or no watcher says)."""
        watcher = self.memory_watcher
        if watcher is None or watcher.enforcing:
            return ""
        return f"not enforced: the memory watcher's NVML check fails ({watcher.last_error!r})"

    def inventory(self) -> list[Node]:
        """This machine, its unhealthy GPUs marked so (``rota.backends.health``; a MIG
        instance by its GPU's health), and the
        label ``GPU_MEMORY_ENFORCEMENT`` while its GPU-memory shares are not enforced (``unenforced``),
        its features from this backend's capabilities, and ``containers`` (with the label
        ``CONTAINER_IMAGES`` saying how, or why not) where podman works."""
        node, sick, off, podman = self.node, self._sick(), self.unenforced(), self.podman()
        node = replace(node, labels={**node.labels, JOB_LIMITS: self.limits_enforced(),
                                     CONTAINER_IMAGES: podman.label()},
                       features=self.capabilities.features | (
                           {CONTAINERS} if podman.works else set()))
        if off:
            node = replace(node, labels={**node.labels, GPU_MEMORY_ENFORCEMENT: off})
        if not sick:
            return [node]
        return [replace(node, devices=tuple(marked(d, sick) for d in node.devices))]

    def dataset_caches(self) -> dict[str, list[Held]]:
        """What this machine's dataset cache holds (``rota.backends.datacache``)."""
        return {self.node.name: self.data.held()}

    def prefetch(self, node: str, datasets: Sequence[Dataset], wanted: frozenset[str]) -> None:
        """Copy ``datasets`` into this machine's cache before a job that reads them starts."""
        self.data.prefetch(datasets, wanted)

    def limits_enforced(self) -> str:
        """How jobs' CPU, memory and process limits are enforced here, or why they are not."""
        return self.limits.enforced()

    def _sick(self) -> dict[int, str]:
        return self.health.problems() if self.health is not None else {}

    def watch(self, wake: Callable[[], None]) -> None:
        """Wake ``wake`` when a tracked replica's supervisor exits (a pidfd per supervisor);
        watch the GPUs' health."""
        if self._exits is not None:
            return
        self._exits = ExitWatcher(wake)
        self._exits.start()
        self.limits.start()
        if self.health is not None:
            self.health.start()
        for handle in self.tracked():
            self._watch(handle)

    def unwatch(self) -> None:
        self.limits.stop()
        if self._exits is not None:
            self._exits.stop()
            self._exits = None
        if self.health is not None:
            self.health.stop()

    def _watch(self, handle: Handle) -> None:
        exits = self._exits
        if exits is not None:
            for r in handle.replicas:
                exits.watch(proc(r).pid)

    def tracked(self) -> list[Handle]:
        """Handles launched or adopted by this instance whose replicas have not all ended."""
        with self._lock:
            return list(self._tracked.values())

    # -- launch ------------------------------------------------------------------------------

    def launch(self, job: Job, placement: Placement, spec: LaunchSpec,
               attempt: int | None = None) -> Handle:
        """Start every replica of ``job``. With ``attempt``, an attempt that was started
        before (by this process or an earlier one) is returned as it is, not started again.
        A job that names a container image runs in it through podman
        (``rota.backends.localimage``), or is refused (``InvalidSpec`` on ``image``) where
        podman does not work."""
        if spec.image is not None and not self.podman().works:
            raise InvalidSpec("image", f"names the container image {spec.image!r}, which this "
                                       f"machine cannot run: {self.podman().problem}")
        argv = argv_of(spec.command)
        job_env = check_job_env(spec.env)
        if spec.run_as is None and not Path(spec.workdir).is_dir():
            # under another account, the supervisor enters it as that account, or says why not
            raise InvalidSpec("workdir", f"is not an existing directory: {spec.workdir}")
        if len(placement.replicas) != job.replicas:
            raise InvalidSpec("placement.replicas", f"has {len(placement.replicas)} replicas, "
                                                    f"job {job.id} has {job.replicas}")
        for rank, rep in enumerate(placement.replicas):
            self._check_replica(rep, f"placement.replicas[{rank}]")
        if attempt is not None:
            found = self.recover(job, placement, attempt)
            if found is not None:
                return found
        with self.data.filled(job, spec) as (data_env, keys):  # its datasets copied here
            adir = (self._new_attempt_dir(job.id) if attempt is None
                    else self._fresh_try(job.id, attempt))
            port, world = free_port(self.master_addr), len(placement.replicas)
            serves = spec.port or (None if spec.port is None else free_port(self.master_addr))
            replicas: list[ReplicaHandle] = []
            try:
                for rank, rep in enumerate(placement.replicas):
                    ctx = ReplicaContext(job.id, rank, world, self.master_addr, port,
                                         rep.devices, self._device_ids(rep), serves)
                    self.before_start(adir, rank)
                    replicas.append(self._start_replica(adir, ctx, rep, {**job_env, **data_env},
                                                        spec, argv, job))
            except (OSError, InvalidSpec) as exc:
                for started in replicas:
                    self._stop_replica(proc(started), 0, "launch of the gang failed")
                if isinstance(exc, InvalidSpec):  # a replica's image cannot run as written
                    raise
                raise BackendError("launch_failed", f"cannot start job {job.id}: {exc}") from exc
            ref: dict[str, object] = {"boot_id": boot_id()}
            if keys:  # the cache keys it reads: pinned while it runs
                ref["datasets"] = keys
            if serves is not None:
                ref["endpoint"] = f"{self.master_addr}:{serves}"
            return self._save(Handle(self.name, job.id, str(adir), tuple(replicas), attempt, ref))

    def before_start(self, attempt_dir: Path, rank: int) -> None:
        """Called before each replica's supervisor is started; does nothing. Tests override it
        to stop a launch half-way, as a killed control plane would."""

    def _save(self, handle: Handle) -> Handle:
        write_json_atomic(Path(handle.launch_id) / "handle.json", handle.to_dict(), mode=0o600,
                          durable=False)
        return self._track(handle)

    # -- recover -----------------------------------------------------------------------------

    def recover(self, job: Job, placement: Placement, attempt: int) -> Handle | None:
        """The handle of attempt ``attempt`` of ``job`` if any replica of it was started
        (running or ended); None when it provably never started. Replicas that never started
        are fenced (see the module docstring) and report an exit without a code."""
        for adir in self._tries(job.id, attempt):
            saved = read_json(adir / "handle.json")
            if saved is not None:
                return self._track(Handle.from_dict(saved, f"{adir}/handle.json"))
            handle = self._recover_try(adir, job, placement, attempt)
            if handle is not None:
                return handle
        return None

    def _recover_try(self, adir: Path, job: Job, placement: Placement,
                     attempt: int) -> Handle | None:
        claims = [self._claim_or_fence(adir / f"replica-{rank}")
                  for rank in range(len(placement.replicas))]
        if not any(claims):
            return None
        boot = next(c["boot_id"] for c in claims if c)
        replicas = tuple(
            ReplicaHandle(rank, rep.node, rep.devices, Proc(
                c["pid"] if c else os.getpid(), (c["start_ticks"] or -1) if c else -1,
                str(adir / f"replica-{rank}"), str(adir / f"replica-{rank}/stdout.log"),
                str(adir / f"replica-{rank}/stderr.log")).ref())
            for rank, (rep, c) in enumerate(zip(placement.replicas, claims)))
        ref: dict[str, object] = {"boot_id": boot}
        port = served_port(adir)
        if port is not None:
            ref["endpoint"] = f"{self.master_addr}:{port}"
        return self._save(Handle(self.name, job.id, str(adir), replicas, attempt, ref))

    def _claim_or_fence(self, rdir: Path) -> dict | None:
        """The claim of the supervisor of ``rdir``; None after fencing a replica that none
        claimed (its supervisor, should it start later, finds the claim taken and exits)."""
        rdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        fence = {"fenced": "never started: the control plane stopped during the launch",
                 "pid": os.getpid()}
        if claim_json(rdir / CLAIM, fence):
            write_json_atomic(rdir / "status.json", {"exit_code": None, "signal": None,
                                                     "reason": fence["fenced"]})
            return None
        claim = read_json(rdir / CLAIM)
        return None if claim is None or "fenced" in claim else claim

    def _track(self, handle: Handle) -> Handle:
        with self._lock:
            self._tracked[handle.launch_id] = handle
        self._watch(handle)
        return handle

    def _tries(self, job_id: str, attempt: int) -> list[Path]:
        """The directories of attempt ``attempt`` that exist, oldest first."""
        job_dir = job_home(self.data_dir, job_id)
        found, k = [], 0
        while (path := job_dir / try_name(attempt, k)).is_dir():
            found.append(path)
            k += 1
        return found

    def _job_dir(self, job_id: str) -> Path:
        """``jobs/<job id>``, 0711: its owner may reach the working directory inside it."""
        return make_dirs(job_home(self.data_dir, job_id), 0o711)

    def _fresh_try(self, job_id: str, attempt: int) -> Path:
        job_dir = self._job_dir(job_id)
        k = 0
        while True:
            try:
                (job_dir / try_name(attempt, k)).mkdir(mode=0o700)
                return job_dir / try_name(attempt, k)
            except FileExistsError:
                k += 1

    def _check_replica(self, rep: ReplicaPlacement, field: str) -> None:
        if rep.node != self.node.name:
            raise BackendError("foreign_node", f"{field}: node {rep.node!r} is not this machine "
                                               f"({self.node.name!r})")
        known = {d.index for d in self.node.devices}
        for share in rep.devices:
            if share.index not in known:
                raise BackendError("unknown_device",
                                   f"{field}: GPU {share.index} does not exist on {rep.node}")

    def _device_ids(self, rep: ReplicaPlacement) -> tuple[str, ...]:
        """What names each device in CUDA_VISIBLE_DEVICES: its index or UUID, as configured;
        a MIG instance only by its UUID (``MIG-...``), which is how CUDA names one."""
        devices = {d.index: d for d in self.node.devices}
        names = []
        for share in rep.devices:
            device = devices[share.index]
            by_uuid = device.mig or self.device_ids == "uuid"
            names.append(device.uuid if by_uuid and device.uuid else str(share.index))
        return tuple(names)

    def _new_attempt_dir(self, job_id: str) -> Path:
        job_dir = self._job_dir(job_id)
        n = len(list(job_dir.glob("attempt-*")))
        while True:
            try:
                (job_dir / f"attempt-{n}").mkdir(mode=0o700)
                return job_dir / f"attempt-{n}"
            except FileExistsError:
                n += 1

    def _start_replica(self, attempt: Path, ctx: ReplicaContext, rep: ReplicaPlacement,
                       job_env: Mapping[str, str], spec: LaunchSpec, argv: list[str],
                       job: Job) -> ReplicaHandle:
        rdir = attempt / f"replica-{ctx.rank}"
        rdir.mkdir(mode=0o700)
        base = {**inherited(os.environ), **account_env(spec.run_as)}
        fields = {
            "command": argv, "workdir": os.path.abspath(spec.workdir),  # no link followed here
            "env": replica_env(base, job_env, ctx), "umask": JOB_UMASK,
            "run_as": account_json(spec.run_as),
            **self.limits.spec_fields(rdir, job, spec.disk_mib)}
        if spec.image is not None:  # podman runs the command in the image, as the job's owner
            fields.update(localimage.image_fields(
                self.podman(), localimage.container_name(self.data_dir, rdir), rdir, spec,
                fields["env"], argv, [d.index for d in rep.devices],
                any(d.milli < MILLI for d in rep.devices) and mps_running(), fields["cgroup"]))
        write_json_atomic(rdir / "spec.json", fields, mode=0o600, durable=False)
        out, err = rdir / "stdout.log", rdir / "stderr.log"
        with log_file(out, spec.run_as) as fout, log_file(err, spec.run_as) as ferr:
            pid = self.spawner.start(rdir, fout.fileno(), ferr.fileno())
        ref = Proc(pid, start_ticks(pid) or -1, str(rdir), str(out), str(err)).ref()
        return ReplicaHandle(ctx.rank, rep.node, rep.devices, ref)

    # -- observe -----------------------------------------------------------------------------

    def poll(self, handles: Sequence[Handle]) -> list[Status]:
        """The status of each handle: a few file reads and one look at ``/proc`` per
        replica, no process of its own."""
        boot, sick = boot_id(), self._sick()
        out = []
        for handle in handles:
            status = Status(tuple(on_sick_gpu(replica_status(handle, r, boot), r, sick)
                                  for r in handle.replicas))
            if status.state is not ReplicaState.RUNNING:
                with self._lock:
                    self._tracked.pop(handle.launch_id, None)
                self.limits.release(handle)
            out.append(status)
        return out

    def adopt(self, handle: Handle) -> Status:
        """Take over a handle persisted by an earlier instance (or process) of this backend."""
        if handle.backend != self.name:
            raise BackendError("foreign_handle", f"handle of backend {handle.backend!r}, "
                                                 f"not {self.name!r}")
        for k, r in enumerate(handle.replicas):
            proc(r, f"handle.replicas[{k}]")
        self._track(handle)
        return self.poll([handle])[0]

    def activity(self, handles: Sequence[Handle]) -> list[Activity]:
        """Each launch's GPU utilisation and when its log files last grew
        (``rota.backends.localstatus``)."""
        return localstatus.activity(self.nvml, handles)

    def notify(self, handle: Handle, message: str) -> None:
        """Append ``[rota] message`` to every replica's stderr log, keeping its time of change
        (``rota.backends.localstatus``)."""
        localstatus.notify(handle, message)

    def endpoint(self, handle: Handle) -> str | None:
        found = handle.ref.get("endpoint")
        return found if isinstance(found, str) else None

    def read_log(self, handle: Handle, rank: int, stream: str, offset: int) -> Iterator[bytes]:
        """The bytes of a replica's ``stdout.log`` or ``stderr.log`` from ``offset`` on."""
        if stream not in STREAMS:
            raise InvalidSpec("stream", f"must be stdout or stderr, got {stream!r}")
        if not 0 <= rank < len(handle.replicas):
            return
        yield from read_from(str(getattr(proc(handle.replicas[rank]), stream)), offset)

    def open_exec(self, handle: Handle, rank: int, argv: Sequence[str], tty: bool) -> Channel:
        """``argv`` inside replica ``rank``, as its command runs (``rota.backends.localexec``)."""
        return localexec.open_exec(handle, rank, argv, tty)

    def open_port(self, handle: Handle, rank: int, port: int) -> Channel:
        """A connection to ``port`` on this machine's address for jobs, while the replica runs."""
        return localexec.open_port(handle, rank, port, self.master_addr)

    # -- act ---------------------------------------------------------------------------------

    def signal(self, handle: Handle, sig: int) -> None:
        """Deliver ``sig`` to every replica's process group. SIGTERM here asks the job to stop
        without a SIGKILL deadline; use ``cancel`` for that."""
        boot = boot_id()
        for r in handle.replicas:
            p = proc(r)
            supervised = boot_of(handle) == boot and is_running(p.pid, p.start_ticks)
            if supervised and sig in FORWARDED:
                signal_pid(p.pid, sig)
            elif (child := live_child(p)) is not None:
                signal_group(child, sig)

    def cancel(self, handle: Handle, grace_s: float) -> None:
        """SIGTERM to every replica's group, SIGKILL after ``grace_s``; returns at once (the
        supervisors count the grace period). Cancelling an ended job does nothing."""
        if grace_s < 0:
            raise InvalidSpec("grace", f"must not be negative, got {grace_s}")
        for r in handle.replicas:
            self._stop_replica(proc(r), grace_s, "cancelled")

    def stop_replica(self, replica: ReplicaHandle, grace_s: float, reason: str) -> None:
        """Stop one replica, recording ``reason`` as why it ended (the memory watcher uses it)."""
        self._stop_replica(proc(replica), grace_s, reason)

    def _stop_replica(self, p: Proc, grace_s: float, reason: str) -> None:
        rdir = Path(p.dir)
        if (rdir / "status.json").exists():
            return
        if is_running(p.pid, p.start_ticks):
            if not (rdir / "stop.json").exists():
                write_json_atomic(rdir / "stop.json", {"reason": reason, "grace_s": grace_s},
                                  mode=0o600, durable=False)
            signal_pid(p.pid, signals.SIGTERM)
        elif (child := live_child(p)) is not None:
            signal_group(child, signals.SIGKILL)  # no supervisor left to count a grace period
