"""Operators onboard people over the API: users, their projects, and then their tokens.

A member may do none of it (403); a duplicate is a 409 and an unknown project a 404, each
naming what is wrong; nothing half-made is left behind.
"""

from __future__ import annotations


def test_an_operator_adds_a_user_who_then_sees_only_their_project(api):
    root = api.auth["root"]
    made = api.client.post("/v1/users", headers=root, json={"name": "carol", "projects": ["q"]})
    assert made.status_code == 201 and made.json() == {"name": "carol", "projects": ["q"]}
    token = api.client.post("/v1/tokens", headers=root,
                            json={"name": "laptop", "user": "carol"}).json()["token"]
    carol = {"Authorization": f"Bearer {token}"}
    assert api.client.get("/v1/whoami", headers=carol).json()["projects"] == ["q"]
    assert api.client.post("/v1/users/carol/projects", headers=root,
                           json={"project": "p"}).status_code == 201
    assert sorted(api.client.get("/v1/whoami", headers=carol).json()["projects"]) == ["p", "q"]
    assert "carol" in api.client.get("/v1/users", headers=root).json()


def test_members_may_not_manage_users(api):
    alice = api.auth["alice"]
    assert api.client.post("/v1/users", headers=alice, json={"name": "eve"}).status_code == 403
    assert api.client.get("/v1/users", headers=alice).status_code == 403
    assert api.client.post("/v1/users/alice/projects", headers=alice,
                           json={"project": "q"}).status_code == 403
    assert "eve" not in api.store.list_users()


def test_duplicates_and_unknown_projects_are_refused_whole(api):
    root = api.auth["root"]
    dup = api.client.post("/v1/users", headers=root, json={"name": "alice"})
    assert dup.status_code == 409 and dup.json()["error"]["code"] == "already_exists"
    unknown = api.client.post("/v1/users", headers=root,
                              json={"name": "dave", "projects": ["nope"]})
    assert unknown.status_code == 404 and "nope" in unknown.json()["error"]["message"]
    assert "dave" not in api.store.list_users()  # one transaction: no user without its projects
    bad = api.client.post("/v1/users", headers=root, json={"name": "x", "colour": "red"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "colour"
