"""``SlurmView``: what every part of the Slurm backend is built on: its data directory, options,
commands and clock, its instance id, the cluster's nodes as last read, Slurm's queue asked by
name or in full, the launches it tracks until Slurm says they ended, and ``scancel``.

``SlurmBackend`` (``backend``) is one class put together from parts on this base, each saying
one thing: ``launches`` submits attempts and finds them again, ``polls`` says what they are
doing, and ``backend`` holds the rest. Each part reads Slurm through the methods here.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Callable, Sequence

from rota.backends.base import Handle
from rota.backends.slurm import attempts
from rota.backends.slurm.accounting import Accounting
from rota.backends.slurm.commands import SlurmCommands, SlurmCommandError
from rota.backends.slurm.config import SlurmConfig
from rota.backends.slurm.early import EarlyEnds
from rota.backends.slurm.handles import BACKEND, slurm_job
from rota.backends.slurm.nodes import NodeReport, node_report
from rota.backends.slurm.records import (
    SINFO_NODES, SQUEUE_JOBS, SlurmJob, SlurmNode, parse_sinfo, parse_squeue, parse_squeue_named,
    squeue_named,
)
from rota.backends.slurm.release import Releaser, release
from rota.backends.slurm.reservations import (
    SHOW_RESERVATIONS, TIME_FORMAT, blocked_nodes, parse_reservations,
)
from rota.backends.slurm.states import losing_reason
from rota.backends.slurm.watch import SlurmWatcher
from rota.core import Placement
from rota.core.datadir import SLURM_REPORTS

log = logging.getLogger("rota.backends.slurm")


class SlurmView:
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

    # -- nodes and the queue -----------------------------------------------------------------

    def reports(self, max_age_s: float | None = None) -> dict[str, NodeReport]:
        """The nodes as last read, read again when older than ``max_age_s`` (or never read)."""
        age = self.clock() - self._nodes_at
        if not self._reports or (max_age_s is not None and age > max_age_s):
            self._read_nodes()
        return self._reports

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

    # -- launches tracked --------------------------------------------------------------------

    def tracked(self) -> list[int]:
        """The Slurm jobs of launches made or adopted here that have not ended."""
        with self._lock:
            return list(self._tracked)

    def _track(self, handle: Handle) -> Handle:
        with self._lock:
            self._tracked[slurm_job(handle)] = handle
        return handle

    def _untrack(self, slurm_ids: list[int]) -> None:
        """Forget the launches ``slurm_ids``: Slurm says they ended."""
        with self._lock:
            for slurm_id in slurm_ids:
                self._tracked.pop(slurm_id, None)
        for slurm_id in slurm_ids:
            self._landed.pop(slurm_id, None)

    def _release_held(self, jobs: list[SlurmJob]) -> None:
        """Release the recorded attempts among ``jobs`` that are still held (a release lost
        in a crash, or one that failed), except those the releaser is about to release."""
        queued = self._releaser.queued() if self._releaser is not None else set()
        held = [j.id for j in jobs if j.state == "PENDING" and j.reason == "JobHeldUser"
                and j.id not in queued]
        if held:
            release(self.commands, held)

    # -- scancel -----------------------------------------------------------------------------

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
