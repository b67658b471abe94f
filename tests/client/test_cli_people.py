"""``rota project`` and ``rota user``: an operator onboards a teammate from the terminal."""

from __future__ import annotations

import json


def test_operator_creates_a_project_and_a_user_who_then_gets_a_token(server):
    made = server.rota("project", "create", "robotics", "--weight", "2", user="root")
    assert made.returncode == 0 and "Created project robotics (weight 2)" in made.stdout
    added = server.rota("user", "add", "dana", "--project", "robotics", user="root")
    assert added.returncode == 0 and "Created user dana (robotics; jobs run as OS user dana)" in added.stdout
    joined = server.rota("user", "join", "dana", "vision", user="root")
    assert joined.returncode == 0
    token = server.rota("token", "create", "laptop", "--user", "dana", user="root")
    assert token.returncode == 0 and token.stdout.startswith("rota_")
    projects = json.loads(server.rota("project", "list", "--json", user="root").stdout)
    assert {"name": "robotics", "weight": 2.0, "budget": None} in projects
    assert "dana" in server.rota("user", "list", user="root").stdout.split()


def test_members_are_told_they_need_an_operator(server):
    refused = server.rota("user", "add", "mallory", user="alice")
    assert refused.returncode == 1 and "operator" in refused.stderr
    again = server.rota("project", "create", "vision", user="root")
    assert again.returncode != 0 and "already exists" in again.stderr


def test_operator_applies_queues_from_a_file_and_bad_files_name_the_field(server, tmp_path):
    good = tmp_path / "queues.yaml"
    good.write_text(
        "flavors:\n  h100x: ['*H100*']\n"
        "queues:\n"
        "  - name: research\n    cohort: lab\n"
        "    quota: {h100x: {nominal: {gpu: 2}, borrowing_limit: {gpu: 1}}}\n"
        "  - name: product\n    cohort: lab\n    quota: {h100x: {nominal: {gpu: 2}}}\n")
    done = server.rota("queue", "apply", good, user="root")
    assert done.returncode == 0 and "Applied 2 queues: product, research" in done.stdout
    assert server.store.get_queue("research").quotas["h100x"].borrowing_limit == {"gpu": 1000}
    bad = tmp_path / "bad.yaml"
    bad.write_text("queues:\n  - name: x\n    quota: {a100: {nominal: {gpu: 1}}}\n")
    refused = server.rota("queue", "apply", bad, user="root")
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"error: {bad}: queues[0].quota.a100: unknown flavour")
    member = server.rota("queue", "apply", good, user="alice")
    assert member.returncode == 1 and "operator" in member.stderr


def test_operator_cordons_and_uncordons_a_node(server):
    done = server.rota("node", "cordon", "gpu-0", user="root")
    assert done.returncode == 0 and "Cordoned gpu-0" in done.stdout
    assert not server.store.snapshot(0.0).nodes[0].schedulable
    assert server.rota("node", "uncordon", "gpu-0", user="root").returncode == 0
    assert server.store.snapshot(0.0).nodes[0].schedulable
    missing = server.rota("node", "cordon", "nope", user="root")
    assert missing.returncode == 1 and "nope" in missing.stderr


def test_an_operator_takes_access_away_and_is_asked_about_pending_jobs(server):
    import httpx
    assert server.rota("user", "add", "erin", "--project", "vision", user="root").returncode == 0
    token = server.store.issue_token("erin", "laptop").token
    erin = {"Authorization": f"Bearer {token}"}
    job = httpx.post(f"{server.url}/v1/jobs", headers=erin, json={
        "name": "erins", "project": "vision", "queue": "default", "entrypoint": "true"})
    assert job.status_code == 201, job.text
    left = server.rota("user", "leave", "erin", "vision", user="root", input="cancel\n")
    assert left.returncode == 0, left.stderr
    assert "Cancel erin's pending jobs in vision, or keep them" in left.stdout
    assert "no longer a member of vision; 1 pending job cancelled" in left.stdout
    assert server.store.get_job(job.json()["id"]).state.value == "cancelled"
    wrong = server.rota("user", "leave", "erin", "vision", "--jobs", "maybe", user="root")
    assert wrong.returncode == 2 and "--jobs: must be cancel or keep" in wrong.stderr
    assert httpx.get(f"{server.url}/v1/whoami", headers=erin).status_code == 200
    assert server.rota("user", "disable", "erin", user="root").returncode == 0
    assert httpx.get(f"{server.url}/v1/whoami", headers=erin).status_code == 401
    assert server.rota("user", "enable", "erin", user="root").returncode == 0
    assert httpx.get(f"{server.url}/v1/whoami", headers=erin).status_code == 200
    revoked = server.rota("user", "revoke-tokens", "erin", user="root")
    assert revoked.returncode == 0 and "Revoked 1 token of erin" in revoked.stdout
    assert httpx.get(f"{server.url}/v1/whoami", headers=erin).status_code == 401
