"""The control plane's durable store: SQLite (WAL) by default, PostgreSQL by URL.

``Store`` is the whole interface: projects, users, memberships and API tokens; flavours, queues
and node inventory; jobs (submit, list, show, cancel, events, backend-reported transitions);
and the scheduling cycle's side (``snapshot(now)`` -> ``run_cycle`` -> ``apply(decisions, now)``)
with usage accounting. It imports ``rota.core`` and itself only. Modules:

- ``store``: ``Store``, every public method one transaction;
- ``schema``: the tables (and why);
- ``migrations``: Alembic revisions, run at open by ``engine``;
- ``engine``: the SQLite and PostgreSQL engines, and the migrations run when a store opens;
- ``records``: values in and out (``Submission``, ``JobRecord``, ``Page``, ``JobEvent``);
- ``convert``: rows and JSON columns <-> core values (the job spec format is documented there);
- ``transactions``: the base every part of ``Store`` is built on (engine, clock, one
  transaction per method);
- ``tenancy``: the part of ``Store`` for projects, users, memberships, tokens and
  authentication;
- ``inventory``: the part of ``Store`` for flavours, queues, idle defaults and nodes;
- ``billing``: the part of ``Store`` for usage, accounting, prices and budgets;
- ``jobs``, ``admin``, ``cycle``: the operations, each on a connection the ``Store`` opened;
  ``jobs`` reads job rows: by id, in pages, their events, attempts and what keeps them pending;
- ``moves``: moving jobs between states, one by one or many launches at once, with their
  events and the history of their attempts; cancelling;
- ``marks``: the writes that keep a job's state: notes, holds and releases, checkpoints, the
  handles and placements backends report, up to when a job is billed;
- ``changes``: changing a pending job's walltime, priority or queue (``rota update``);
- ``submit``: submitting jobs: the checks, fair-use caps on pending jobs, idempotency keys, the
  inserts;
- ``briefs``: brief views of jobs (what ``rota ps`` shows), written as JSON by the database;
- ``held``: the jobs that hold resources, cached by row version between passes;
- ``queueset``: a queues file applied in one transaction, and the open queues it retires;
- ``access``: taking access away: disabling a user, revoking a user's tokens, ending a
  membership;
- ``accounting``: exact accounting from the store's records: allocations, idle spans, prices
  and budgets;
- ``services``: model-serving services and their model names, and the replicas made from them;
- ``datasets``: datasets jobs read, what each node's cache holds, and per-project quotas on
  cached bytes;
- ``lease``: named leases with a holder and an expiry (one control loop per database);
- ``tokens``: token generation, hashing, roles and principals;
- ``errors``: the store's errors, with stable codes;
- ``group``: group commit, one writer thread committing concurrent submits together;
- ``authcache``: authenticated principals cached for a few seconds, cleared by the writes that
  change them.

Durability (``engine``): an acknowledged write survives a kill of the process and a crash of
the machine (SQLite WAL with ``synchronous=FULL``).
"""

from rota.store.errors import AlreadyExists, Conflict, NotFound, StoreClosed, Unauthenticated
from rota.store.records import (
    ApplyResult, JobEvent, JobFilter, JobRecord, Move, Page, StateMove, Submission,
)
from rota.store.store import Store
from rota.store.tokens import IssuedToken, Principal, Role, TokenInfo

__all__ = [
    "AlreadyExists", "ApplyResult", "Conflict", "IssuedToken", "JobEvent", "JobFilter",
    "JobRecord", "Move", "NotFound", "Page", "Principal", "Role", "StateMove", "Store",
    "StoreClosed", "Submission", "TokenInfo", "Unauthenticated",
]
