"""Operators take access away: a disabled user's tokens, every token of a user revoked at once,
and a user removed from a project stop working with the next request; the removed user's
pending jobs there are cancelled or kept, as the operator said."""

from __future__ import annotations

from apikit import job_file


def test_a_disabled_user_is_refused_at_once_and_enabled_again(api):
    alice, root = api.auth["alice"], api.auth["root"]
    assert api.client.get("/v1/whoami", headers=alice).status_code == 200  # cached now
    assert api.client.post("/v1/users/alice/disable", headers=root).status_code == 200
    refused = api.client.get("/v1/whoami", headers=alice)
    assert refused.status_code == 401 and "unknown or revoked" in refused.text
    assert api.client.post("/v1/users/alice/enable", headers=root).status_code == 200
    assert api.client.get("/v1/whoami", headers=alice).status_code == 200


def test_every_token_of_a_user_is_revoked_at_once(api):
    root = api.auth["root"]
    second = api.client.post("/v1/tokens", headers=root,
                             json={"name": "laptop", "user": "alice"}).json()["token"]
    tokens = [api.auth["alice"], {"Authorization": f"Bearer {second}"}]
    assert all(api.client.get("/v1/whoami", headers=t).status_code == 200 for t in tokens)
    revoked = api.client.delete("/v1/users/alice/tokens", headers=root)
    assert revoked.status_code == 200 and revoked.json()["revoked"] == 2
    assert [api.client.get("/v1/whoami", headers=t).status_code for t in tokens] == [401, 401]
    assert api.client.get("/v1/whoami", headers=api.auth["bob"]).status_code == 200


def test_a_removed_user_loses_the_project_and_the_operator_chooses_for_its_jobs(api):
    root, alice = api.auth["root"], api.auth["alice"]
    kept = api.post_job(job_file()).json()["id"]
    assert api.client.post("/v1/users/alice/projects", headers=root,
                           json={"project": "q"}).status_code == 201
    cancelled = api.post_job(job_file(project="q")).json()["id"]
    missing = api.client.delete("/v1/users/alice/projects/p", headers=root)
    assert missing.status_code == 422 and "jobs" in missing.text  # the operator must choose
    keep = api.client.delete("/v1/users/alice/projects/p?jobs=keep", headers=root)
    assert keep.status_code == 200 and keep.json()["pending_jobs"] == [kept]
    assert api.store.get_job(kept).state.value == "pending"
    assert api.client.get(f"/v1/jobs/{kept}", headers=alice).status_code == 404
    drop = api.client.delete("/v1/users/alice/projects/q?jobs=cancel", headers=root)
    assert drop.status_code == 200 and drop.json()["pending_jobs"] == [cancelled]
    assert api.store.get_job(cancelled).state.value == "cancelled"
    assert api.client.get("/v1/whoami", headers=alice).json()["projects"] == []
    again = api.client.delete("/v1/users/alice/projects/q?jobs=keep", headers=root)
    assert again.status_code == 404


def test_members_may_not_take_access_away(api):
    alice = api.auth["alice"]
    for method, path in (("POST", "/v1/users/bob/disable"), ("DELETE", "/v1/users/bob/tokens"),
                         ("DELETE", "/v1/users/bob/projects/q?jobs=keep")):
        assert api.client.request(method, path, headers=alice).status_code == 403
    assert api.client.get("/v1/whoami", headers=api.auth["bob"]).status_code == 200
