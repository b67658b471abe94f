"""The control plane's loop: the only part of rota with a real loop and side effects.

Modules:

- ``loop``: ``ControlLoop``, one pass = reconcile -> bill -> snapshot -> ``run_cycle`` ->
  apply -> launch, on a background thread woken by ``wake()`` and a period;
- ``reconcile``: carrying out what ``verdict`` decides for each active job, launching bound
  jobs, billing usage; ``verdict``: the pure rules (exit codes, restart budget, cancel,
  preemption grace);
- ``runspec``: each job's launch spec (``rota.core.runspec``), read once per job, its working
  directory and safe extraction of uploads;
- ``accounts``: which OS account runs each user's jobs (multi-user mode as root, else only
  the control plane's own account's jobs), and whether an account may enter a directory;
- ``logs``: the API's log reader over the backend that ran a job;
- ``lock``: one control loop per data directory; ``lease``: one per database (the
  ``control-loop`` lease); ``clock``: the injected ``Clock``;
- ``setup``: first start of a control plane (default project, queue, operator and token),
  the credentials file the CLI reads, this machine's inventory.
"""

from rota.control.clock import Clock, SystemClock
from rota.control.lock import DataDirBusy, DataDirLock
from rota.control.loop import ControlLoop
from rota.control.reconcile import PassReport
from rota.control.runspec import RunSpec, parse_run

__all__ = [
    "Clock", "ControlLoop", "DataDirBusy", "DataDirLock", "PassReport", "RunSpec",
    "SystemClock", "parse_run",
]
