"""Each attempt of a job gets a token of its own ($ROTA_TOKEN, with $ROTA_URL) on a real
``rota up``: with it the job reads itself and reports its checkpoints (``rota checkpoint``),
and nothing else; it stops working when the attempt ends."""

from __future__ import annotations

import json
import sys

from commands import rota_command
from waiting import poll

PROBE = r"""
import json, os, subprocess, sys, urllib.error, urllib.request
url, token, me = os.environ["ROTA_URL"], os.environ["ROTA_TOKEN"], os.environ["ROTA_JOB_ID"]
def call(method, path):
    request = urllib.request.Request(url + path, method=method,
                                     headers={"Authorization": "Bearer " + token})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code
tried = {
    "read-itself": call("GET", f"/v1/jobs/{me}"),
    "report-a-checkpoint": call("POST", f"/v1/jobs/{me}/checkpoint"),
    "list-jobs": call("GET", "/v1/jobs"),
    "read-another-job": call("GET", f"/v1/jobs/{sys.argv[2]}"),
    "cancel-itself": call("POST", f"/v1/jobs/{me}/cancel"),
    "make-a-token": call("POST", "/v1/tokens"),
    "read-nodes": call("GET", "/v1/nodes"),
}
cli = subprocess.run([sys.argv[1], "checkpoint"], capture_output=True, text=True)
tried["rota-checkpoint"] = cli.returncode
print(json.dumps(tried))
print(token, file=sys.stderr)
"""


def _ended(client, job: str) -> dict:
    return poll(lambda: (j := client.get(f"/v1/jobs/{job}").json())["state"] in (
        "succeeded", "failed") and j, f"job {job} to end", timeout=60)


def test_a_jobs_own_token_reaches_only_its_job(rota_server) -> None:
    with rota_server.client() as op:
        other = op.post("/v1/jobs", json={"project": "default", "queue": "default",
                                          "entrypoint": ["sleep", "0"]}).json()["id"]
        job = op.post("/v1/jobs", json={
            "project": "default", "queue": "default",
            "entrypoint": [sys.executable, "-c", PROBE, rota_command()[0], other]}).json()["id"]
        done = _ended(op, job)
        assert done["state"] == "succeeded", op.get(f"/v1/jobs/{job}/logs?stream=stderr").text
        tried = json.loads(op.get(f"/v1/jobs/{job}/logs").text)
        token = op.get(f"/v1/jobs/{job}/logs?stream=stderr").text.split()[-1]
        shown = op.get(f"/v1/jobs/{job}").json()
    print(f"the job's token got: {tried}")
    assert tried == {"read-itself": 200, "report-a-checkpoint": 200, "list-jobs": 403,
                     "read-another-job": 403, "cancel-itself": 403, "make-a-token": 403,
                     "read-nodes": 403, "rota-checkpoint": 0}
    assert shown["last_checkpoint_at"] is not None
    assert shown["history"][0]["last_checkpoint_at"] is not None
    with rota_server.client(token) as ended:  # the attempt is over: so is its token
        assert ended.get(f"/v1/jobs/{job}").status_code == 401


def test_jobs_are_given_the_url_of_jobs_url(tmp_path) -> None:
    """``rota up --jobs-url``: where jobs reach the API another way (a Service, a proxy); the
    CLI's credentials keep the address it listens on."""
    from serverkit import RotaServer
    server = RotaServer(tmp_path, extra=("--jobs-url", "http://rota.rota.svc:8470"))
    try:
        server.start()
        assert server.url.startswith("http://127.0.0.1:")
        assert "jobs reach the API at http://rota.rota.svc:8470" in server.output()
        with server.client() as op:
            job = op.post("/v1/jobs", json={"project": "default", "queue": "default",
                                            "entrypoint": ["sh", "-c", 'echo "$ROTA_URL"']}
                          ).json()["id"]
            assert _ended(op, job)["state"] == "succeeded"
            assert op.get(f"/v1/jobs/{job}/logs").text == "http://rota.rota.svc:8470\n"
    finally:
        server.close()
