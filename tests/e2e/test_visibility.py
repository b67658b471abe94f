"""Members see only their projects' jobs on a real ``rota up``; the credentials file and the
first start's defaults are what the CLI relies on."""

from __future__ import annotations

import json
import stat
import sys


def test_member_token_cannot_see_another_projects_jobs(rota_server) -> None:
    with rota_server.client() as op:
        assert op.post("/v1/projects", json={"name": "secret"}).status_code == 201
        body = {"queue": "default", "entrypoint": [sys.executable, "-c", "pass"]}
        hidden = op.post("/v1/jobs", json={**body, "project": "secret"}).json()["id"]
        mine = op.post("/v1/jobs", json={**body, "project": "default"}).json()["id"]
        issued = op.post("/v1/tokens", json={"name": "member", "role": "member"})
        assert issued.status_code == 201, issued.text
    with rota_server.client(issued.json()["token"]) as member:
        listed = [j["id"] for j in member.get("/v1/jobs").json()["items"]]
        assert str(mine) in map(str, listed) and str(hidden) not in map(str, listed)
        assert member.get(f"/v1/jobs/{hidden}").status_code == 404
        assert member.post(f"/v1/jobs/{hidden}/cancel").status_code == 404
        assert member.get(f"/v1/jobs/{mine}").status_code == 200


def test_credentials_file_is_private_and_names_the_server(rota_server) -> None:
    mode = stat.S_IMODE(rota_server.credentials.stat().st_mode)
    assert mode == 0o600
    creds = json.loads(rota_server.credentials.read_text())
    assert creds == {"url": rota_server.url, "token": rota_server.token}
    with rota_server.client() as op:
        assert op.get("/v1/whoami").json()["role"] == "operator"
        nodes = op.get("/v1/nodes").json()
        assert [len(n["gpus"]) for n in nodes if n["schedulable"]] == [4]
        assert [q["name"] for q in op.get("/v1/queues").json()] == ["default"]
