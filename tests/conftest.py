"""Fixtures for every test directory. ``db_url``: the URL of an empty database, once a fresh
SQLite file and once a fresh schema of a real PostgreSQL, so a test that takes it runs on both.

PostgreSQL comes from ``ROTA_TEST_POSTGRES_URL`` (``.ci/postgres`` starts one and prints it).
This test session creates its own database there and drops it at the end, so that parallel
runs never share tables. Without the variable the PostgreSQL cases skip, unless ``CI`` is set:
then they fail, because CI must test both databases.
"""

import os
import sys
import uuid
from pathlib import Path
from typing import Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).parent))

from requires import required_env  # noqa: E402

PG_ENV = "ROTA_TEST_POSTGRES_URL"


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    base = required_env(PG_ENV, f"run `export {PG_ENV}=$(.ci/postgres)` to test the store on "
                                "PostgreSQL too", "PostgreSQL")
    name = f"rota_t_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path) -> Iterator[str]:
    """The URL of an empty database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'rota.db'}"
        return
    yield request.getfixturevalue("empty_postgres")


@pytest.fixture
def empty_postgres(postgres_database) -> str:
    """The URL of the test database on PostgreSQL, emptied of what earlier tests made."""
    engine = create_engine(postgres_database, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    engine.dispose()
    return postgres_database


@pytest.fixture(autouse=True)
def _umask_kept() -> Iterator[None]:
    """A test that opens a control plane in this process (``private_umask``) leaves the umask
    as it found it, so that what later tests create keeps the modes they expect."""
    mask = os.umask(0o022)
    os.umask(mask)
    yield
    os.umask(mask)


# -- no silent skips in CI ------------------------------------------------------------------------

def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "may_skip: the test needs hardware CI does not have (an "
                            "NVIDIA GPU, IPv6); it may skip even where CI is set")


def _must_run(item) -> bool:
    return bool(os.environ.get("CI")) and item.get_closest_marker("may_skip") is None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Where ``CI`` is set, a test that skips fails instead, with its reason: CI provides every
    fixture a test needs (PostgreSQL, Slurm, Kubernetes, Prometheus, Chromium, root, the traces),
    so a skip there means one went missing. Tests marked ``may_skip`` (hardware) are exempt."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail") and _must_run(item):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"CI is set, so this test must run, but it skipped: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """The same for a whole module that skips as it is collected (``pytest.importorskip``)."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"CI is set, so {collector.nodeid} must run, but it skipped: {reason}"
