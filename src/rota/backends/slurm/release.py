"""Releasing rota's held Slurm jobs in batches, off the control loop's thread.

A launch submits its job held and returns once the handle is saved (``backend``); while the
backend is watched, the release is queued here instead of run inline: ``Releaser`` waits
``window_s`` for more launches of the same pass and releases them all with one
``scontrol release <id>,<id>,...`` (one Slurm command instead of one per job; an id that ended
meanwhile does not stop the others). A failed release (here or inline) is logged and left
to ``poll``, which releases every recorded attempt it still finds held (``JobHeldUser``);
``stop`` releases what is queued before it returns.
"""

from __future__ import annotations

import logging
import threading

from rota.backends.slurm.commands import SlurmCommands, SlurmCommandError

log = logging.getLogger("rota.backends.slurm")
WINDOW_S = 0.05


class Releaser:
    def __init__(self, commands: SlurmCommands, window_s: float = WINDOW_S) -> None:
        self.commands, self.window_s = commands, window_s
        self._queued: list[int] = []
        self._cond = threading.Condition()
        self._halt = False
        self._thread = threading.Thread(target=self._run, name="rota-slurm-release",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def put(self, slurm_id: int) -> None:
        with self._cond:
            self._queued.append(slurm_id)
            self._cond.notify()

    def flush(self) -> None:
        """Release what is queued now, without waiting for the window."""
        self._flush()

    def queued(self) -> set[int]:
        with self._cond:
            return set(self._queued)

    def stop(self) -> None:
        with self._cond:
            self._halt = True
            self._cond.notify()
        self._thread.join(timeout=30)
        self._flush()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queued and not self._halt:
                    self._cond.wait()
                if self._halt:
                    return
            self._halt_or_wait()
            self._flush()

    def _halt_or_wait(self) -> None:
        with self._cond:
            if not self._halt:
                self._cond.wait(self.window_s)  # let the rest of the pass's launches join

    def _flush(self) -> None:
        with self._cond:
            ids, self._queued = self._queued, []
        if ids:
            release(self.commands, ids)


def release(commands: SlurmCommands, ids: list[int]) -> None:
    """``scontrol release`` of ``ids``; Slurm's complaints about jobs that ended are ignored."""
    try:
        commands.run(("scontrol", "release", ",".join(map(str, sorted(ids)))))
    except SlurmCommandError as exc:
        log.info("scontrol release %s: %s", ids, exc.stderr or exc)
