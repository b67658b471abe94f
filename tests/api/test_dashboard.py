"""The web dashboard over HTTP (``rota.api.dashboard``): logging in with a token that opens a
server-side session whose id is kept in an HttpOnly, SameSite=Strict cookie; each page; the same visibility as the API (a member of one
project sees nothing of another project's job on any page: on the GPU grid only the share it
holds); the job page telling a job as ``rota show`` does; everything escaped."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest
from rich.console import Console

from apikit import job_file, seed_tenants
from fastapi.testclient import TestClient
from rota.api import create_app
from rota.store import Store
from rota.backends.base import Handle, ReplicaHandle
from rota.backends.local import Proc
from rota.cli.detail import render_job
from rota.core import DeviceShare, Foreign, JobState, jobwords
from rota.scheduler import build_policy, run_cycle
from rota.store import schema
from sqlalchemy import update


def cycle(api, now: float = 100.0) -> None:
    api.store.apply(run_cycle(api.store.snapshot(now), build_policy("default"), now), now)


def token(api, user: str) -> str:
    return api.auth[user]["Authorization"].split()[1]


def login(api, user: str):
    reply = api.client.post("/ui/login", data={"token": token(api, user), "next": "/ui/"},
                            follow_redirects=False)
    assert reply.status_code == 303, reply.text
    return reply


def page(api, path: str, status: int = 200) -> str:
    reply = api.client.get(path, follow_redirects=False)
    assert reply.status_code == status, (path, reply.status_code, reply.text[-500:])
    assert reply.headers["content-type"].startswith("text/html")
    return reply.text


@pytest.fixture
def cluster(api):
    """alice (project p) runs half a GPU; bob, also in project skunkworks, runs a whole GPU
    there; alice has a job that waits for two GPUs, and work outside rota holds the rest."""
    api.store.create_project("skunkworks")
    api.store.add_member("bob", "skunkworks")
    mine = api.post_job(job_file(name="train-a", resources={"gpu": 0.5, "gpu_memory": "20Gi"}))
    theirs = api.post_job(job_file(name="secret-b", project="skunkworks",
                                   resources={"gpu": 1}), user="bob")
    assert mine.status_code == theirs.status_code == 201, (mine.text, theirs.text)
    cycle(api)
    waiting = api.post_job(job_file(name="big-a", resources={"gpu": 2}))
    cycle(api)
    (n1, _, _), = api.store.list_nodes()
    api.store.upsert_nodes([replace(n1, foreign=(Foreign(0, 0, (DeviceShare(0, 250, 1024),),
                                                          "slurm job 7 (omar)"),))], "local")
    api.store.add_usage("skunkworks", 7200.0, 100.0)
    api.store.add_usage("p", 3600.0, 100.0)
    return {"mine": mine.json()["id"], "theirs": theirs.json()["id"],
            "waiting": waiting.json()["id"]}


def test_the_root_and_every_page_lead_to_the_login_form_without_a_token(api):
    assert api.client.get("/", follow_redirects=False).headers["location"] == "/ui/"
    for path in ("/ui/", "/ui/queues", "/ui/jobs?state=all", "/ui/jobs/1", "/ui/usage"):
        reply = api.client.get(path, follow_redirects=False)
        assert reply.status_code == 303
        assert reply.headers["location"].startswith("/ui/login?next=")
    form = page(api, "/ui/login")
    assert 'method="post"' in form and 'type="password"' in form


def test_login_keeps_a_session_id_in_an_httponly_strict_cookie_and_logout_closes_it(api):
    reply = login(api, "alice")
    assert reply.headers["location"] == "/ui/"
    assert token(api, "alice") not in reply.headers["location"]
    cookie = reply.headers["set-cookie"]
    assert cookie.startswith("rota_session=") and token(api, "alice") not in cookie
    assert "HttpOnly" in cookie and "samesite=strict" in cookie.lower() and "Path=/ui" in cookie
    sid = api.client.cookies["rota_session"]
    assert "alice (member; p)" in page(api, "/ui/")
    out = api.client.post("/ui/logout", follow_redirects=False)
    assert out.status_code == 303 and 'rota_session=""' in out.headers["set-cookie"]
    api.client.cookies.clear()
    assert api.client.get("/ui/", follow_redirects=False).status_code == 303
    # the old cookie value, kept by whoever copied it, opens nothing after the logout
    api.client.cookies.set("rota_session", sid, path="/ui")
    assert api.client.get("/ui/", follow_redirects=False).status_code == 303


def test_a_stolen_session_cookie_is_no_api_token(api):
    login(api, "alice")
    sid = api.client.cookies["rota_session"]
    assert sid != token(api, "alice")
    whoami = api.client.get("/v1/whoami", headers={"Authorization": f"Bearer {sid}"})
    assert whoami.status_code == 401


def test_a_session_expires():
    from rota.api.dashboard.session import Sessions
    now = [1000.0]
    sessions = Sessions(ttl_s=60.0, clock=lambda: now[0])
    sid = sessions.open("rota_secret ")
    assert sessions.token(sid) == "rota_secret" and sessions.token("forged") is None
    now[0] += 59.0
    assert sessions.token(sid) == "rota_secret"
    now[0] += 1.0
    assert sessions.token(sid) is None
    other = sessions.open("rota_secret")
    sessions.close(other)
    assert sessions.token(other) is None


def test_over_https_the_cookie_is_sent_only_encrypted(api):
    reply = api.client.post("https://testserver/ui/login", data={"token": token(api, "alice")},
                            follow_redirects=False)
    assert reply.status_code == 303 and "Secure" in reply.headers["set-cookie"]
    assert "Secure" not in login(api, "alice").headers["set-cookie"]


def test_a_bad_token_a_revoked_one_and_a_foreign_form_are_refused(api):
    bad = api.client.post("/ui/login", data={"token": "rota_nope"}, follow_redirects=False)
    assert bad.status_code == 401 and "set-cookie" not in bad.headers
    assert "unknown or revoked" in bad.text
    foreign = api.client.post("/ui/login", data={"token": token(api, "alice")},
                              headers={"Origin": "https://evil.example"},
                              follow_redirects=False)
    assert foreign.status_code == 403 and "set-cookie" not in foreign.headers
    ours = api.client.post("/ui/login", data={"token": token(api, "alice")},
                           headers={"Origin": "http://testserver"}, follow_redirects=False)
    assert ours.status_code == 303 and "set-cookie" in ours.headers
    login(api, "alice")
    api.store.revoke_token("alice", "t")
    gone = api.client.get("/ui/jobs", follow_redirects=False)
    assert gone.status_code == 303 and 'rota_session=""' in gone.headers["set-cookie"]


def test_login_goes_back_only_to_a_dashboard_page(api):
    for target, where in (("/ui/jobs?state=all", "/ui/jobs?state=all"),
                          ("https://evil.example/", "/ui/"), ("//evil.example/ui/", "/ui/")):
        reply = api.client.post("/ui/login", data={"token": token(api, "root"), "next": target},
                                follow_redirects=False)
        assert reply.headers["location"] == where


def test_the_operator_sees_every_job_on_the_gpu_grid_and_who_holds_the_rest(api, cluster):
    login(api, "root")
    text = page(api, "/ui/")
    assert "n1" in text and "H100" in text
    for job, name in ((cluster["mine"], "train-a"), (cluster["theirs"], "secret-b")):
        assert f'<a href="/ui/jobs/{job}">job {job} {name}' in text
    assert "(p): 0.5 GPU, 20 GiB" in text and "(skunkworks): 1 GPU" in text
    assert "slurm job 7 (omar): 0.25 GPU" in text
    assert "another project" not in text
    # CPU and memory allocated of the node's, as rota nodes: the two jobs that hold GPUs, of
    # a job's default 1 CPU and 1 GiB each (the waiting one holds nothing)
    alloc = re.search(r'id="alloc-n1">([^<·]*)', text).group(1).split()
    assert " ".join(alloc) == "2 of 64 CPUs, 2 GiB of 512 GiB allocated", alloc


def test_a_member_sees_another_projects_gpu_only_as_a_share_on_every_page(api, cluster):
    login(api, "alice")
    theirs = cluster["theirs"]
    grid = page(api, "/ui/")
    assert f'<a href="/ui/jobs/{cluster["mine"]}">job {cluster["mine"]} train-a' in grid
    assert "another project: 1 GPU" in grid
    assert "work outside rota: 0.25 GPU" in grid and "omar" not in grid
    jobs = page(api, "/ui/jobs?state=all")
    assert "train-a" in jobs and "big-a" in jobs
    assert page(api, f"/ui/jobs/{theirs}", 404) == page(api, "/ui/jobs/999999", 404).replace(
        "999999", theirs)
    assert "skunkworks" not in page(api, "/ui/jobs?project=skunkworks&state=all")
    pages = [grid, jobs, page(api, "/ui/queues"), page(api, "/ui/usage"),
             page(api, "/ui/jobs?project=skunkworks&state=all"),
             page(api, f"/ui/jobs/{theirs}", 404)]
    for text in pages:
        assert "secret-b" not in text and "skunkworks" not in text
        assert f"/ui/jobs/{theirs}\"" not in text and f"job {theirs} " not in text
    # what the API gives the same token, no more
    listed = api.client.get("/v1/jobs?state=pending,scheduled,running,preempting", headers=api.auth["alice"]).json()
    assert sorted(j["id"] for j in listed["items"]) == sorted(
        re.findall(r'<tr id="job-(\d+)"', page(api, "/ui/jobs")))


def test_the_job_page_tells_a_pending_job_as_rota_show_does(api, cluster):
    login(api, "alice")
    job = cluster["waiting"]
    view = api.client.get(f"/v1/jobs/{job}", headers=api.auth["alice"]).json()
    nodes = api.client.get("/v1/nodes", headers=api.auth["alice"]).json()
    why = jobwords.why_lines(view, nodes)
    assert view["state"] == "pending" and why
    console = Console(width=400, record=True)
    render_job(view, [], console, nodes=nodes)
    shown = console.export_text()
    text = page(api, f"/ui/jobs/{job}")
    for line in why + jobwords.hints(view, nodes):
        assert line in shown and html.escape(line) in text
    assert "Why pending (the latest scheduling cycle)" in text
    assert '<dt>Estimated start</dt><dd id="job-eta">' in text
    assert html.escape(jobwords.request_text(view)) in text


def test_the_job_page_shows_placement_attempts_and_events_of_a_running_job(api, cluster):
    login(api, "alice")
    job = cluster["mine"]
    api.store.transition(job, JobState.RUNNING)
    view = api.client.get(f"/v1/jobs/{job}", headers=api.auth["alice"]).json()
    text = page(api, f"/ui/jobs/{job}")
    assert '<span class="state state-running">running</span>' in text
    assert jobwords.placement(view) in text
    assert "<h2>Attempts</h2>" in text and "<h2>Events</h2>" in text
    assert 'id="auto-refresh"' not in text  # a job's page is never reloaded by itself
    assert 'id="auto-refresh"' in page(api, "/ui/")


def test_jobs_are_filtered_by_state_project_and_queue(api, cluster):
    api.client.put("/v1/queues", headers=api.auth["root"],
                   json={"queues": [{"name": "q"}, {"name": "other"}]})
    login(api, "root")
    ids = lambda path: set(re.findall(r'<tr id="job-(\d+)"', page(api, path)))
    assert ids("/ui/jobs") == set(cluster.values())
    assert ids("/ui/jobs?state=pending") == {cluster["waiting"]}
    assert ids("/ui/jobs?project=skunkworks&state=all") == {cluster["theirs"]}
    assert ids("/ui/jobs?queue=other&state=all") == set()
    bad = page(api, "/ui/jobs?state=bogus", 422)
    assert "state: unknown state &#39;bogus&#39;" in bad
    assert '<option value="skunkworks">' in page(api, "/ui/jobs")


def test_queues_show_quota_bars_with_use_and_borrowing(api):
    reply = api.client.put("/v1/queues", headers=api.auth["root"], json={
        "flavors": {"h100": "H100"},
        "queues": [{"name": "q", "cohort": "lab", "quota": {"h100": {"nominal": {"gpu": 1}}}},
                   {"name": "spare", "cohort": "lab",
                    "quota": {"h100": {"nominal": {"gpu": 1}}}}]})
    assert reply.status_code == 200, reply.text
    for _ in range(2):
        assert api.post_job(job_file(resources={"gpu": 1})).status_code == 201
    cycle(api)
    login(api, "bob")
    text = page(api, "/ui/queues")
    assert 'id="queue-q"' in text and 'id="queue-spare"' in text and "cohort: lab" in text
    # q: 2 GPUs used of its nominal 1, the second borrowed from spare's unused quota
    assert "used 2 GPUs of 1 GPU nominal" in text and "borrowing 1 GPU" in text
    assert "used 0 GPUs of 1 GPU nominal" in text
    assert 'class="seg-borrowed"' in text


def test_usage_is_a_bar_per_visible_project(api, cluster):
    login(api, "root")
    text = page(api, "/ui/usage")
    assert re.search(r'id="usage-skunkworks">\s*<td>skunkworks</td><td class="num">2\.00', text)
    assert re.search(r'id="usage-p">\s*<td>p</td><td class="num">1\.00', text)
    login(api, "alice")
    mine = page(api, "/ui/usage")
    assert 'id="usage-p"' in mine and "skunkworks" not in mine


def test_what_users_write_is_escaped(api):
    job = api.post_job(job_file(name="x")).json()["id"]
    # names are checked on the way in; a page must stay safe whatever the database holds
    with api.store._engine.begin() as conn:
        conn.execute(update(schema.jobs).where(schema.jobs.c.id == int(job))
                     .values(name="<script>alert(1)</script>"))
    held = api.client.post(f"/v1/jobs/{job}/hold", headers=api.auth["alice"],
                           json={"reason": '"><img src=x onerror=alert(2)>'})
    assert held.status_code == 200
    login(api, "alice")
    for text in (page(api, "/ui/jobs"), page(api, f"/ui/jobs/{job}")):
        assert "<script>alert(1)</script>" not in text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    shown = page(api, f"/ui/jobs/{job}")
    assert "<img" not in shown and "&lt;img src=x onerror=alert(2)&gt;" in shown


def test_pages_forbid_inline_script_and_come_with_their_own_css_and_script(api):
    login(api, "alice")
    reply = api.client.get("/ui/")
    policy = reply.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert reply.headers["cache-control"] == "no-store"
    # a browser sends the Origin that the login form's check needs only with this policy
    assert reply.headers["referrer-policy"] == "same-origin"
    assert "<script>" not in reply.text and " style=" not in reply.text
    for asset, kind in (("/ui/static/rota.css", "text/css"),
                        ("/ui/static/rota.js", "javascript")):
        got = api.client.get(asset)
        assert got.status_code == 200 and kind in got.headers["content-type"]
    assert "http://" not in reply.text and "https://" not in reply.text


def test_the_dashboard_is_not_part_of_the_api_schema(api):
    paths = api.client.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if not p.startswith("/v1/")]


def test_a_failed_jobs_page_ends_with_its_standard_error(api, tmp_path):
    job = api.post_job(job_file(name="crashes")).json()["id"]
    cycle(api)
    err = tmp_path / "stderr.log"
    err.write_text("".join(f"line {k}\n" for k in range(30)) +
                   "ModuleNotFoundError: No module named '<torch>'\n")
    handle = Handle("local", job, str(tmp_path), (ReplicaHandle(0, "n1", ref=Proc(
        4242, 1, str(tmp_path), str(tmp_path / "stdout.log"), str(err)).ref()),),
        ref={"boot_id": "boot"})
    api.store.transition(job, JobState.RUNNING, backend_handle=handle.to_dict())
    api.store.transition(job, JobState.FAILED, exit_code=1)
    login(api, "alice")
    text = page(api, f"/ui/jobs/{job}")
    assert "failed, exit code 1" in text
    tail = text.split('<pre class="stderr">')[1].split("</pre>")[0]
    # the last ten lines, as rota show prints them
    assert tail.splitlines() == [f"line {k}" for k in range(21, 30)] + [
        "ModuleNotFoundError: No module named &#39;&lt;torch&gt;&#39;"]


def test_a_metrics_token_opens_no_dashboard(api):
    metrics = api.store.issue_token("root", "prometheus", role="metrics").token
    refused = api.client.post("/ui/login", data={"token": metrics}, follow_redirects=False)
    assert refused.status_code == 401 and "set-cookie" not in refused.headers
    assert "metrics token" in refused.text


def test_usage_shows_this_months_gpu_hours_cost_and_budgets(tmp_path):
    """This month's exact GPU-hours per project, their cost, and each budget with its state:
    a job of p bound two hours ago holds a GPU, so p is past its hard limit; q has none."""
    now = [datetime(2026, 11, 15, 12, tzinfo=timezone.utc).timestamp()]
    store = Store.open(tmp_path / "db", clock=lambda: now[0])
    try:
        tokens = seed_tenants(store)
        app = SimpleNamespace(store=store, client=TestClient(create_app(
            store, data_dir=tmp_path / "data")), auth={
                u: {"Authorization": f"Bearer {t}"} for u, t in tokens.items()})
        made = app.client.post("/v1/jobs", headers=app.auth["alice"],
                               json=job_file(name="long-a", resources={"gpu": 1}))
        assert made.status_code == 201, made.text
        cycle(app, now=now[0])
        now[0] += 7200
        store.put_prices("EUR", {"H100": 3.0})
        store.set_budget("p", 1.0, 2.0)
        login(app, "alice")
        text = page(app, "/ui/usage")
        month = re.search(r'id="month-p">(.*?)</tr>', text, re.S).group(1)
        cells = re.findall(r"<td[^>]*>([^<]*)</td>", month)
        assert cells == ["p", "2.00", "6.00", "1", "2", "over-hard"], cells
        assert "This month (2026-11, UTC)" in text and "Cost (EUR)" in text
        assert 'id="month-q"' not in text  # alice's projects only
        login(app, "root")
        everyone = page(app, "/ui/usage")
        theirs = re.search(r'id="month-q">(.*?)</tr>', everyone, re.S).group(1)
        assert re.findall(r"<td[^>]*>([^<]*)</td>", theirs) == [
            "q", "0.00", "0.00", "-", "-", "no budget"]
    finally:
        store.close()
