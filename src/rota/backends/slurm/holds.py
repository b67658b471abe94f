"""Placeholder Slurm jobs: Slurm told which GPUs of a node a rota Pod runs on, and the index
authority for them.

A rota attempt that runs through another engine (Kubernetes) on a node that is also a Slurm
node holds its GPUs there with one placeholder job per replica (``rota.backends.holds``):

- named ``rota-hold-<job>-<attempt>-<rank>`` (``hold_name``), with the comment
  ``rota-hold:<engine>@<instance>`` (the engine that runs the attempt, this control plane's
  instance), submitted ``-w <node> --gres=gpu:N`` with one CPU and the least memory, in the
  project's account, running ``sleep`` until it is cancelled; a placeholder that Slurm still
  lists is found by its name and kept, never submitted twice;
- Slurm picks its GPUs, as for any job: rota waits until it runs (``HOLD_WAIT_S`` at most;
  ``BackendError`` ``hold_pending`` with Slurm's reason otherwise, and the placeholder is
  cancelled) and reads the GRES indices Slurm gave it, and the Pod is launched on exactly
  those (Slurm is the index authority, as in SUNK);
- rota's own inventory never counts it as foreign work (``nodes.inventory``): the Pod's job
  holds those GPUs in rota's books already.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Sequence

from rota.backends.base import BackendError
from rota.backends.holds import Held, ToHold
from rota.backends.slurm.records import SlurmJob
from rota.backends.slurm.nodes import GPU
from rota.backends.slurm.states import JobPhase
from rota.backends.slurm.view import SlurmView
from rota.core import InvalidSpec, Job

log = logging.getLogger("rota.backends.slurm")
HOLD_PREFIX = "rota-hold-"
COMMENT = "rota-hold:"
HOLD_WAIT_S = 30.0  # how long a launch waits for its placeholder to run
HOLD_EVERY_S = 0.3


def hold_name(job_id: str, attempt: int, rank: int) -> str:
    if not job_id or any(c in job_id for c in ",|/ "):
        raise InvalidSpec("id", f"job id {job_id!r} cannot name a Slurm placeholder job")
    return f"{HOLD_PREFIX}{job_id}-{attempt}-{rank}"


def hold_comment(launcher: str, instance: str) -> str:
    return f"{COMMENT}{launcher}@{instance}"


def held(job: SlurmJob, instance: str) -> Held | None:
    """The hold a Slurm job is, when it is one of control plane ``instance``'s."""
    if not job.name.startswith(HOLD_PREFIX) or not job.comment.startswith(COMMENT):
        return None
    launcher, _, of = job.comment[len(COMMENT):].rpartition("@")
    parts = job.name[len(HOLD_PREFIX):].rsplit("-", 2)
    if of != instance or not launcher or len(parts) != 3 or not parts[1].isdigit() \
            or not parts[2].isdigit():
        return None
    devices = tuple(sorted(i for a in job.allocations for g in a.gres if g.name == GPU
                           for i in g.indices))
    node = job.nodes[0] if job.nodes else ""
    return Held(parts[0], int(parts[1]), int(parts[2]), node, devices, launcher)


class SlurmHolds(SlurmView):
    """``Holding``: the placeholders of one ``SlurmBackend`` (module docstring)."""

    chooses_devices = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._holds_lock = threading.Lock()
        self._holds_made: dict[tuple[str, int], set[str]] = {}
        self._holds_seen: list[Held] = []

    def hold(self, job: Job, attempt: int, launcher: str,
             replicas: Sequence[ToHold]) -> dict[int, tuple[int, ...]]:
        """Submit (or find) each replica's placeholder, wait until all run, and return the
        GPU indices Slurm gave each (by rank)."""
        names = {hold_name(str(job.id), attempt, r.rank): r for r in replicas}
        with self._holds_lock:
            self._holds_made.setdefault((str(job.id), attempt), set()).update(names)
        listed = {j.name for j in self._mine(names) if not j.phase.ended}
        for name, replica in names.items():
            if name not in listed:
                self._submit_hold(job, name, launcher, replica)
        return self._wait_running(names)

    def _mine(self, names: Sequence[str]) -> list[SlurmJob]:
        """The placeholders of these names that this control plane submitted (``squeue``)."""
        return [j for j in self._named(list(names))
                if j.comment.startswith(COMMENT) and j.comment.endswith(f"@{self.instance}")]

    def _submit_hold(self, job: Job, name: str, launcher: str, replica: ToHold) -> None:
        argv = ["sbatch", "--parsable", "--job-name", name, "--nodelist", replica.node,
                f"--gres=gpu:{len(replica.devices)}", "--ntasks=1", "--cpus-per-task=1",
                "--mem=1", "--comment", hold_comment(launcher, self.instance),
                "--account", self.config.account(job.project), "--output=/dev/null",
                "--wrap", "exec sleep infinity"]
        if self.config.partition:
            argv[2:2] = ["--partition", self.config.partition]
        self.commands.run(argv)

    def _wait_running(self, names: dict[str, ToHold]) -> dict[int, tuple[int, ...]]:
        deadline = self.clock() + HOLD_WAIT_S
        while True:
            brief = {j.name: j for j in self._mine(names) if not j.phase.ended}
            if all(brief.get(n) is not None and brief[n].phase is JobPhase.RUNNING
                   for n in names):
                break
            if self.clock() >= deadline:
                why = "; ".join(f"{n}: {brief[n].reason if n in brief else 'gone'}"
                                for n in sorted(names)
                                if n not in brief or brief[n].phase is not JobPhase.RUNNING)
                raise BackendError("hold_pending", f"the Slurm placeholder jobs that hold "
                                                   f"the GPUs do not run ({why})")
            time.sleep(HOLD_EVERY_S)
        ids = {brief[n].id: n for n in names}
        out = {}
        for j in self._queue():
            h = held(j, self.instance)
            if j.id in ids and h is not None:
                out[names[ids[j.id]].rank] = h.devices
        return out

    def unhold(self, job_id: str, attempt: int) -> None:
        with self._holds_lock:
            names = self._holds_made.pop((job_id, attempt), set())
        names |= {hold_name(h.job_id, h.attempt, h.rank) for h in self._holds_seen
                  if (h.job_id, h.attempt) == (job_id, attempt)}
        if not names:
            return
        try:
            for job in self._mine(sorted(names)):
                if not job.phase.ended:
                    self._scancel(job.id, "its attempt ended")
        except BackendError as exc:  # a later pass's sweep cancels it
            log.warning("cannot cancel the placeholders %s: %s", ", ".join(sorted(names)), exc)

    def holds(self) -> list[Held]:
        return list(self._holds_seen)

    def moved(self, job_id: str, attempt: int, replicas: Sequence[ToHold]) -> None:
        """Slurm picked the placeholders' GPUs itself: nothing to tell it."""

    def not_held(self, jobs: Sequence[SlurmJob]) -> list[SlurmJob]:
        """``jobs`` (a full read of the queue) less the placeholders of this control plane,
        which are noted as the holds that exist now."""
        found = [(j, held(j, self.instance)) for j in jobs]
        self._holds_seen = [h for j, h in found if h is not None and not j.phase.ended]
        return [j for j, h in found if h is None]
