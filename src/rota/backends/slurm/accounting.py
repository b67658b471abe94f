"""What Slurm's accounting (``sacct``) says about rota's attempts, when the cluster keeps it.

``Accounting.jobs(ids)`` reads the jobs and their steps with their exit codes (``sacct --json``
and, for the exit codes 22.05's JSON gets wrong, the parseable form: ``records``);
``Accounting.named(name)`` the jobs of one attempt name. A cluster without accounting
(``accounting_storage/none``: ``sacct`` says it is disabled) answers nothing, from then on
(``enabled`` turns False, said once in the log); any other failure is raised, so that a poll
that cannot know is never taken for jobs that vanished.
"""

from __future__ import annotations

import logging

from rota.backends.slurm.commands import SlurmCommands, SlurmCommandError
from rota.backends.slurm.records import (
    SlurmJob, parse_sacct, parse_sacct_exit_codes, sacct_exit_codes, sacct_jobs,
    with_exit_codes,
)

log = logging.getLogger("rota.backends.slurm")
SINCE = "now-30days"  # how far back sacct looks


class Accounting:
    def __init__(self, commands: SlurmCommands) -> None:
        self.commands = commands
        self.enabled = True  # until sacct says the cluster keeps no accounting

    def jobs(self, ids: tuple[int, ...]) -> dict[int, SlurmJob]:
        """Slurm job -> its record, steps and exit codes included."""
        if not ids or not self.enabled:
            return {}
        try:
            jobs = parse_sacct(self.commands.run(sacct_jobs(SINCE, job_ids=ids)))
            codes = parse_sacct_exit_codes(self.commands.run(sacct_exit_codes(SINCE, job_ids=ids)))
        except SlurmCommandError as exc:
            self._disabled(exc)
            return {}
        return {j.id: j for j in with_exit_codes(jobs, codes)}

    def named(self, name: str) -> tuple[SlurmJob, ...]:
        if not self.enabled:
            return ()
        try:
            return parse_sacct(self.commands.run(sacct_jobs(SINCE, names=(name,))))
        except SlurmCommandError as exc:
            self._disabled(exc)
            return ()

    def _disabled(self, exc: SlurmCommandError) -> None:
        if "disabled" not in exc.stderr:
            raise exc
        if self.enabled:
            log.warning("Slurm keeps no accounting: attempts that ended more than MinJobAge "
                        "ago are lost, and gangs report the job's exit code for every replica")
        self.enabled = False
