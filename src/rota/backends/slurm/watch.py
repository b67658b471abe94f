"""Waking the control loop soon after a Slurm job of rota's changes state.

Slurm tells nobody when a job starts or ends (``strigger`` runs programs on slurmctld's host,
for administrators), so ``SlurmWatcher`` asks: every ``period_s``, while rota has launches in
Slurm, one ``squeue --noheader --format=%i|%T --states=all --jobs=<those>`` (a few hundred bytes
of text for the jobs named, unlike ``--json``, which lists every job of the cluster). When a
job's state differs from the last answer (it started, ended, or Slurm forgot it), it calls
``wake``; the control loop's pass then looks at everything through ``poll``. Each answer also
goes to ``seen`` (the states by job id, and the ids asked about), which confirms the ends that
jobs reported early (``early``). A failed
``squeue`` is skipped: the loop's periodic pass covers the time it takes to answer again.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from rota.backends.slurm.commands import SlurmCommands, SlurmCommandError

log = logging.getLogger("rota.backends.slurm")
PERIOD_S = 0.5


class SlurmWatcher:
    def __init__(self, commands: SlurmCommands, tracked: Callable[[], list[int]],
                 wake: Callable[[], None],
                 seen: Callable[[dict[int, str], list[int]], None] = lambda states, ids: None,
                 period_s: float = PERIOD_S) -> None:
        self.commands, self.tracked, self.wake, self.seen = commands, tracked, wake, seen
        self.period_s = period_s
        self._last: dict[int, str] = {}
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rota-slurm-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._halt.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._halt.wait(self.period_s):
            ids = sorted(self.tracked())
            if not ids:
                self._last = {}
                continue
            try:
                states = self.states(ids)
            except SlurmCommandError as exc:
                log.debug("watching Slurm jobs: %s", exc)
                continue
            if any(states.get(i) != self._last.get(i) for i in ids):
                self.wake()
            self._last = states
            self.seen(states, ids)

    def states(self, ids: list[int]) -> dict[int, str]:
        out = self.commands.run(("squeue", "--noheader", "--format=%i|%T", "--states=all",
                                 "--jobs=" + ",".join(map(str, ids))))
        found = {}
        for line in out.splitlines():
            ident, _, state = line.partition("|")
            if ident.strip().isdigit():
                found[int(ident)] = state.strip()
        return found
