"""The API answers from a cache of authenticated tokens, without letting it outlive a change:
a token revoked over the API is refused by the next request, and a submit checks membership in
its own transaction, so a principal cached before another process removed the membership
cannot submit to that project."""

from __future__ import annotations

from apikit import job_file
from rota.store import Store


def test_a_token_revoked_over_the_api_is_refused_by_the_next_request(api):
    issued = api.client.post("/v1/tokens", headers=api.auth["alice"], json={"name": "laptop"})
    laptop = {"Authorization": f"Bearer {issued.json()['token']}"}
    assert api.client.get("/v1/whoami", headers=laptop).status_code == 200  # now cached
    assert api.client.delete("/v1/tokens/laptop", headers=api.auth["alice"]).status_code == 200
    for method, path in (("GET", "/v1/whoami"), ("POST", "/v1/jobs")):
        reply = api.client.request(method, path, headers=laptop, json=job_file())
        assert reply.status_code == 401, (path, reply.text)
        assert reply.json()["error"]["code"] == "unauthenticated"


def test_a_submit_rechecks_membership_inside_its_transaction(api):
    assert api.post_job(job_file()).status_code == 201  # alice's principal is now cached
    other = Store.open(api.store.url)  # another process: the API's cache is not told
    try:
        other.remove_member("alice", "p")
    finally:
        other.close()
    reply = api.post_job(job_file())
    assert reply.status_code == 422, reply.text
    error = reply.json()["error"]
    assert error["field"] == "project" and "not a member" in error["message"]
    assert len(api.store.list_jobs().items) == 1


def test_an_operator_submits_to_any_project(api):
    reply = api.post_job(job_file(project="q"), user="root")
    assert reply.status_code == 201, reply.text
    assert reply.json()["project"] == "q" and reply.json()["user"] == "root"
