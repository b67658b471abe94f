"""Authentication is cached for a short TTL, and never outlives a change made through the
same store: a revoked token, a removed membership or a new one take effect on the next call.
A change made through another store (another process) is seen once the TTL has passed."""

from __future__ import annotations

import time

import pytest

from rota.store import Store, Unauthenticated
from rota.store.authcache import AuthCache
from rota.store.tokens import Principal, Role
from storekit import seed


class Ticks:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def principal(user: str = "alice") -> Principal:
    return Principal(user, Role.MEMBER, frozenset({"p"}), "cli")


def test_a_cached_principal_is_served_until_its_ttl_then_loaded_again():
    ticks, loads = Ticks(), []
    cache = AuthCache(ttl_s=5.0, monotonic=ticks)

    def load() -> Principal:
        loads.append(1)
        return principal()

    assert cache.peek("rota_x") is None
    assert cache.get("rota_x", load) == principal() and len(loads) == 1
    ticks.t = 4.9
    assert cache.get("rota_x", load) == cache.peek("rota_x") == principal() and len(loads) == 1
    ticks.t = 5.0  # expired: 0 + 5 is not after 5
    assert cache.peek("rota_x") is None
    cache.get("rota_x", load)
    assert len(loads) == 2


@pytest.mark.parametrize("case", ["failure", "invalidated while loading", "ttl 0"])
def test_what_is_not_cached(case):
    cache = AuthCache(ttl_s=0.0 if case == "ttl 0" else 5.0, monotonic=Ticks())

    def load() -> Principal:
        if case == "failure":
            raise Unauthenticated("unknown or revoked token")
        if case == "invalidated while loading":
            cache.invalidate()  # a revoke committed while this load was reading
        return principal()

    try:
        cache.get("rota_x", load)
    except Unauthenticated:
        pass
    assert cache.peek("rota_x") is None


def test_the_cache_starts_afresh_when_full():
    cache = AuthCache(ttl_s=5.0, max_entries=2, monotonic=Ticks())
    for n in range(3):
        cache.get(f"rota_{n}", lambda n=n: principal(f"u{n}"))
    assert [cache.peek(f"rota_{n}") is not None for n in range(3)] == [False, False, True]


def test_revoking_through_the_store_refuses_the_token_at_once(store):
    seed(store)
    token = store.issue_token("alice", "cli").token
    assert store.authenticate(token).user == "alice"
    assert store.cached_principal(token) is not None
    store.revoke_token("alice", "cli")
    assert store.cached_principal(token) is None
    with pytest.raises(Unauthenticated):
        store.authenticate(token)


def test_membership_changes_through_the_store_apply_at_once(store):
    seed(store)
    token = store.issue_token("alice", "cli").token
    assert store.authenticate(token).projects == {"p"}
    store.add_member("alice", "q")
    assert store.authenticate(token).projects == {"p", "q"}
    store.remove_member("alice", "p")
    assert store.authenticate(token).projects == {"q"}


def test_a_revocation_by_another_store_is_seen_after_the_ttl(db_url, clock):
    api = seed(Store.open(db_url, clock=clock, auth_ttl_s=0.2))
    other = Store.open(db_url, clock=clock)
    try:
        token = api.issue_token("alice", "cli").token
        assert api.authenticate(token).user == "alice"
        other.revoke_token("alice", "cli")
        time.sleep(0.3)
        with pytest.raises(Unauthenticated):
            api.authenticate(token)
    finally:
        other.close()
        api.close()
