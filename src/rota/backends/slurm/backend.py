"""The Slurm backend: each attempt of a rota job is one Slurm batch job, one ``srun`` step per
replica, submitted where rota placed it (or where Slurm places it: ``placement: slurm``).

``SlurmBackend`` is put together from parts on one base (``view.SlurmView``: the nodes as last
read, the queue asked by name, the launches tracked): ``launches`` submits each attempt once,
crash-safe, and finds it again (``launch``, ``recover``); ``polls`` says what the attempts are
doing (``adopt``, ``poll``). This module holds the rest, below.

Instance. Each control plane (its data directory) has an instance id, written once
(``attempts.instance``), that its jobs carry in their comment: two rota installations on one
cluster, whose job numbers may be the same, each see the other's jobs as foreign.

Handles: ``launch_id`` is the Slurm job id; what a handle holds is ``handles``. Files on disk:
``attempts``.

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

import signal as signals
from typing import Callable, Iterator, Sequence

from rota.backends.base import Activity, Capabilities, Channel, Handle
from rota.backends.slurm import interact, logs
from rota.backends.slurm.attempts import AttemptFiles
from rota.backends.slurm.handles import slurm_job
from rota.backends.slurm.holds import SlurmHolds
from rota.backends.slurm.launches import Launches
from rota.backends.slurm.nodes import fractional_refusal, inventory
from rota.backends.slurm.polls import Polls
from rota.backends.slurm.release import Releaser
from rota.backends.slurm.states import attempt_name, owner
from rota.backends.slurm.summary import describe
from rota.backends.slurm.watch import SlurmWatcher
from rota.core import InvalidSpec, Node


class SlurmBackend(Launches, Polls, SlurmHolds):
    """The Slurm ``Backend`` (module docstring), from its parts: ``Launches``, ``Polls``,
    ``SlurmHolds``."""

    # -- nodes -------------------------------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        shards = fractional_refusal(self.reports().values()) is None
        return Capabilities(fractional_gpu=shards, memory_enforcement=False,
                            compute_enforcement=False, gang=True, signals=True,
                            run_as_owner=True, walltime=True, queued=True, interactive=True)

    def inventory(self) -> list[Node]:
        self._read_nodes()
        jobs = self.not_held(self._queue())  # placeholders: rota's own (``holds``)
        found = inventory(self._slurm_nodes.values(), jobs, self.config.gpu_types,
                          self.config.resource_group, self._blocked, self.instance)
        return found.core_nodes()

    def describe(self, jobs_url: str | None = None) -> list[str]:
        """What ``rota up`` says about the cluster when it starts (``jobs_url``: the API's
        URL as jobs reach it)."""
        reports = self.reports()
        return describe(reports, self._slurm_nodes.values(), self.config,
                        self.commands.slurm_conf or "Slurm's default configuration", jobs_url)

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

    # -- early ends (``early``) --------------------------------------------------------------

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

    def live_attempts(self, attempts: Sequence[tuple[str, int]]) -> set[tuple[str, int]]:
        """Those of ``attempts`` (job id, attempt) that Slurm lists as this control plane's
        and not ended (one ``squeue`` of their names): what ``rota.backends.holds`` asks."""
        names = [attempt_name(job_id, attempt) for job_id, attempt in attempts]
        found = {owner(j.name, j.comment, self.instance) for j in self._named(names)
                 if not j.phase.ended}
        return {a for a in found if a is not None} & set(attempts)

    def _confirmed(self, states: dict[int, str], asked: list[int]) -> None:
        """Slurm listed ``asked`` as ``states``: the reported ends it confirms are forgotten,
        and so are their launches."""
        self._untrack(self.early.confirm(states, asked))

    def flush_launches(self) -> None:
        """Release now the held jobs queued for the releaser (``release``)."""
        if self._releaser is not None:
            self._releaser.flush()

    # -- logs, endpoints and the watch -------------------------------------------------------

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

    def watch(self, wake: Callable[..., None]) -> None:
        """Call ``wake`` soon after a tracked launch starts or ends, and ``wake(inventory=True)``
        soon after a job outside rota starts or ends (``watch.SlurmWatcher``)."""
        if self._watcher is None:
            self._watcher = SlurmWatcher(self.commands, self.tracked, wake, self._confirmed,
                                         on_foreign=lambda: wake(inventory=True))
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
