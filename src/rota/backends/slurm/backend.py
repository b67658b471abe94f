"""The Slurm backend: each attempt of a rota job is one Slurm batch job, one ``srun`` step per
replica, submitted where rota placed it (or where Slurm places it: ``placement: slurm``).

Instance. Each control plane (its data directory) has an instance id, written once
(``attempts.instance``), that its jobs carry in their comment: two rota installations on one
cluster, whose job numbers may be the same, each see the other's jobs as foreign.

Handles: ``launch_id`` is the Slurm job id; what a handle holds is ``handles``. Files on disk:
``attempts``.

Launch, crash-safe (``attempts`` says what each file proves):

1. ``submit.json`` is written: from now on a restart asks Slurm before launching again;
2. ``sbatch --hold`` (as the job's OS account) prints the Slurm job id; the job is held, so
   that nothing runs before step 4;
3. ``handle.json`` is written;
4. ``scontrol release``: Slurm may start it (while the backend is watched, the launches of a
   pass are released together, right after, by ``release.Releaser``).

``recover`` finds an attempt from its files, or by its name in ``squeue``/``sacct`` once no
``sbatch`` of it is still running here (without files, Slurm is asked only while taking over
from another control plane of the same instance: ``taking_over``); a held job it finds is
released. Two Slurm jobs of one attempt can only come from an ``sbatch`` whose answer was
lost in a crash: both are held until one is recorded, and the one not recorded is cancelled
wherever it is seen (``recover``, ``poll``), before it was ever released. So an attempt never
runs twice.

Status (``poll``): one ``squeue`` of the handles' names in brief (``records.squeue_named``),
the node states (``sinfo`` and the reservations, at most ``node_refresh_s`` old), one
``sacct`` for the attempts that ended (exit codes, a gang's per replica; not for those
``squeue`` lists ``COMPLETED``: every replica exited 0) or that slurmctld forgot, and the
whole queue (``squeue --all --json``) only when a job started and where it
landed is not known yet, or ended and ``sacct`` has no exit code for it, or waits pinned
for resources (is it displaced by work outside rota? ``observe.displaced``); ``observe``
reads them. A job still pending in Slurm is *waiting* (``Status.waiting``): rota says it is
starting until Slurm runs it (``Capabilities.queued``).
A job's batch script reports its own end before it exits (``reported``, ``early``): ``poll``
says the attempt exited while Slurm still lists it, until Slurm says so itself, and
``overdue`` names an attempt Slurm still runs ``REPORT_TRUST_S`` after its report.
Slurm has no push notification: ``watch`` asks ``squeue`` about the tracked launches twice a
second (``watch.SlurmWatcher``) and wakes the control loop when one changed state.

Signals and stops: ``signal`` is ``scancel --signal=SIG`` to the job's steps (the replicas;
not the batch shell); SIGKILL is ``scancel`` of the whole job. ``cancel`` with a grace period
sends SIGTERM to the steps and leaves the rest to the control loop (which sends SIGKILL, i.e.
``scancel``, once the grace has passed); without one, or for a job still pending in Slurm, it
is ``scancel`` at once. Cancelling an ended job does nothing.

Inside a running attempt (``interact``): ``open_exec`` is a step of its own (``srun --jobid
--overlap``) as the job's owner, ``open_port`` a connection to the node's address.

Inventory: ``sinfo --json``, ``squeue --all --json`` and the reservations, read into core
nodes (``nodes``): Slurm's reason as each node's ``problem``, other people's jobs as
``foreign``.
"""

from __future__ import annotations

import logging
import os
import signal as signals
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, Sequence

