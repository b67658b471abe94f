"""Engines for the store: SQLite (embedded default) and PostgreSQL, plus migrations at open.

SQLite is opened in WAL mode with ``foreign_keys=ON``, ``synchronous=FULL`` (a commit is on disk
before it returns) and a ``busy_timeout``. The driver's own transaction handling is switched off
and the store issues ``BEGIN`` itself: ``BEGIN IMMEDIATE`` for write transactions, so that two
writers queue on the lock instead of one failing half-way with "database is locked", and a plain
deferred ``BEGIN`` for reads, which never block in WAL mode.

PostgreSQL is reached by URL (``postgresql+psycopg://user@host/db``). Migrations take an
advisory lock there, so that two processes opening the same database at once migrate it once.
Every session sets ``idle_in_transaction_session_timeout`` (``IDLE_IN_TRANSACTION_MS``): a
process frozen (SIGSTOP) or cut off from the server in the middle of a transaction would
otherwise keep its row locks until it wakes, and the control plane taking over from it
(``rota.control.standby``) would wait on them; the server ends such a session instead, and
its transaction is rolled back.

Durability, the guarantee rota gives: a write acknowledged (a submit's id returned, a cycle's
decisions applied) survives a kill of the control plane *and* a crash of the machine.

- SQLite: ``synchronous=FULL`` in WAL mode syncs the log to disk before ``COMMIT`` returns.
  ``synchronous=NORMAL`` would keep every acknowledged write across a kill -9 too (the log
  pages are in the operating system's cache, which outlives the process), but not across an
  operating-system crash or power loss: the transactions since the last checkpoint could
  vanish, and with them jobs whose ids users hold. rota keeps FULL because the cost of the
  sync is shared: concurrent submits are committed together, one sync per batch
  (``rota.store.group``), so the sync bounds the number of transactions per second, not the
  number of jobs. ``tests/store/test_store_kill.py`` kills a writer mid-burst and checks that
  every acknowledged id is stored.
- PostgreSQL: durability is the server's (``synchronous_commit``, ``fsync``); rota changes
  neither. The throwaway server of ``.ci/postgres`` runs with ``fsync=off``: it is for tests.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from rota.core import InvalidSpec
from rota.core.datadir import STORE_FILE

WRITE = "rota_write"  # execution option marking a connection that opens write transactions
MIGRATIONS = Path(__file__).parent / "migrations"
_MIGRATION_LOCK = 7_276_584_211  # arbitrary advisory lock key, constant across releases
DEFAULT_BUSY_TIMEOUT_MS = 30_000
IDLE_IN_TRANSACTION_MS = 5_000  # below the lease's time to live (rota.control.lease)


def resolve_url(url_or_path: str | Path) -> str:
    """A database URL from a URL or a data directory / file path (SQLite, the default).

    A directory gets ``rota.db`` inside it; anything with ``://`` is taken as a URL.
    """
    raw = str(url_or_path)
    if "://" in raw:
        try:
            url = make_url(raw)
        except (ArgumentError, ValueError):
            raise InvalidSpec("store.url", "not a database URL; expected e.g. "
                              "postgresql+psycopg://USER@HOST/DBNAME") from None  # no echo: a password
        if url.get_backend_name() not in ("sqlite", "postgresql"):
            raise InvalidSpec("store.url", f"unsupported database {url.get_backend_name()!r}; "
                                           "use sqlite or postgresql+psycopg")
        if url.get_backend_name() == "postgresql" and url.drivername != "postgresql+psycopg":
            url = url.set(drivername="postgresql+psycopg")
        return url.render_as_string(hide_password=False)
    path = Path(raw).expanduser()
    if path.is_dir() or not path.suffix:
        path.mkdir(parents=True, exist_ok=True)
        path = path / STORE_FILE
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path.resolve()}"


def display_url(url: str) -> str:
    """``url`` as it may be shown or logged: with its password hidden."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return "(a database URL)"


def make_engine(url: str, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS) -> Engine:
    if make_url(url).get_backend_name() == "sqlite":
        return _sqlite_engine(url, busy_timeout_ms)
    return create_engine(url, pool_pre_ping=True, connect_args={
        "options": f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}"})


def _sqlite_engine(url: str, busy_timeout_ms: int) -> Engine:
    engine = create_engine(url, connect_args={"check_same_thread": False,
                                              "timeout": busy_timeout_ms / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None  # the store issues BEGIN itself (see _on_begin)
        cursor = dbapi_conn.cursor()
        for pragma in ("journal_mode=WAL", "foreign_keys=ON", "synchronous=FULL",
                       f"busy_timeout={int(busy_timeout_ms)}"):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:
        immediate = conn.get_execution_options().get(WRITE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def migrate(engine: Engine) -> str:
    """Bring the schema to the newest revision in one transaction; returns that revision."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.execution_options(**{WRITE: True}).begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
        return str(conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one())
