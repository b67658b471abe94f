"""Running Slurm's commands: the one place where the Slurm backend starts a process.

The cluster is found as Slurm's commands find it: ``SLURM_CONF`` when it is set, else Slurm's
compiled-in default (``/etc/slurm/slurm.conf`` in Debian's packages). Every command runs with
a clean environment: what a job would inherit (``rota.backends.env.inherited``: ``PATH``, the
locale, proxies) and ``SLURM_CONF``, never the rest of the control plane's environment, in
which ``SQUEUE_FORMAT``, ``SACCT_FORMAT``, ``SBATCH_*`` and the like would change what a
command prints or submits. ``sbatch`` for a job that runs as another OS account (multi-user
mode) is started with that account's uid, gid and groups, so that munge vouches for that user
and Slurm runs the job as them.

A command that cannot be started, times out or exits non-zero raises ``SlurmCommandError``
(a ``BackendError``: ``slurm_missing``, ``slurm_timeout`` or ``slurm_command``) carrying its
exit status and standard error, so that callers can tell "job already gone" from a fault.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import Mapping, Sequence

from rota.backends.base import BackendError, RunAs
from rota.backends.env import inherited

TIMEOUT_S = 60.0


class SlurmCommandError(BackendError):
    def __init__(self, code: str, argv: Sequence[str], message: str, status: int | None = None,
                 stderr: str = "") -> None:
        super().__init__(code, f"{' '.join(argv[:3])}: {message}")
        self.status, self.stderr = status, stderr


@dataclass(frozen=True, slots=True)
class SlurmCommands:
    """``slurm_conf``: the cluster's configuration file (None: Slurm's default)."""

    slurm_conf: str | None = None
    timeout_s: float = TIMEOUT_S

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> SlurmCommands:
        environ = os.environ if environ is None else environ
        return cls(environ.get("SLURM_CONF") or None)

    def environment(self, base: Mapping[str, str] | None = None,
                    extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: what a job inherits from this process), ``SLURM_CONF``, ``extra``."""
        env = dict(inherited(os.environ) if base is None else base)
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        env.update(extra or {})
        return env

    def run(self, argv: Sequence[str], stdin: str | None = None,
            extra_env: Mapping[str, str] | None = None, base_env: Mapping[str, str] | None = None,
            run_as: RunAs | None = None) -> str:
        """Standard output of ``argv``; ``SlurmCommandError`` unless it exits 0."""
        account = {} if run_as is None else {
            "user": run_as.uid, "group": run_as.gid, "extra_groups": list(run_as.groups)}
        try:
            done = subprocess.run(list(argv), input=stdin, capture_output=True, text=True,
                                  env=self.environment(base_env, extra_env), cwd="/",
                                  timeout=self.timeout_s, **account)
        except FileNotFoundError:
            raise SlurmCommandError("slurm_missing", argv, f"{argv[0]} is not installed here "
                                    "(rota drives Slurm through its commands)") from None
        except subprocess.TimeoutExpired:
            raise SlurmCommandError("slurm_timeout", argv, f"no answer in {self.timeout_s:g} s "
                                    "(is slurmctld up?)") from None
        if done.returncode != 0:
            err = done.stderr.strip()
            raise SlurmCommandError("slurm_command", argv, f"exit {done.returncode}: {err}",
                                    done.returncode, err)
        return done.stdout
