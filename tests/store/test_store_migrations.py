"""Opening a store migrates an empty database to the newest revision, once; the migrations
build exactly the tables ``rota.store.schema`` declares; URLs and paths resolve as documented."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy import Connection, create_engine, inspect, text

from rota.core import InvalidSpec
from rota.store import Store
from rota.store.engine import MIGRATIONS, resolve_url
from rota.store.schema import attempts, job_events, metadata
from storekit import seed, submission

HEAD = "0018"
TABLES = {"projects", "users", "memberships", "api_tokens", "flavors", "queues", "nodes", "jobs",
          "attempts", "idle_policies", "idempotency_keys", "fair_use", "idle_spans", "prices",
          "budgets", "services", "service_models", "gpu_months", "datasets",
          "dataset_caches", "dataset_quotas",
          "job_events", "usage", "leases", "alembic_version"}


def test_opening_an_empty_database_creates_every_table_at_the_head_revision(db_url):
    with Store.open(db_url) as store:
        assert store.revision == HEAD
    engine = create_engine(db_url)
    try:
        assert set(inspect(engine).get_table_names()) == TABLES
        with engine.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == HEAD
    finally:
        engine.dispose()


def test_the_migrations_build_exactly_the_declared_schema(db_url):
    Store.open(db_url).close()
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), metadata)
        assert diff == []
    finally:
        engine.dispose()


def test_reopening_a_migrated_database_keeps_its_data(db_url):
    with Store.open(db_url) as store:
        store.create_project("p", weight=3.0)
    with Store.open(db_url) as store:
        assert [(p.name, p.weight) for p in store.list_projects()] == [("p", 3.0)]


def test_sqlite_runs_in_wal_mode_with_foreign_keys(tmp_path):
    with Store.open(tmp_path) as store:
        with store._engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() > 0
    assert (tmp_path / "rota.db").exists()


@pytest.mark.parametrize("given, expected", [
    ("DIR", "sqlite:///DIR/rota.db"),                       # a data directory
    ("DIR/sub/state.db", "sqlite:///DIR/sub/state.db"),     # a file, parents created
    ("postgresql://u@h/db", "postgresql+psycopg://u@h/db"),  # the psycopg 3 driver
    ("postgresql+psycopg://u:pw@h:5433/db", "postgresql+psycopg://u:pw@h:5433/db"),
], ids=["data-dir", "file", "postgres-driver", "postgres-url"])
def test_urls_and_paths_resolve(tmp_path: Path, given, expected):
    assert resolve_url(given.replace("DIR", str(tmp_path))) == expected.replace("DIR", str(tmp_path))


@pytest.mark.parametrize("url", ["mysql://u@h/db", "postgresql://u@h:notaport/db"])
def test_unsupported_urls_are_refused_naming_the_field(url):
    with pytest.raises(InvalidSpec) as err:
        resolve_url(url)
    assert err.value.field == "store.url"


@contextmanager
def downgraded(db_url: str, revision: str) -> Iterator[Connection]:
    """The database taken back to ``revision``, to write what an older rota would have: a
    connection in one transaction."""
    engine = create_engine(db_url)
    try:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            command.downgrade(config, revision)
            yield conn
    finally:
        engine.dispose()


def test_revision_0003_counts_the_failures_of_jobs_stored_before_it(db_url):
    """A job stored at 0002 with attempts 3, whose history has two requeues after a preemption
    and one after a failed run: failures 3 - 2 = 1 once migrated."""
    with Store.open(db_url) as store:
        job = seed(store).submit(submission())
    history = [("preempting", "pending"), ("running", "pending"), ("preempting", "pending"),
               ("pending", "scheduled")]
    with downgraded(db_url, "0002") as conn:
        conn.execute(text("UPDATE jobs SET attempts = 3"))
        for old, new in history:
            conn.execute(job_events.insert().values(
                job=int(job), time=0.0, kind="state", message=f"{old} -> {new}",
                data={"from": old, "to": new}))
    with Store.open(db_url) as store:
        assert store.revision == HEAD
        assert (store.get_job(job).attempts, store.get_job(job).failures) == (3, 1)


def test_revision_0012_adds_up_the_attempts_that_ended_before_it_per_month(db_url):
    """At 0011: an attempt of 1.5 H100s and half an A100 (2 GPUs) from 1 h before December
    to 2 h into it, and one stored before ``gpus`` was, of one GPU for 3 h in December."""
    december = datetime(2026, 12, 1, tzinfo=timezone.utc).timestamp()
    with Store.open(db_url) as store:
        job = seed(store).submit(submission())
    with downgraded(db_url, "0011") as conn:
        conn.execute(attempts.insert().values(
            job=int(job), attempt=0, bound_at=december - 3600, ended_at=december + 7200,
            reason="", gpus={"H100-80GB": 1500, "A100-40GB": 500}))
        conn.execute(attempts.insert().values(
            job=int(job), attempt=1, bound_at=december + 7200, ended_at=december + 18000,
            reason="", placement=[{"node": "gone", "devices": [[3, 1000, 0]]}]))
        conn.execute(attempts.insert().values(  # still running: counted when it ends
            job=int(job), attempt=2, bound_at=december + 18000, reason="",
            gpus={"H100-80GB": 1000}))
    with Store.open(db_url) as store:
        assert store.revision == HEAD
        store.set_budget("p", soft=100, hard=None)
        assert store.budget_status(december - 1)["p"].used_gpu_hours == pytest.approx(2.0)
        # December: 2 GPUs x 2 h, 1 GPU x 3 h, and the running one's hour by then
        assert store.budget_status(december + 6 * 3600)["p"].used_gpu_hours == \
            pytest.approx(8.0)


def test_revision_0014_gives_nodes_stored_before_it_the_features_of_a_host(db_url):
    """A node stored at 0013 had no features: it reads as a machine running processes (GPU
    sharing and signals), as the scheduler treated every node before; the backend's next
    report replaces them with its own."""
    from rota.core import Node, NodeName
    from rota.core.nodes import CONTAINERS, HOST_FEATURES

    with Store.open(db_url) as store:
        store.upsert_nodes([Node(NodeName("old"), 8000, 1024)], "local")
    with downgraded(db_url, "0013"):
        pass
    with Store.open(db_url) as store:
        assert store.revision == HEAD
        assert [n.features for n, _, _ in store.list_nodes()] == [HOST_FEATURES]
        store.upsert_nodes([Node(NodeName("old"), 8000, 1024,
                                 features=frozenset({CONTAINERS}))], "kube")
        assert [n.features for n, _, _ in store.list_nodes()] == [frozenset({CONTAINERS})]


def test_revision_0015_leaves_queues_stored_before_it_without_batch_options(db_url):
    """A queue stored at 0014 had no ``slurm`` section: its jobs run with none."""
    from dataclasses import replace

    from rota.core import Queue

    with Store.open(db_url) as store:
        seed(store)
        store.put_queue(Queue("old"))
    with downgraded(db_url, "0014"):
        pass
    with Store.open(db_url) as store:
        assert store.revision == HEAD
        job = store.submit(replace(submission(1), queue="old", run={"command": ["true"]}))
        assert "slurm" not in store.get_job(job).run
