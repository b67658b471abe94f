"""The control plane's loop: the only part of rota with a real loop and side effects.

It imports the core, the scheduler, the store and the backends' contract
(``rota.backends.base``; ``setup`` also reads this machine's GPUs), never the API, the CLI or
the composition in ``rota.server``.

The loop and what one pass carries out:

- ``loop``: ``ControlLoop``, one pass = reconcile -> bill -> snapshot -> ``run_cycle`` ->
  apply -> launch, on a background thread woken by ``wake()`` and a period;
- ``passtime``: the parts of a pass timed into the metrics, and a cycle kept out of the
  garbage collector's view;
- ``reconcile``: carrying out what ``verdict`` decides for each active job, launching bound
  jobs, billing usage: ``Reconciler``, put together from ``observe`` and ``landing`` on
  ``tracking``;
- ``tracking``: what the control process knows of each active job beyond the store, the state
  moves of a pass written together, and usage billed;
- ``observe``: adopting and polling the launched jobs, a failing poll asked again by halves;
- ``landing``: handing bound jobs to the launcher, and recording what became of the launches;
- ``handoff``: a job's own report of its end (a Slurm batch script's), taken by the backend and
  answered once the pass that took it has its launches out; attempts still running long after
  their report stopped;
- ``verdict``: the pure rules (exit codes, restart budget, cancel, preemption grace);
- ``launcher``: launching the jobs a pass bound, many at once, recovering attempts an earlier
  control plane started;
- ``forecasts``: start estimates of pending jobs (``rota.scheduler.forecast``), run at most
  once per period and told in each pass's waits;
- ``datasources``: an S3 dataset source listed when it is declared: its size, or why not;
- ``prefetch``: the datasets of pending jobs about to start copied into their nodes' caches
  ahead of the launch, on a thread of its own;
- ``eligibility``: which pending jobs may be scheduled now (account, budget, hold, start time,
  dependencies, array limit), a pure decision made before the cycle sees them;
- ``budgets``: project budgets carried out: whose new jobs wait, and the soft limit's warning;
- ``idle``: idle reclamation carried out: which running jobs to stop for holding GPUs idle;
- ``inventory``: the store's nodes kept as their backend reports them;
- ``migcalendar``: when a MIG calendar's entries occur, in their time zones;
- ``migswitch``: a MIG plan's switches carried out on this machine's GPUs before each pass's
  inventory: drain or defer, repartition, read the new instances;
- ``intake``: work a backend offers (Kubernetes Pods for rota), submitted as jobs, each once;
- ``runspec``: each job's launch spec (``rota.core.runspec``), read once per job, its working
  directory and safe extraction of uploads;
- ``accounts``: which OS account runs each user's jobs (multi-user mode as root, else only
  the control plane's own account's jobs), and whether an account may enter a directory;
- ``sysaccounts``: which OS accounts (root, system accounts) a user is mapped to only when the
  operator says so explicitly.

What the control plane gives the API:

- ``logs``: the API's log reader over the backend that ran a job;
- ``sessions``: commands and ports inside running jobs (``rota exec``, ``shell``,
  ``forward``), opened through the backend that runs them;
- ``screen``: refusing at submit a job that can never run, by the scheduler's own screening;
- ``queueview``: the JSON view of queues: quotas, usage, borrowing and who may use each;
- ``metrics``: the Prometheus metrics of ``GET /metrics``;
- ``serving``: the serving runtime: services' replicas started on demand and stopped when idle,
  and a ready replica chosen for each request the gateway passes on;
- ``replicas``: what the serving runtime knows of each service and replica, and its rules:
  readiness, loading replicas kept from preemption and scale-in, which replicas stop first;
- ``servingmetrics``: the serving runtime's Prometheus metrics.

One control plane, and its start:

- ``lock``: one control loop per data directory;
- ``lease``: one per database (the ``control-loop`` lease);
- ``standby``: a second control plane on a database whose lease a live one holds: it serves
  the API and takes the lease over once it expires;
- ``clock``: the injected ``Clock``;
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
