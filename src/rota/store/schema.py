"""The tables of the control plane's store, as SQLAlchemy Core metadata.

Why these tables, and why these shapes:

- ``projects``, ``users``, ``memberships``: tenants, people, and who belongs where. A member
  token sees only the jobs of its user's projects. A user with ``disabled_at`` set is refused
  with every token it has (an operator took its access away); its rows stay, as its jobs'
  history refers to it.
- ``api_tokens``: one row per issued token, holding only ``token_hash`` (SHA-256 hex of the
  plaintext) and a short ``display`` prefix that lets a person tell tokens apart. The plaintext
  is shown once, at issue, and never stored.
- ``flavors``, ``queues``: operator configuration. Quotas and preemption settings are JSON:
  they are read whole, by the snapshot, and never queried by field. ``queues.projects`` lists
  the projects whose jobs may use the queue; NULL means every project may.
- ``nodes``: inventory reported by a backend (``devices`` JSON, ``last_seen``). ``schedulable``
  belongs to the operator (cordon): an inventory upsert keeps it, as it keeps ``drain`` (no new
  work; running work goes on unless the operator evicts it) and ``reason`` (why the operator took the node out).
- ``jobs``: one row per job. The columns are what the store filters, orders or guards on
  (project, user, queue, state, times, ``version``); ``spec`` is the core-level request as JSON
  (see ``rota.store.convert``), ``placement`` the bind, ``wait_reasons`` and
  ``estimated_start`` the latest cycle's explanation for a pending job. ``id`` is an integer that
  only grows (never reused, also on SQLite), so it doubles as the keyset pagination key; the
  core ``JobId`` is its decimal string. ``version`` grows by one on every write: updates are
  guarded with ``WHERE version = :read`` so that a concurrent writer's change is never lost.
  ``attempts`` counts every requeue, ``failures`` those that spend the restart budget (all
  but the requeues after a preemption or a fault of the infrastructure), ``lost_streak`` the
  attempts in a row lost to such faults. ``billed_until`` is the time up to which a running
  job's GPU use is already in ``usage``, so that a restarted control plane bills the time it
  was down. ``held`` is why a person or the control plane holds a pending job back (empty:
  not held); ``eligible_at`` the time before which it may not start (its ``start_at``, or a
  retry's backoff); ``last_checkpoint_at`` when its running attempt last checkpointed;
  ``depends`` the jobs it waits for (``after_ok``, ``after_any``, ``after_failed``); the tasks of
  an array share ``array_id`` (the first task's id) and ``array_limit``, each its ``array_index``.
- ``attempts``: one row per attempt of a job (its ``attempts`` number): when it was bound,
  launched and ended, where it ran, how it ended (``rota.core.End``), its exit code and
  reason, its last checkpoint, and ``gpus``: the milli-GPUs it holds per GPU model (read from
  the inventory when it was bound, and again where its backend placed it), so that accounting
  needs no node that may have gone since. Accounting (``rota.store.accounting``) reads these
  rows: an attempt holds its GPUs from ``bound_at`` to ``ended_at`` (or now).
- ``idle_spans``: per attempt, the times its GPUs were measured idle (utilisation below its
  idle policy's threshold, ``rota.control.idle``), from the first such sample to the latest.
- ``prices``: the price of one GPU-hour per GPU model, all in one currency (queues file).
- ``budgets``: per project, soft and hard limits in GPU-hours per calendar month (UTC), and
  the month whose soft limit it was last warned of.
- ``gpu_months``: per project and calendar month (UTC), the GPU-seconds its attempts held in
  that month, added when each attempt ends (an attempt over a month's end adds to both):
  with the attempts still running, what a budget has used, without reading the month's
  attempts again (``rota.store.accounting.used_gpu_hours``).
- ``idle_policies``: operators' idle reclamation defaults, per queue and for all (scope
  ``*``), as ``rota.scheduler.idle.IdlePolicy`` reads them.
- ``idempotency_keys``: the ``Idempotency-Key`` of a submit, per user, with the job it made
  (the first task of an array, and the number of tasks), the SHA-256 of the request it came
  with and when; the same key within a day is the same submission, never a second one.
- ``fair_use``: operators' caps on what one user or one project may have at once (pending
  jobs, submissions per second, storage), per scope (``user``, ``project``), as set in the
  queues file; only the keys an operator set are stored (the others keep their defaults).
- ``services``: model-serving services (``rota.core.serving``): the project, queue and user
  their replicas run under, ``models`` (a JSON list; a model is served by one service only,
  which ``service_models`` guards with its primary key), ``settings`` (replicas, target, idle,
  ...) and ``template``, the submission every replica job is made from. Replicas are jobs of
  kind service labelled with their service's name.
- ``datasets``: what jobs read (``rota.core.datasets``): the project that owns each, its
  source, version and size (NULL: not known). ``dataset_caches``: what each node's cache holds,
  per dataset and version, in bytes, and when a job last started with it, as the backend that
  fills the caches reports it (no foreign keys: a node may hold a copy of a dataset removed
  since, until it is evicted). ``dataset_quotas``: per project, the most bytes of its datasets
  the nodes' caches may hold together.
- ``job_events``: an append-only history per job (time, kind, message, data JSON).
- ``usage``: per project, GPU-seconds already decayed to ``as_of``.
- ``leases``: named leases with a holder and an expiry; the control loop holds ``control-loop``
  so that two control planes never drive one database at once.

Times are float seconds since the epoch (the core's clock unit), stored as double precision.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON, BigInteger, Boolean, Column, Float, ForeignKey, Index, Integer, MetaData, String, Table, Text, false,
)

metadata = MetaData(naming_convention={
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
})

NAME = 63
Time = Float(precision=53)

projects = Table(
    "projects", metadata,
    Column("name", String(NAME), primary_key=True),
    Column("weight", Float(precision=53), nullable=False),
    Column("created_at", Time, nullable=False),
)

users = Table(
    "users", metadata,
    Column("name", String(NAME), primary_key=True),
    Column("created_at", Time, nullable=False),
    Column("unix_user", String(32), nullable=True),  # the OS account of its jobs; NULL: name
    Column("disabled_at", Time, nullable=True),       # access taken away; NULL: enabled
)

memberships = Table(
    "memberships", metadata,
    Column("user", String(NAME), ForeignKey("users.name", ondelete="CASCADE"), primary_key=True),
    Column("project", String(NAME), ForeignKey("projects.name", ondelete="CASCADE"),
           primary_key=True),
)

api_tokens = Table(
    "api_tokens", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(NAME), nullable=False),
    Column("user", String(NAME), ForeignKey("users.name", ondelete="CASCADE"), nullable=False),
    Column("role", String(16), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("display", String(16), nullable=False),
    Column("created_at", Time, nullable=False),
    Column("revoked_at", Time),
    Index("uq_api_tokens_user_name", "user", "name", unique=True),
    sqlite_autoincrement=True,
)

flavors = Table(
    "flavors", metadata,
    Column("name", String(NAME), primary_key=True),
    Column("models", JSON, nullable=False),
)

queues = Table(
    "queues", metadata,
    Column("name", String(NAME), primary_key=True),
    Column("cohort", String(NAME)),
    Column("quotas", JSON, nullable=False),
    Column("preemption", JSON, nullable=False),
    Column("resource_groups", JSON, nullable=False),
    Column("projects", JSON),
    Column("slurm", JSON),  # batch options (rota.core.batchopts.QueueBatch.stored); NULL: none
)

nodes = Table(
    "nodes", metadata,
    Column("name", String(253), primary_key=True),
    Column("resource_group", String(NAME), nullable=False),
    Column("cpu_milli", Integer, nullable=False),
    Column("memory_mib", Integer, nullable=False),
    Column("labels", JSON, nullable=False),
    Column("devices", JSON, nullable=False),
    Column("schedulable", Boolean, nullable=False),
    Column("drain", Boolean, nullable=False, server_default=false()),
    Column("reason", Text, nullable=False, server_default=""),
    Column("problem", Text, nullable=False, server_default=""),  # the backend's: drained, NotReady
    Column("foreign", JSON, nullable=False, server_default="[]"),  # held by work outside rota
    # what the node can do (rota.core.nodes); rows stored before it have HOST_FEATURES
    Column("features", JSON, nullable=False,
           server_default='["gpu-sharing", "signals"]'),
    Column("backend", String(NAME), nullable=False),
    Column("last_seen", Time, nullable=False),
)

jobs = Table(
    "jobs", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(NAME), nullable=False),
    Column("project", String(NAME), ForeignKey("projects.name"), nullable=False),
    Column("user", String(NAME), ForeignKey("users.name"), nullable=False),
    Column("queue", String(NAME), nullable=False),
    Column("priority", Integer, nullable=False),
    Column("kind", String(16), nullable=False),
    Column("replicas", Integer, nullable=False),
    Column("spec", JSON, nullable=False),
    Column("state", String(16), nullable=False),
    Column("placement", JSON),
    Column("flavor", String(NAME)),
    Column("submit_time", Time, nullable=False),
    Column("started_at", Time),
    Column("finished_at", Time),
    Column("exit_code", Integer),
    Column("reason", Text, nullable=False, default=""),
    Column("wait_reasons", JSON),
    Column("estimated_start", Time),
    Column("preempt_deadline", Time),
    # a note beside the job, as wait_reasons: the last cycle left it waiting for the jobs it
    # evicted for itself (the scheduler's ``Snapshot.nominated``)
    Column("nominated", Boolean, nullable=False, server_default=false()),
    Column("cancel_requested", Boolean, nullable=False, default=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("failures", Integer, nullable=False, server_default="0"),
    Column("backend_handle", JSON),
    Column("billed_until", Time),
    Column("held", Text, nullable=False, server_default=""),
    Column("lost_streak", Integer, nullable=False, server_default="0"),
    Column("eligible_at", Time),
    Column("last_checkpoint_at", Time),
    Column("depends", JSON),            # [[kind, job id], ...]: after_ok, after_any, after_failed
    Column("array_id", Integer),        # the id of the array's first task, for each of its tasks
    Column("array_index", Integer),
    Column("array_limit", Integer),     # at most this many tasks hold resources at once
    Column("version", Integer, nullable=False, default=1),
    Column("updated_at", Time, nullable=False),
    Index("ix_jobs_state", "state"),
    Index("ix_jobs_project_state", "project", "state"),
    Index("ix_jobs_user", "user"),
    Index("ix_jobs_user_state", "user", "state"),
    Index("ix_jobs_queue", "queue"),
    Index("ix_jobs_array_id", "array_id"),
    sqlite_autoincrement=True,
)

idle_policies = Table(
    "idle_policies", metadata,
    Column("scope", String(NAME), primary_key=True),
    Column("policy", JSON, nullable=False),
)

attempts = Table(
    "attempts", metadata,
    Column("job", Integer, ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True),
    Column("attempt", Integer, primary_key=True),
    Column("bound_at", Time, nullable=False),
    Column("launched_at", Time),
    Column("ended_at", Time),
    Column("placement", JSON),
    Column("end", String(16)),
    Column("exit_code", Integer),
    Column("reason", Text, nullable=False, server_default=""),
    Column("last_checkpoint_at", Time),
    Column("gpus", JSON),  # {GPU model: milli-GPUs held}, as the inventory said at bind
    Column("handle", JSON),  # its backend handle, kept after it ended: its logs (0016)
    Column("max_rss_kib", BigInteger),  # its peak resident memory, where its backend tells (0017)
    Index("ix_attempts_ended_at", "ended_at"),
)

idle_spans = Table(
    "idle_spans", metadata,
    Column("job", Integer, ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True),
    Column("attempt", Integer, primary_key=True),
    Column("since", Time, primary_key=True),
    Column("until", Time, nullable=False),
)

prices = Table(
    "prices", metadata,
    Column("model", String(255), primary_key=True),
    Column("currency", String(3), nullable=False),
    Column("gpu_hour", Float(precision=53), nullable=False),
)

budgets = Table(
    "budgets", metadata,
    Column("project", String(NAME), ForeignKey("projects.name", ondelete="CASCADE"),
           primary_key=True),
    Column("soft_gpu_hours", Float(precision=53)),
    Column("hard_gpu_hours", Float(precision=53)),
    Column("warned", String(7), nullable=False, server_default=""),  # month last warned of
    Column("set_at", Time, nullable=False),
)

idempotency_keys = Table(
    "idempotency_keys", metadata,
    Column("user", String(NAME), ForeignKey("users.name", ondelete="CASCADE"),
           primary_key=True),
    Column("key", String(255), primary_key=True),
    Column("job", Integer, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("tasks", Integer),            # an array's number of tasks; NULL: one job
    Column("fingerprint", String(64), nullable=False),
    Column("created_at", Time, nullable=False),
    Index("ix_idempotency_keys_created_at", "created_at"),
)

fair_use = Table(
    "fair_use", metadata,
    Column("scope", String(16), primary_key=True),
    Column("caps", JSON, nullable=False),
)

services = Table(
    "services", metadata,
    Column("name", String(NAME), primary_key=True),
    Column("project", String(NAME), ForeignKey("projects.name"), nullable=False),
    Column("queue", String(NAME), nullable=False),
    Column("user", String(NAME), ForeignKey("users.name"), nullable=False),
    Column("settings", JSON, nullable=False),
    Column("template", JSON, nullable=False),
    Column("created_at", Time, nullable=False),
)

service_models = Table(
    "service_models", metadata,
    Column("model", String(255), primary_key=True),
    Column("service", String(NAME), ForeignKey("services.name", ondelete="CASCADE"),
           nullable=False),
)

datasets = Table(
    "datasets", metadata,
    Column("name", String(NAME), primary_key=True),
    Column("project", String(NAME), ForeignKey("projects.name"), nullable=False),
    Column("user", String(NAME), nullable=False),
    Column("source", Text, nullable=False),
    Column("version", String(NAME), nullable=False),
    Column("size_bytes", BigInteger),
    Column("created_at", Time, nullable=False),
)

dataset_caches = Table(
    "dataset_caches", metadata,
    Column("node", String(253), primary_key=True),
    Column("dataset", String(NAME), primary_key=True),
    Column("version", String(NAME), primary_key=True),
    Column("bytes", BigInteger, nullable=False),
    Column("last_used", Time, nullable=False),
)

dataset_quotas = Table(
    "dataset_quotas", metadata,
    Column("project", String(NAME), ForeignKey("projects.name", ondelete="CASCADE"),
           primary_key=True),
    Column("cache_bytes", BigInteger, nullable=False),
)

job_events = Table(
    "job_events", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("job", Integer, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("time", Time, nullable=False),
    Column("kind", String(32), nullable=False),
    Column("message", Text, nullable=False),
    Column("data", JSON, nullable=False),
    Index("ix_job_events_job_id", "job", "id"),
    sqlite_autoincrement=True,
)

usage = Table(
    "usage", metadata,
    Column("project", String(NAME), ForeignKey("projects.name", ondelete="CASCADE"),
           primary_key=True),
    Column("gpu_seconds", Float(precision=53), nullable=False),
    Column("as_of", Time, nullable=False),
)

gpu_months = Table(  # GPU-seconds of the attempts that ended, per project and month (UTC)
    "gpu_months", metadata,
    Column("project", String(NAME), ForeignKey("projects.name", ondelete="CASCADE"),
           primary_key=True),
    Column("month", String(7), primary_key=True),  # 2026-11
    Column("gpu_seconds", Float(precision=53), nullable=False),
)

leases = Table(
    "leases", metadata,
    Column("name", String(NAME), primary_key=True),
    Column("holder", String(255), nullable=False),
    Column("acquired_at", Time, nullable=False),
    Column("expires_at", Time, nullable=False),
)
