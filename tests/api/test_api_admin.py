"""Operators over the API: queues bound to projects, deleting queues and projects, draining
nodes. Members get 403 ``forbidden`` for every change."""

from __future__ import annotations

import pytest

from apikit import job_file
from rota.core import JobState
from rota.scheduler import build_policy, run_cycle


def bind(api, projects):
    queue = {"name": "q"} if projects is None else {"name": "q", "projects": projects}
    return api.client.put("/v1/queues", headers=api.auth["root"], json={"queues": [queue]})


def error(reply, status):
    assert reply.status_code == status, reply.text
    return reply.json()["error"]


def start(api, job_id: str) -> None:
    """Bind pending jobs in one cycle and report ``job_id`` running."""
    api.store.apply(run_cycle(api.store.snapshot(100.0), build_policy("default"), 100.0), 100.0)
    api.store.transition(job_id, JobState.RUNNING)


def test_a_bound_queue_refuses_other_projects_and_says_who_may_use_it(api):
    assert bind(api, ["p"]).status_code == 200
    listed = api.client.get("/v1/queues", headers=api.auth["bob"]).json()
    assert [(q["name"], q["projects"]) for q in listed] == [("q", ["p"])]
    assert api.post_job(job_file(), user="alice").status_code == 201
    refused = error(api.post_job(job_file(project="q"), user="bob"), 422)
    assert (refused["code"], refused["field"]) == ("queue_not_allowed", "queue")
    assert "only project p may use it" in refused["message"]
    assert bind(api, None).status_code == 200  # open again
    assert api.client.get("/v1/queues", headers=api.auth["bob"]).json()[0]["projects"] is None
    assert api.post_job(job_file(project="q"), user="bob").status_code == 201


def test_an_unknown_project_in_a_binding_names_its_entry(api):
    reply = api.client.put("/v1/queues", headers=api.auth["root"], json={"queues": [
        {"name": "a"}, {"name": "b", "projects": ["p", "nope"]}]})
    assert error(reply, 422)["field"] == "queues[1].projects[1]"
    assert {q.name for q in api.store.list_queues()} == {"q"}


def test_show_says_when_the_queue_no_longer_admits_the_jobs_project(api):
    job = api.post_job(job_file(), user="alice").json()["id"]
    show = lambda: api.client.get(f"/v1/jobs/{job}", headers=api.auth["alice"]).json()
    assert show()["queue_admits_project"] is True
    bind(api, ["q"])
    assert show()["queue_admits_project"] is False and show()["state"] == "pending"
    api.client.post(f"/v1/jobs/{job}/cancel", headers=api.auth["alice"])
    assert api.client.delete("/v1/queues/q", headers=api.auth["root"]).status_code == 200
    assert show()["queue_admits_project"] is None and show()["state"] == "cancelled"
    listed = api.client.get("/v1/jobs", headers=api.auth["alice"]).json()["items"]
    assert [j["queue"] for j in listed] == ["q"]


@pytest.mark.parametrize("path, code", [
    ("/v1/queues/q", "queue_in_use"), ("/v1/projects/p", "project_in_use")])
def test_a_queue_or_project_holding_live_jobs_is_not_deleted(api, path, code):
    running = api.post_job(job_file(), user="alice").json()["id"]
    start(api, running)
    api.post_job(job_file(), user="alice")
    assert error(api.client.delete(path, headers=api.auth["alice"]), 403)["code"] == "forbidden"
    refused = error(api.client.delete(path, headers=api.auth["root"]), 409)
    assert refused["code"] == code
    assert "2 jobs (1 pending, 1 running)" in refused["message"]
    assert "cancel them" in refused["message"]


def test_deleting_projects_and_queues(api):
    root = api.auth["root"]
    assert error(api.client.delete("/v1/queues/nope", headers=root), 404)["code"] == "not_found"
    assert error(api.client.delete("/v1/projects/nope", headers=root), 404)["code"] == "not_found"
    bind(api, ["p", "q"])
    done = api.client.delete("/v1/projects/q", headers=root)  # bob's project, no jobs
    assert done.json() == {"name": "q", "deleted": True, "unbound": ["q"]}
    assert api.client.get("/v1/queues", headers=root).json()[0]["projects"] == ["p"]
    job = api.post_job(job_file(), user="alice").json()["id"]
    api.client.post(f"/v1/jobs/{job}/cancel", headers=api.auth["alice"])
    kept = error(api.client.delete("/v1/projects/p", headers=root), 409)
    assert kept["code"] == "project_has_jobs" and "1 finished job whose" in kept["message"]
    assert api.client.delete("/v1/queues/q", headers=root).json() == {"name": "q",
                                                                      "deleted": True}
    assert api.client.get("/v1/queues", headers=root).json() == []
    assert api.client.get(f"/v1/jobs/{job}", headers=api.auth["alice"]).status_code == 200