from rota.backends.base import (
    Activity, BackendError, Capabilities, Channel, Handle, LaunchSpec, ReplicaState, Status,
)
from rota.backends.env import account_env, inherited
from rota.backends.procs import make_dirs
from rota.backends.slurm import attempts, interact, logs
from rota.backends.slurm.accounting import Accounting
from rota.backends.slurm.attempts import AttemptFiles
from rota.backends.slurm.commands import SlurmCommands, SlurmCommandError
from rota.backends.slurm.config import SlurmConfig
from rota.backends.slurm.early import EarlyEnds
from rota.backends.slurm.handles import BACKEND, attempt_handle, serving, slurm_job
from rota.backends.slurm.nodes import NodeReport, fractional_refusal, inventory, node_report
from rota.backends.slurm.observe import (
    COMPLETED, WAITS_FOR_GPUS, Seen, attempt_status, pinned,
)
from rota.backends.slurm.records import (
    SINFO_NODES, SQUEUE_JOBS, SlurmJob, SlurmNode, parse_sinfo, parse_squeue, parse_squeue_named,
    squeue_named,
)
from rota.backends.slurm.reservations import (
    SHOW_RESERVATIONS, TIME_FORMAT, blocked_nodes, parse_reservations,
)
from rota.backends.slurm.states import attempt_name, losing_reason, owner
from rota.backends.slurm.release import Releaser, release
from rota.backends.slurm.submit import SubmitSpec, batch_request, parse_job_id, refused_option
from rota.backends.slurm.summary import describe
from rota.backends.slurm.watch import SlurmWatcher
from rota.core import InvalidSpec, Job, Node, Placement
from rota.core.datadir import SLURM_REPORTS

log = logging.getLogger("rota.backends.slurm")


