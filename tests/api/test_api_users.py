"""Operators onboard people over the API: users, their projects, and then their tokens.

A member may do none of it (403); a duplicate is a 409 and an unknown project a 404, each
naming what is wrong; nothing half-made is left behind.
"""

from __future__ import annotations


def test_an_operator_adds_a_user_who_then_sees_only_their_project(api):
    root = api.auth["root"]
    made = api.client.post("/v1/users", headers=root, json={"name": "carol", "projects": ["q"]})
    assert made.status_code == 201
    assert made.json() == {"name": "carol", "projects": ["q"], "unix_user": "carol",
                           "unix_user_exists": None}  # jobs do not run as OS accounts here
    token = api.client.post("/v1/tokens", headers=root,
                            json={"name": "laptop", "user": "carol"}).json()["token"]
    carol = {"Authorization": f"Bearer {token}"}
    assert api.client.get("/v1/whoami", headers=carol).json()["projects"] == ["q"]
    assert api.client.post("/v1/users/carol/projects", headers=root,
                           json={"project": "p"}).status_code == 201
    assert sorted(api.client.get("/v1/whoami", headers=carol).json()["projects"]) == ["p", "q"]
    assert {"name": "carol", "unix_user": "carol", "projects": ["p", "q"]} in \
        api.client.get("/v1/users", headers=root).json()


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


def test_an_operator_chooses_the_os_account_a_users_jobs_run_as(api):
    root = api.auth["root"]
    made = api.client.post("/v1/users", headers=root,
                           json={"name": "dave", "unix_user": "dwilson", "projects": ["p"]})
    assert made.status_code == 201 and made.json()["unix_user"] == "dwilson"
    assert api.store.unix_users()["dave"] == "dwilson"
    moved = api.client.patch("/v1/users/dave", headers=root, json={"unix_user": "dave2"})
    assert moved.status_code == 200 and api.store.unix_users()["dave"] == "dave2"
    reset = api.client.patch("/v1/users/dave", headers=root, json={"unix_user": None})
    assert reset.json() == {"name": "dave", "unix_user": "dave", "unix_user_exists": None}
    assert api.client.patch("/v1/users/dave", headers=api.auth["alice"],
                            json={"unix_user": "root"}).status_code == 403


def test_an_os_account_name_is_checked(api):
    root = api.auth["root"]
    for bad in ("-rf", "a b", "x" * 33, "../etc", ""):
        answer = api.client.post("/v1/users", headers=root, json={"name": "eve", "unix_user": bad})
        assert answer.status_code == 422, bad
        assert answer.json()["error"]["field"] == "unix_user"
    assert "eve" not in api.store.list_users()
    missing = api.client.patch("/v1/users/nobody-here", headers=root, json={"unix_user": "x"})
    assert missing.status_code == 404


def _system_account() -> str:
    """An account of this machine with a uid from 1 to 999 (a service's), by its name."""
    import pwd
    found = sorted((e.pw_uid, e.pw_name) for e in pwd.getpwall() if 0 < e.pw_uid < 1000)
    assert found, "this machine has no system account to map to"
    return found[0][1]


def test_a_member_mapped_to_root_or_a_system_account_is_refused(api):
    root = api.auth["root"]
    service = _system_account()
    for body in ({"name": "eve", "unix_user": "root"}, {"name": "eve", "unix_user": service},
                 {"name": service}):  # without unix_user: the account named like the user
        answer = api.client.post("/v1/users", headers=root, json=body)
        print(f"{body}: {answer.status_code} {answer.text}")
        assert answer.status_code == 422, body
        error = answer.json()["error"]
        assert error["field"] == "unix_user" and "--allow-system-account" in error["message"]
    assert "eve" not in api.store.list_users() and service not in api.store.list_users()
    made = api.client.post("/v1/users", headers=root, json={"name": "eve", "unix_user": "nobody"})
    assert made.status_code == 201  # nobody's uid is 65534: not a system account by uid
    moved = api.client.patch("/v1/users/eve", headers=root, json={"unix_user": "root"})
    assert moved.status_code == 422 and moved.json()["error"]["field"] == "unix_user"
    assert "maps to OS user root, the superuser" in moved.json()["error"]["message"]
    assert api.store.unix_users()["eve"] == "nobody"


def test_an_operator_may_map_a_system_account_when_saying_so(api):
    root = api.auth["root"]
    made = api.client.post("/v1/users", headers=root, json={
        "name": "svc", "unix_user": _system_account(), "allow_system_account": True})
    assert made.status_code == 201, made.text
    moved = api.client.patch("/v1/users/svc", headers=root,
                             json={"unix_user": "root", "allow_system_account": True})
    assert moved.status_code == 200 and api.store.unix_users()["svc"] == "root"


def test_where_jobs_run_as_os_accounts_the_answer_says_whether_the_account_exists(tmp_path):
    """With a backend that runs commands as their owners' accounts (``workdir_refusal`` given),
    adding or mapping a user says whether its account exists on this machine, so that
    ``rota user add`` can warn that the user's jobs would wait."""
    from fastapi.testclient import TestClient

    from rota.api import create_app
    from rota.store import Store
    from apikit import seed_tenants
    store = Store.open(tmp_path / "db")
    try:
        root = {"Authorization": f"Bearer {seed_tenants(store)['root']}"}
        app = create_app(store, data_dir=tmp_path / "data", workdir_refusal=lambda u, w: None)
        client = TestClient(app)
        made = client.post("/v1/users", headers=root,
                           json={"name": "nosuchaccount-rota", "projects": ["q"]}).json()
        assert made["unix_user_exists"] is False
        mapped = client.patch("/v1/users/nosuchaccount-rota", headers=root,
                              json={"unix_user": "root", "allow_system_account": True}).json()
        assert (mapped["unix_user"], mapped["unix_user_exists"]) == ("root", True)
    finally:
        store.close()
