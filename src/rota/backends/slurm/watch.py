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

With ``on_foreign``, each period also asks which jobs of the whole cluster hold resources
(``squeue --noheader --format=%A --states=RUNNING,CONFIGURING,COMPLETING,SUSPENDED``: one job
id per line, about 8 bytes a job), and calls ``on_foreign`` when that set, less rota's own
tracked jobs, changed since the last answer (or is the first answer: work may have started
after the last reading of the nodes and before it): work started or ended outside rota (a
plain ``sbatch``, a placeholder), which the control loop then reads into the inventory at once
instead of at its next periodic reading. What it costs is measured in bench/mirror.py. A look
that fails in any other way than Slurm's command failing is logged, and the watching goes on.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from rota.backends.slurm.commands import SlurmCommands, SlurmCommandError

log = logging.getLogger("rota.backends.slurm")
PERIOD_S = 0.5
FOREIGN_SQUEUE = ("squeue", "--noheader", "--format=%A",
                  "--states=RUNNING,CONFIGURING,COMPLETING,SUSPENDED")


class SlurmWatcher:
    def __init__(self, commands: SlurmCommands, tracked: Callable[[], list[int]],
                 wake: Callable[[], None],
                 seen: Callable[[dict[int, str], list[int]], None] = lambda states, ids: None,
                 period_s: float = PERIOD_S,
                 on_foreign: Callable[[], None] | None = None) -> None:
        self.commands, self.tracked, self.wake, self.seen = commands, tracked, wake, seen
        self.period_s, self.on_foreign = period_s, on_foreign
        self._last: dict[int, str] = {}
        self._others: set[str] | None = None  # the last answer's jobs of others (None: none)
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rota-slurm-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._halt.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._halt.wait(self.period_s):
            try:
                if self.on_foreign is not None:
                    self._look_at_others()
                self._look_at_ours()
            except Exception:  # noqa: BLE001 - one bad look must not end the watching
                log.exception("watching Slurm jobs failed; trying again in %g s", self.period_s)

    def _look_at_ours(self) -> None:
        ids = sorted(self.tracked())
        if not ids:
            self._last = {}
            return
        try:
            states = self.states(ids)
        except SlurmCommandError as exc:
            log.debug("watching Slurm jobs: %s", exc)
            return
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

    def holding(self) -> set[str]:
        """The ids of every job of the cluster that holds resources now."""
        out = self.commands.run(FOREIGN_SQUEUE)
        return {line.strip() for line in out.splitlines() if line.strip()}

    def _look_at_others(self) -> None:
        try:
            holding = self.holding()
        except SlurmCommandError as exc:
            log.debug("watching the cluster's jobs: %s", exc)
            return
        others = holding - {str(i) for i in self.tracked()}
        if others != self._others:  # the first answer too: work may have started before it
            self.on_foreign()  # type: ignore[misc]
        self._others = others

