"""API tokens: the plaintext is returned once and never stored; only its SHA-256 is; a wrong,
malformed or revoked token authenticates nobody."""

from __future__ import annotations

import hashlib

import pytest
from sqlalchemy import create_engine, text

from rota.core import InvalidSpec
from rota.store import AlreadyExists, NotFound, Role, Unauthenticated
from storekit import seed


def test_the_plaintext_is_returned_once_and_only_its_hash_is_stored(store, db_url):
    seed(store)
    issued = store.issue_token("alice", "laptop")
    assert issued.token.startswith("rota_") and len(issued.token) == len("rota_") + 43
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = [tuple(map(str, r)) for r in conn.execute(text("SELECT * FROM api_tokens"))]
    finally:
        engine.dispose()
    [row] = rows
    assert not any(issued.token in value for value in row)
    assert hashlib.sha256(issued.token.encode()).hexdigest() in row
    assert issued.info.display == issued.token[:11] and issued.info.display in row
    assert store.list_tokens("alice") == [issued.info]


def test_a_token_authenticates_its_user_with_role_and_projects(store):
    seed(store, members={"alice": ["p", "q"], "root": []})
    member = store.issue_token("alice", "cli")
    operator = store.issue_token("root", "admin", role="operator")
    alice = store.authenticate(member.token)
    assert (alice.user, alice.role, alice.projects, alice.token) == (
        "alice", Role.MEMBER, frozenset({"p", "q"}), "cli")
    assert alice.may_see("p") and not alice.may_see("other")
    root = store.authenticate(operator.token)
    assert root.operator and root.may_see("anything")


def test_membership_changes_apply_to_existing_tokens(store):
    seed(store)
    issued = store.issue_token("alice", "cli")
    store.add_member("alice", "q")
    assert store.authenticate(issued.token).projects == {"p", "q"}
    store.remove_member("alice", "p")
    assert store.authenticate(issued.token).projects == {"q"}


def test_wrong_malformed_and_revoked_tokens_are_refused(store):
    seed(store)
    issued = store.issue_token("alice", "cli")
    wrong = issued.token[:-1] + ("A" if issued.token[-1] != "A" else "B")
    for token in (wrong, "rota_", "", None, 42, issued.token.removeprefix("rota_"),
                  issued.token + " "):
        with pytest.raises(Unauthenticated):
            store.authenticate(token)
    store.revoke_token("alice", "cli")
    with pytest.raises(Unauthenticated):
        store.authenticate(issued.token)
    with pytest.raises(NotFound):
        store.revoke_token("alice", "cli")  # already revoked


def test_bad_token_requests_name_the_field(store):
    seed(store)
    with pytest.raises(InvalidSpec) as err:
        store.issue_token("alice", "cli", role="admin")
    assert err.value.field == "role"
    with pytest.raises(InvalidSpec) as err:
        store.issue_token("alice", "two words")
    assert err.value.field == "name"
    with pytest.raises(NotFound):
        store.issue_token("nobody", "cli")
    store.issue_token("alice", "cli")
    with pytest.raises(AlreadyExists):
        store.issue_token("alice", "cli")


def test_job_tokens_issued_together_replace_a_left_over_one_and_nothing_else(store):
    from storekit import submission
    seed(store)
    first, second = store.submit(submission(1)), store.submit(submission(1))
    left_over = store.issue_job_tokens([(first, 0)])[first]  # a launch that never started
    with pytest.raises(InvalidSpec, match="job's own token"):
        store.issue_token("alice", f"job-{second}-0")  # such names are the control plane's
    mine = store.issue_token("alice", "laptop")
    tokens = store.issue_job_tokens([(first, 0), (second, 0)])
    assert set(tokens) == {first, second} and tokens[first] != left_over
    with pytest.raises(Unauthenticated):
        store.authenticate(left_over)
    for job_id, token in tokens.items():
        who = store.authenticate(token)
        assert (who.role, who.job, who.attempt, who.user) == (Role.JOB, job_id, 0, "alice")
    assert store.authenticate(mine.token).role is Role.MEMBER
    with pytest.raises(NotFound):
        store.issue_job_tokens([(first, 1), ("999", 0)])
    assert store.authenticate(tokens[first]).job == first  # nothing of the refused call stayed
