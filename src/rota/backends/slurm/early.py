"""Early ends: what rota's Slurm jobs say of their own end before Slurm does.

Each attempt's batch script, once every replica ended, reports its status to rota and waits
for the answer before it exits (``submit._report``); Slurm frees the job's GPUs only when the
script exits. rota takes the report (``EarlyEnding.reported``) as an early observation of what
Slurm will say: the control loop sees the attempt exited with that status, frees its GPUs in
its own books and launches the next job there, pending in Slurm while the reporting job
still holds them, and answers; the script exits and Slurm starts the next job in the
scheduling pass that the end asks for (``docs/slurm.md``).

``EarlyEnds`` keeps the reports, by Slurm job id, until Slurm confirms the end: the watcher's
``squeue`` lists the job ended, or no longer lists it (``confirm``). Slurm stays the truth:
``poll`` uses a report only while Slurm lists the job as not ended yet, and a job Slurm still
runs ``REPORT_TRUST_S`` after its report (a script that lied, or hung after reporting) is
``due``: the control loop stops it and says so in the job's events.

The reports not confirmed yet are also kept on disk (``path``: ``slurm-reports.json`` in the
data directory, written durably before a report is taken), and a control plane that restarts
reads them back: the store already counts those attempts ended, so nothing else would look at
them again, and a job that lied about its end would keep its GPUs, unseen, after a restart.
The restarted backend tracks them again, so the same ``due`` stops it, and the watcher's
``squeue`` forgets those Slurm ended meanwhile.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from rota.backends.base import REPORT_TRUST_S, Handle, ReplicaState, ReplicaStatus, Status
from rota.backends.procs import read_json, write_json_atomic
from rota.backends.slurm.states import job_phase
from rota.backends.slurm.text import SlurmOutputError

log = logging.getLogger(__name__)


@dataclass(slots=True)
class EarlyEnd:
    handle: Handle
    exit_code: int
    at: float              # when it was reported (seconds since the epoch)
    named: bool = False    # already named by ``due``: it is being stopped
    replicas: tuple[int, ...] | None = None  # each replica's code by rank, where the script
                                             # knew them (bash 5.1 and later)

    def status(self) -> Status:
        """Every replica exited, each with its own code where the report has one for every
        rank: the first with the batch's status failed first, and the others that did not
        exit 0 were stopped by the script because of it (their reason says so, as Slurm's
        ``CANCELLED`` would). Otherwise 0 each for a status of 0 (the script exits 0 only when
        every replica did), and the status, the script's first failure, for each."""
        ranks = self.handle.replicas
        codes = self.replicas
        if codes is None or len(codes) != len(ranks):
            return Status(tuple(ReplicaStatus(r.rank, ReplicaState.EXITED, self.exit_code,
                                              finished_at=self.at) for r in ranks))
        first = next((k for k, c in enumerate(codes) if c == self.exit_code), None) \
            if self.exit_code != 0 else None
        return Status(tuple(ReplicaStatus(
            r.rank, ReplicaState.EXITED, codes[k], finished_at=self.at,
            reason="" if k == first or codes[k] == 0 or first is None else
            f"stopped after replica {ranks[first].rank} failed")
            for k, r in enumerate(ranks)))


class EarlyEnds:
    def __init__(self, trust_s: float = REPORT_TRUST_S, path: Path | None = None) -> None:
        self.trust_s, self.path = trust_s, path
        self._lock = threading.Lock()
        self._ends: dict[int, EarlyEnd] = _load(path) if path is not None else {}

    def take(self, slurm_id: int, handle: Handle, exit_code: int, now: float,
             replicas: tuple[int, ...] | None = None) -> None:
        with self._lock:
            if slurm_id not in self._ends:
                self._ends[slurm_id] = EarlyEnd(handle, exit_code, now, replicas=replicas)
                self._save()

    def get(self, slurm_id: int) -> EarlyEnd | None:
        with self._lock:
            return self._ends.get(slurm_id)

    def handles(self) -> dict[int, Handle]:
        """The attempts of the reports kept, by Slurm job id."""
        with self._lock:
            return {i: e.handle for i, e in self._ends.items()}

    def forget(self, slurm_id: int) -> None:
        """Slurm said the job ended (``poll``): its own word stands from now on."""
        with self._lock:
            if self._ends.pop(slurm_id, None) is not None:
                self._save()

    def due(self, now: float) -> dict[int, EarlyEnd]:
        """The reports older than ``trust_s`` not named before (each is named once)."""
        with self._lock:
            found = {i: e for i, e in self._ends.items()
                     if not e.named and now - e.at >= self.trust_s}
            for e in found.values():
                e.named = True
            return found

    def confirm(self, states: Mapping[int, str], asked: Iterable[int]) -> list[int]:
        """Forget the reports of the jobs among ``asked`` that Slurm (``states``: job id ->
        Slurm state, as ``squeue`` listed them) lists ended or no longer lists; returns
        their ids."""
        gone = []
        with self._lock:
            for slurm_id in asked:
                if slurm_id in self._ends and _ended(states.get(slurm_id)):
                    del self._ends[slurm_id]
                    gone.append(slurm_id)
            if gone:
                self._save()
        return gone

    def _save(self) -> None:
        """Under the lock: the reports to ``path``, durably (a report is taken after)."""
        if self.path is not None:
            write_json_atomic(self.path, [
                {"slurm_job": i, "handle": e.handle.to_dict(), "exit_code": e.exit_code,
                 "at": e.at, "replicas": e.replicas} for i, e in sorted(self._ends.items())],
                mode=0o600)


def _load(path: Path) -> dict[int, EarlyEnd]:
    """The reports ``path`` kept; none, said in the log, from a file that cannot be read."""
    try:
        return {int(r["slurm_job"]): EarlyEnd(
                    Handle.from_dict(r["handle"], str(path)), int(r["exit_code"]),
                    float(r["at"]), replicas=None if r.get("replicas") is None
                    else tuple(int(c) for c in r["replicas"]))
                for r in read_json(path) or []}
    except Exception as exc:  # noqa: BLE001 - a damaged file must not stop rota up
        log.warning("%s: cannot read the reported ends kept there (%r); a job that reported "
                    "its end but still runs is stopped only by a control plane that took "
                    "its report", path, exc)
        return {}


def _ended(state: str | None) -> bool:
    if state is None:
        return True  # slurmctld forgot it: it ended long ago
    try:
        return job_phase(state.split()[0], "a reported job").ended
    except SlurmOutputError:
        return False  # a state rota does not know: Slurm has not said it ended