def test_drain_shows_draining_then_drained_and_uncordon_clears_it(api):
    root = api.auth["root"]
    job = api.post_job(job_file(), user="alice").json()["id"]
    start(api, job)
    assert error(api.client.post("/v1/nodes/n1/drain", headers=api.auth["alice"]), 403)[
        "code"] == "forbidden"
    done = api.client.post("/v1/nodes/n1/drain", headers=root, json={"reason": "bad fan"})
    assert done.json()["drain"] is True and done.json()["evicted"] == []
    node = lambda: api.client.get("/v1/nodes", headers=api.auth["bob"]).json()[0]
    assert (node()["state"], node()["reason"], node()["schedulable"]) == (
        "draining", "bad fan", False)
    assert not api.store.snapshot(100.0).nodes[0].schedulable
    api.store.transition(job, JobState.SUCCEEDED, exit_code=0)
    assert node()["state"] == "drained"
    assert api.wakes, "the control loop is woken"
    assert error(api.client.post("/v1/nodes/n1/uncordon", headers=root,
                                 json={"reason": "x"}), 422)["field"] == "reason"
    assert api.client.post("/v1/nodes/n1/uncordon", headers=root).status_code == 200
    assert (node()["state"], node()["reason"], node()["drain"]) == ("ok", "", False)
    api.client.post("/v1/nodes/n1/cordon", headers=root, json={"reason": "tests"})
    assert (node()["state"], node()["reason"]) == ("cordoned", "tests")
    assert api.client.post("/v1/nodes/n1/resume", headers=root).json()["schedulable"] is True


def test_drain_with_evict_asks_running_jobs_to_leave(api):
    root = api.auth["root"]
    job = api.post_job(job_file(), user="alice").json()["id"]
    start(api, job)
    refused = api.client.post("/v1/nodes/n1/cordon", headers=root, json={"evict": True})
    assert error(refused, 422)["field"] == "evict"
    done = api.client.post("/v1/nodes/n1/drain", headers=root, json={"evict": True})
    assert done.json()["evicted"] == [job]
    shown = api.client.get(f"/v1/jobs/{job}", headers=api.auth["alice"]).json()
    assert shown["state"] == "preempting" and "node n1 is drained" in shown["reason"]


def test_a_queues_slurm_section_is_shown_and_decides_what_its_jobs_may_choose(api):
    slurm = {"partition": "gpu", "qos": "normal", "allow": {"qos": ["long"]}}
    reply = api.client.put("/v1/queues", headers=api.auth["root"],
                           json={"queues": [{"name": "q", "slurm": slurm}]})
    assert reply.status_code == 200, reply.text
    [listed] = api.client.get("/v1/queues", headers=api.auth["alice"]).json()
    assert listed["slurm"] == {"partition": "gpu", "qos": "normal",
                               "allow": {"partition": [], "qos": ["long"], "reservation": [],
                                         "constraint": False}}
    refused = error(api.post_job(job_file(slurm={"qos": "high"}), user="alice"), 422)
    assert refused["field"] == "slurm.qos"
    assert "queue q lets its jobs choose only normal, long" in refused["message"]
    accepted = api.post_job(job_file(slurm={"qos": "long"}), user="alice")
    assert accepted.status_code == 201, accepted.text
    stored = api.store.get_job(str(accepted.json()["id"]))
    assert stored.run["slurm"] == {"partition": "gpu", "qos": "long"}


def test_every_token_reads_the_control_planes_role_and_no_request_without_one(api):
    # an API composed with its own loop and no lease (rota up gives the lease's: a leader's,
    # or a standby's naming the leader, tests/slurm/test_slurm_standby.py)
    reply = api.client.get("/v1/control-plane", headers=api.auth["alice"])
    assert reply.status_code == 200
    assert reply.json() == {"role": "leader", "holder": None, "leader": None,
                            "lease_left_s": None, "leading_since": None}
    assert error(api.client.get("/v1/control-plane"), 401)["code"]