class SlurmBackend:
    name = BACKEND

    def __init__(self, data_dir: str | Path, config: SlurmConfig,
                 commands: SlurmCommands | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.config = config
        self.commands = commands or SlurmCommands.from_environment()
        self.clock = clock
        self.accounting = Accounting(self.commands)
        self._reports: dict[str, NodeReport] = {}
        self._slurm_nodes: dict[str, SlurmNode] = {}
        self._blocked: dict[str, str] = {}
        self._nodes_at = float("-inf")
        self._landed: dict[int, Placement | None] = {}  # where running launches landed
        self.instance = attempts.instance(self.data_dir)
        self._lock = threading.Lock()
        self._tracked: dict[int, Handle] = {}  # launches not known to have ended
        self._watcher: SlurmWatcher | None = None
        self._releaser: Releaser | None = None
        # what attempts said of their end before Slurm did, kept across restarts
        self.early = EarlyEnds(path=self.data_dir / SLURM_REPORTS)
        self._tracked.update(self.early.handles())  # a restart tracks them again
        self._unsure = False  # another data directory's attempts may exist (``taking_over``)

    # -- nodes -------------------------------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        shards = fractional_refusal(self.reports().values()) is None
        return Capabilities(fractional_gpu=shards, memory_enforcement=False,
                            compute_enforcement=False, gang=True, signals=True,
                            run_as_owner=True, walltime=True, queued=True, interactive=True)

    def inventory(self) -> list[Node]:
        self._read_nodes()
        jobs = self._queue()
        found = inventory(self._slurm_nodes.values(), jobs, self.config.gpu_types,
                          self.config.resource_group, self._blocked, self.instance)
        return found.core_nodes()

    def reports(self, max_age_s: float | None = None) -> dict[str, NodeReport]:
        """The nodes as last read, read again when older than ``max_age_s`` (or never read)."""
        age = self.clock() - self._nodes_at
        if not self._reports or (max_age_s is not None and age > max_age_s):
            self._read_nodes()
        return self._reports

    def describe(self, jobs_url: str | None = None) -> list[str]:
        """What ``rota up`` says about the cluster when it starts (``jobs_url``: the API's
        URL as jobs reach it)."""
        reports = self.reports()
        return describe(reports, self._slurm_nodes.values(), self.config,
                        self.commands.slurm_conf or "Slurm's default configuration", jobs_url)

    def _read_nodes(self) -> None:
        nodes = parse_sinfo(self.commands.run(SINFO_NODES))
        reservations = parse_reservations(self.commands.run(SHOW_RESERVATIONS,
                                                            extra_env=TIME_FORMAT))
        now = self.clock()
        self._blocked = blocked_nodes(reservations, now, self.config.reservation_lead_s)
        self._slurm_nodes = {n.name: n for n in nodes}
        self._reports = {n.name: node_report(n, self.config.gpu_types, self.config.resource_group,
                                             self._blocked.get(n.name)) for n in nodes}
        self._nodes_at = now

    def _losing(self) -> dict[str, str]:
        self.reports(self.config.node_refresh_s)
        out = {}
        for name, n in self._slurm_nodes.items():
            why = losing_reason(n.state, n.reason)
            if why:
                out[name] = why
        return out

    def _queue(self) -> tuple[SlurmJob, ...]:
        """Every job slurmctld knows, in full (``squeue --json``: the whole cluster)."""
        return parse_squeue(self.commands.run(SQUEUE_JOBS))

    def _named(self, names: Sequence[str]) -> tuple[SlurmJob, ...]:
        """The jobs of these names, in brief (``records.squeue_named``: only those)."""
        return parse_squeue_named(self.commands.run(squeue_named(tuple(sorted(set(names)))),
                                                    extra_env=TIME_FORMAT))

    def _state(self, handle: Handle) -> str | None:
        """The state of the handle's Slurm job now (None: squeue no longer lists it)."""
        slurm_id = slurm_job(handle)
        return next((j.state for j in self._named([str(handle.ref.get("name"))])
                     if j.id == slurm_id), None)

    # -- launch ------------------------------------------------------------------------------

    def launch(self, job: Job, placement: Placement, spec: LaunchSpec,
               attempt: int | None = None) -> Handle:
        """Submit attempt ``attempt`` of ``job`` (module docstring); an attempt submitted
        before is returned as it is, never submitted again. A job that names a container image
        is refused (``InvalidSpec`` on ``image``): a Slurm job runs its command on the node."""
        if spec.image is not None:
            raise InvalidSpec("image", f"names the container image {spec.image!r}, but the slurm "
                                       "backend runs commands on the cluster's nodes, not in "
                                       "images: drop image, or run the job on a backend that "
                                       "runs containers (kubernetes)")
        if attempt is None:
            attempt = attempts.next_attempt(self.data_dir, job.id)
        found = self.recover(job, placement, attempt)
        if found is not None:
            return found
        reports = self.reports()
        if job.request.gpu.fractional and (refusal := fractional_refusal(reports.values())):
            raise InvalidSpec("gpu", refusal)
        files = AttemptFiles.of(self.data_dir, job.id, attempt)
        addresses = {n: s.address for n, s in self._slurm_nodes.items()}
        batch = spec.batch
        request = batch_request(job, placement, attempt, SubmitSpec(
            command=tuple(spec.command), workdir=spec.workdir, log_dir=str(files.logs),
            env=spec.env, checkpoint_signal=spec.checkpoint_signal, grace_s=spec.grace_s,
            partition=batch.get("partition") or self.config.partition,
            account=self.config.account(job.project), qos=batch.get("qos"),
            reservation=batch.get("reservation"), constraint=batch.get("constraint"),
            pinned=self.config.pinned, hold=True,
            instance=self.instance, port=spec.port, addresses=addresses), reports)
        files.prepare(spec.run_as)
        interact.save_session(files.private, spec)  # for commands inside it (``interact``)
        files.intend(request.name)                                                   # 1
        self.before("sbatch", files)
        base = {**inherited(os.environ), **account_env(spec.run_as)}
        try:
            out = self.commands.run(request.argv, request.script, base_env=base,
                                    run_as=spec.run_as)                               # 2
        except SlurmCommandError as exc:
            refused = refused_option(exc.stderr, request.argv, job.project,
                                     spec.run_as.user if spec.run_as else None)
            if refused is not None:
                raise refused from None
            raise BackendError("launch_failed", f"sbatch refused job {job.id}: "
                                                f"{exc.stderr or exc}") from None
        slurm_id = parse_job_id(out)
        handle = attempt_handle(job.id, attempt, slurm_id, placement, files, self.config.pinned)
        if spec.port is not None:  # where rota reaches the job's server (``endpoint``)
            handle = serving(handle, placement, addresses, spec.port)
        self.before("save", files)
        files.save(handle)                                                           # 3
        self._track(handle)
        if self._releaser is not None:                                               # 4
            self._releaser.put(slurm_id)  # with the other launches of this pass
        else:
            self.before("release", files)
            release(self.commands, [slurm_id])  # a failure is retried by poll
        self.before("return", files)
        return handle

    def before(self, step: str, files: AttemptFiles) -> None:
        """Called before each step of a launch after the first (``sbatch``, ``save``,
        ``release``, ``return``); does nothing. Tests override it to stop a launch there, as
        a killed control plane would."""

    # -- inside a running attempt (``interact``) ---------------------------------------------

    def open_exec(self, handle: Handle, rank: int, argv: Sequence[str], tty: bool) -> Channel:
        """``argv`` in a step of its own on replica ``rank``'s node, as the job's owner."""
        self._running(handle, rank)
        files = AttemptFiles.of(self.data_dir, handle.job_id, handle.attempt or 0)
        return interact.open_exec(self.commands, files.private, handle, slurm_job(handle),
                                  rank, argv, tty)

    def open_port(self, handle: Handle, rank: int, port: int) -> Channel:
        """A connection to ``port`` at the address of replica ``rank``'s node."""
        node = self._running(handle, rank)
        if node not in self._slurm_nodes:
            self.reports(0)  # a node rota has not read yet: read them again
        found = self._slurm_nodes.get(node)
        return interact.open_port(found.address if found else node, handle, rank, port)

    def _running(self, handle: Handle, rank: int) -> str:
        """The node replica ``rank`` runs on; ``BackendError`` unless Slurm runs the job."""
        interact.node_of(handle, rank)  # no such replica: said first
        state = self._state(handle)
        if state != interact.RUNNING:
            raise interact.not_running(handle, state)
        landed = self._landed.get(slurm_job(handle))
        return (landed or handle).replicas[rank].node

    # -- recover -----------------------------------------------------------------------------

    def recover(self, job: Job, placement: Placement, attempt: int) -> Handle | None:
        """The handle of attempt ``attempt`` if it was submitted; None when it provably
        never was (module docstring)."""
        files = AttemptFiles.of(self.data_dir, job.id, attempt)
        if not files.submitted and not self._unsure:
            return None
        saved = files.saved()
        if saved is not None:
            handle = Handle.from_dict(saved, f"{files.private}/handle.json")
            self._release_if_held(handle)
            return self._track(handle)
        name = attempt_name(job.id, attempt)
        attempts.wait_inflight(name)
        ids = sorted(self._ids_named(name))
        if not ids:
            return None
        for extra in ids[1:]:
            self._duplicate(extra, name)
        handle = attempt_handle(job.id, attempt, ids[0], placement, files, self.config.pinned)
        if not files.submitted:  # submitted by the control plane this one took over from
            make_dirs(files.private.parent, 0o711)
            make_dirs(files.private, 0o700)
            files.intend(name)
        files.save(handle)
        self._release_if_held(handle)
        return self._track(handle)

    def taking_over(self, unsure: bool) -> None:
        """While ``unsure``, an attempt without files here may have been submitted by the
        control plane this one takes over from: ``recover`` asks Slurm for its name."""
        self._unsure = unsure

    def _ids_named(self, name: str) -> set[int]:
        return {j.id for j in (*self._named([name]), *self.accounting.named(name))
                if j.name == name and owner(j.name, j.comment, self.instance)}

    def _release_if_held(self, handle: Handle) -> None:
        self._release_held([j for j in self._named([str(handle.ref.get("name"))])
                            if j.id == slurm_job(handle)])

    def _release_held(self, jobs: list[SlurmJob]) -> None:
        """Release the recorded attempts among ``jobs`` that are still held (a release lost
        in a crash, or one that failed), except those the releaser is about to release."""
        queued = self._releaser.queued() if self._releaser is not None else set()
        held = [j.id for j in jobs if j.state == "PENDING" and j.reason == "JobHeldUser"
                and j.id not in queued]
        if held:
            release(self.commands, held)

    # -- observe -----------------------------------------------------------------------------

    def adopt(self, handle: Handle) -> Status:
        if handle.backend != self.name:
            raise BackendError("foreign_handle", f"handle of backend {handle.backend!r}, "
                                                 f"not {self.name!r}")
        slurm_job(handle)
        self._track(handle)
        return self.poll([handle])[0]

    def poll(self, handles: Sequence[Handle]) -> list[Status]:
        """The status of every handle (module docstring): ``squeue`` of their names, the node
        states, ``sacct`` for the attempts that ended, and the whole queue (``--json``) only
        when a job started (where did it land?) or ended beyond what ``sacct`` knows yet."""
        if not handles:
            return []
        ids = [slurm_job(h) for h in handles]
        named = self._named([str(h.ref.get("name")) for h in handles])
        self._cancel_duplicates(handles, named)
        brief = {j.id: j for j in named if j.id in set(ids)}
        self._release_held(list(brief.values()))
        losing = self._losing()
        # a job squeue lists COMPLETED says enough by itself (``observe``)
        asked = [i for i in ids if i not in brief or brief[i].state != COMPLETED]
        accounted = self.accounting.jobs(tuple(sorted(
            i for i in asked if i not in brief or brief[i].phase.ended)))
        full = self._in_full(asked, brief, accounted)
        foreign = self._foreign(handles, brief)
        now, out = self.clock(), []
        for handle, slurm_id in zip(handles, ids):
            queued = full.get(slurm_id) or brief.get(slurm_id)
            status = attempt_status(handle, Seen(
                queued, accounted.get(slurm_id), losing, self._reports, self.accounting.enabled,
                now, self._landed.get(slurm_id), foreign))
            if queued is not None and queued.allocations:
                self._landed[slurm_id] = status.placement
            early = self.early.get(slurm_id)
            if early is not None and status.state is ReplicaState.RUNNING:
                out.append(early.status())  # reported ended; still tracked until Slurm agrees
                continue
            if status.state is not ReplicaState.RUNNING:
                self._untrack([slurm_id])
                self.early.forget(slurm_id)
            out.append(status)
        return out

    def _foreign(self, handles: Sequence[Handle],
                 brief: dict[int, SlurmJob]) -> dict[str, frozenset[int]] | None:
        """The GPUs work outside rota holds, per node, from the whole queue (``squeue --all
        --json``), read only when a pinned attempt waits in Slurm for resources (whether it is
        displaced: ``observe.displaced``); None when none does."""
        if not any(pinned(h) and (j := brief.get(slurm_job(h))) is not None
                   and not j.phase.started and j.reason in WAITS_FOR_GPUS for h in handles):
            return None
        found = inventory(self._slurm_nodes.values(), self._queue(), self.config.gpu_types,
                          self.config.resource_group, self._blocked, self.instance)
        held: dict[str, set[int]] = {}
        for f in found.foreign:
            held.setdefault(f.node, set()).update(d.index for d in f.devices)
        return {node: frozenset(gpus) for node, gpus in held.items()}

    def _in_full(self, ids: list[int], brief: dict[int, SlurmJob],
                 accounted: dict[int, SlurmJob]) -> dict[int, SlurmJob]:
        """The full records, when a job began running and where it landed is not known yet,
        or ended and ``sacct`` has no exit code for it (yet, or at all)."""
        def needs(i: int) -> bool:
            job = brief.get(i)
            if job is None or not job.phase.started:
                return False
            if not job.phase.ended:
                return i not in self._landed
            done = accounted.get(i)
            return done is None or not done.phase.ended or done.exit is None
        if not any(needs(i) for i in ids):
            return {}
        return {j.id: j for j in self._queue() if j.id in set(ids)}

    def _cancel_duplicates(self, handles: Sequence[Handle], queue: tuple[SlurmJob, ...]) -> None:
        """Cancel every live Slurm job of a polled attempt (its name, this control plane's
        comment) but the handle's own."""
        own = {h.ref.get("name"): slurm_job(h) for h in handles}
        for j in queue:
            if j.name in own and j.id != own[j.name] and not j.phase.ended \
                    and owner(j.name, j.comment, self.instance) and j.comment:
                self._duplicate(j.id, j.name)

    # -- early ends (``early``) ---------------------------------------------------------------

    def reported(self, handle: Handle, exit_code: int,
                 replicas: tuple[int, ...] | None = None) -> bool:
        """The batch script says the attempt ended with ``exit_code`` (and each replica with
        its code in ``replicas``): ``poll`` says so while Slurm still lists the job
        (``early``). Only for a launch tracked here, not ended."""
        slurm_id = slurm_job(handle)
        with self._lock:
            if slurm_id not in self._tracked:
                return False
        self.early.take(slurm_id, handle, exit_code, self.clock(), replicas)
        return True

    def overdue(self) -> list[Handle]:
        """The attempts reported ended that Slurm still runs ``REPORT_TRUST_S`` after their
        report (one ``squeue`` of their names, only when there are such reports)."""
        due = self.early.due(self.clock())
        if not due:
            return []
        listed = {j.id: j.state for j in self._named([str(e.handle.ref.get("name"))
                                                       for e in due.values()])}
        self._confirmed(listed, list(due))
        return [e.handle for i, e in due.items() if self.early.get(i) is not None]

    def _confirmed(self, states: dict[int, str], asked: list[int]) -> None:
        """Slurm listed ``asked`` as ``states``: the reported ends it confirms are forgotten,
        and so are their launches."""
        self._untrack(self.early.confirm(states, asked))

    def _untrack(self, slurm_ids: list[int]) -> None:
        """Forget the launches ``slurm_ids``: Slurm says they ended."""
        with self._lock:
            for slurm_id in slurm_ids:
                self._tracked.pop(slurm_id, None)
        for slurm_id in slurm_ids:
            self._landed.pop(slurm_id, None)

    def flush_launches(self) -> None:
        """Release now the held jobs queued for the releaser (``release``)."""
        if self._releaser is not None:
            self._releaser.flush()

    def endpoint(self, handle: Handle) -> str | None:
        found = handle.ref.get("endpoint")
        return found if isinstance(found, str) else None

    def read_log(self, handle: Handle, rank: int, stream: str, offset: int) -> Iterator[bytes]:
        """The bytes replica ``rank``'s step wrote to ``stream`` from ``offset`` on."""
        if stream not in logs.STREAMS:
            raise InvalidSpec("stream", f"must be stdout or stderr, got {stream!r}")
        if 0 <= rank < len(handle.replicas):
            yield from logs.read_from(handle.replicas[rank].ref.get(stream), offset)

    def activity(self, handles: Sequence[Handle]) -> list[Activity]:
        """When each launch last wrote output; its GPUs' utilisation is not seen (``logs``)."""
        return [Activity(None, logs.last_output(h)) for h in handles]

    def notify(self, handle: Handle, message: str) -> None:
        """``[rota] message`` at the end of each replica's stderr file."""
        logs.notify(handle, message)

    def watch(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` soon after a tracked launch starts or ends (``watch.SlurmWatcher``)."""
        if self._watcher is None:
            self._watcher = SlurmWatcher(self.commands, self.tracked, wake, self._confirmed)
            self._watcher.start()
            self._releaser = Releaser(self.commands)
            self._releaser.start()

    def unwatch(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        if self._releaser is not None:
            self._releaser.stop()
            self._releaser = None

    def tracked(self) -> list[int]:
        """The Slurm jobs of launches made or adopted here that have not ended."""
        with self._lock:
            return list(self._tracked)

    def _track(self, handle: Handle) -> Handle:
        with self._lock:
            self._tracked[slurm_job(handle)] = handle
        return handle

    # -- act ---------------------------------------------------------------------------------

    def signal(self, handle: Handle, sig: int) -> None:
        """``sig`` to the replicas (the job's steps) of a running job; SIGKILL cancels the
        whole job. A job not running in Slurm has no replica to signal (and ``scancel
        --signal`` would wait for a pending one to start)."""
        if sig == signals.SIGKILL:
            self._scancel(slurm_job(handle), "stopped")
            return
        if self._state(handle) == "RUNNING":
            name = signals.Signals(sig).name.removeprefix("SIG")
            self._try(("scancel", f"--signal={name}", handle.launch_id))

    def cancel(self, handle: Handle, grace_s: float) -> None:
        """SIGTERM to the replicas, the rest after ``grace_s`` (module docstring)."""
        if grace_s < 0:
            raise InvalidSpec("grace", f"must not be negative, got {grace_s}")
        running = grace_s > 0 and self._state(handle) == "RUNNING"
        if not running or not self._try(("scancel", "--signal=TERM", handle.launch_id)):
            self._scancel(slurm_job(handle), "cancelled")

    def _duplicate(self, slurm_id: int, name: str) -> None:
        log.warning("cancelling Slurm job %d: a second Slurm job of attempt %s, never released",
                    slurm_id, name)
        self._scancel(slurm_id, "duplicate")

    def _scancel(self, slurm_id: int, why: str) -> None:
        log.debug("scancel %d: %s", slurm_id, why)
        self._try(("scancel", str(slurm_id)))

    def _try(self, argv: tuple[str, ...]) -> bool:
        """Run a ``scancel``; False when Slurm refused it because of the job's state (pending,
        already ended or forgotten): nothing runs there to act on."""
        try:
            self.commands.run(argv)
            return True
        except SlurmCommandError as exc:
            if exc.code != "slurm_command":
                raise
            log.info("%s: %s", " ".join(argv), exc.stderr)
            return False

