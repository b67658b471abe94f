"""The ``control-loop`` lease on SQLite and PostgreSQL: two ``Store`` instances on one URL
contend for it, as two control planes on one database would; on PostgreSQL a holder frozen
inside a transaction does not keep the next one waiting."""

from __future__ import annotations

import threading
from typing import Iterator

import pytest
from sqlalchemy import update

from rota.core import InvalidSpec
from rota.store import Store
from rota.store.engine import make_engine
from rota.store.lease import LeaseHeld
from rota.store.schema import leases

NAME, TTL = "control-loop", 15.0


@pytest.fixture
def other(db_url, store) -> Iterator[Store]:
    with Store.open(db_url) as s:
        yield s


def test_a_live_lease_is_refused_to_another_holder_naming_who_holds_it(store, other) -> None:
    store.take_lease(NAME, "a:1:x", TTL, now=100.0)
    with pytest.raises(LeaseHeld) as err:
        other.take_lease(NAME, "b:2:y", TTL, now=110.0)
    assert (err.value.holder, err.value.expires_at) == ("a:1:x", 115.0)
    assert err.value.code == "lease_held"


def test_an_expired_lease_is_taken_over_and_its_old_holder_cannot_renew(store, other) -> None:
    store.take_lease(NAME, "a:1:x", TTL, now=100.0)
    taken = other.take_lease(NAME, "b:2:y", TTL, now=115.5)  # expired at 115
    assert (taken.holder, taken.acquired_at, taken.expires_at) == ("b:2:y", 115.5, 130.5)
    assert store.renew_lease(NAME, "a:1:x", TTL, now=116.0) is None
    assert not store.release_lease(NAME, "a:1:x")  # nor release what is not its own
    assert other.get_lease(NAME).holder == "b:2:y"


@pytest.mark.parametrize("now, renewed", [
    pytest.param(110.0, 125.0, id="while-live"),
    pytest.param(200.0, 215.0, id="expired-but-not-taken"),  # nobody acted meanwhile
])
def test_the_holder_renews_its_lease(store, now, renewed) -> None:
    first = store.take_lease(NAME, "a:1:x", TTL, now=100.0)
    lease = store.renew_lease(NAME, "a:1:x", TTL, now=now)
    assert lease is not None and (lease.expires_at, lease.acquired_at) == (renewed, first.acquired_at)


def test_released_lease_is_free_at_once(store, other) -> None:
    store.take_lease(NAME, "a:1:x", TTL, now=100.0)
    assert store.release_lease(NAME, "a:1:x")
    assert other.take_lease(NAME, "b:2:y", TTL, now=101.0).holder == "b:2:y"


def test_a_holder_the_caller_may_replace_is_replaced_while_live(store, other) -> None:
    store.take_lease(NAME, "host/site:1:x", TTL, now=100.0)
    taken = other.take_lease(NAME, "host/site:2:y", TTL, now=101.0,
                             may_replace=lambda h: h.startswith("host/site:"))
    assert taken.holder == "host/site:2:y"


@pytest.mark.parametrize("holder, ttl, field", [
    pytest.param("", TTL, "lease.holder", id="empty-holder"),
    pytest.param("h" * 256, TTL, "lease.holder", id="long-holder"),
    pytest.param("a:1:x", 0.0, "lease.ttl_s", id="zero-ttl"),
])
def test_bad_lease_arguments_name_the_field(store, holder, ttl, field) -> None:
    with pytest.raises(InvalidSpec) as err:
        store.take_lease(NAME, holder, ttl, now=100.0)
    assert err.value.field == field


def test_a_holder_frozen_inside_a_transaction_keeps_nothing_from_the_next_on_postgresql(
        empty_postgres) -> None:
    """A process frozen (or cut off) in the middle of a renewal holds the lease's row lock:
    the server ends its session (``idle_in_transaction_session_timeout``), so that the next
    holder takes the expired lease instead of waiting for it for ever."""
    with Store.open(empty_postgres) as store, Store.open(empty_postgres) as other:
        store.take_lease(NAME, "a:1:x", TTL, now=100.0)
        frozen = make_engine(empty_postgres)  # the frozen holder's session, as rota makes it
        conn = frozen.connect()
        try:
            conn.begin()
            conn.execute(update(leases).where(leases.c.name == NAME).values(expires_at=116.0))
            taken: list[str] = []
            taker = threading.Thread(target=lambda: taken.append(
                other.take_lease(NAME, "b:2:y", TTL, now=120.0).holder), daemon=True)
            taker.start()
            taker.join(120)  # without the server's limit it would wait as long as the freeze
            assert taken == ["b:2:y"]
        finally:
            try:
                conn.close()
            except Exception:  # the server ended that session
                pass
            frozen.dispose()
