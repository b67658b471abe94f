"""Model serving with a real ``rota up``, the official ``openai`` client and the example model
server (``examples/serving/bigram_lm.py``), as a new user would try it: a service with no
replica answers its first request once a replica has started (a cold start), streams chunk by
chunk, scales out under a burst and back to zero when idle, which frees its GPU for a queued
batch job; a member of another project gets 404; a service whose queue has no quota left
answers 503 with ``Retry-After`` while ``rota show`` says why its replica waits; a client that
goes away mid-stream stops the generation on the replica; a job calls its project's model with
the token rota gives it."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import yaml

openai = pytest.importorskip("openai", reason="the official openai client is a test dependency")

from test_budgets import ok, rota, shown, until  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MODEL_SERVER = ROOT / "examples" / "serving" / "bigram_lm.py"


def service_file(tmp: Path, name: str = "tiny", model: str = "tiny", gpu: float = 1,
                 token_delay: float = 0.0, priority: int = 100, **service) -> Path:
    """A service file beside a copy of the model server (its workdir, uploaded by rota serve)."""
    where = tmp / name
    where.mkdir()
    shutil.copy(MODEL_SERVER, where / MODEL_SERVER.name)
    settings = {"models": [model], "readiness": "/health", "replicas": {"min": 0, "max": 1},
                "target": 4, "idle": "5m", "timeout": "2m", **service}
    (where / "service.yaml").write_text(yaml.safe_dump({
        "name": name, "kind": "service", "priority": priority, "workdir": ".",
        "entrypoint": [sys.executable, MODEL_SERVER.name, "--model", model,
                       "--token-delay", str(token_delay)],
        "resources": {"cpu": "250m", "memory": "256Mi", "gpu": gpu}, "service": settings}))
    return where / "service.yaml"


def client(server, token: str | None = None, **kwargs) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=token or server.token,
                         timeout=120, **kwargs)


def services(server) -> dict[str, dict]:
    return {s["name"]: s for s in json.loads(ok(rota(server, "services", "--json")))}


def chat(c: openai.OpenAI, text: str = "hello", max_tokens: int = 24, **kwargs):
    return c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": text}],
                                     max_tokens=max_tokens, **kwargs)


def test_a_cold_service_answers_its_first_request_streams_and_sleeps_again(rota_server,
                                                                           tmp_path):
    ok(rota(rota_server, "serve", str(service_file(tmp_path, idle="3s"))))
    assert services(rota_server)["tiny"]["replicas"]["live"] == 0  # nothing runs yet
    c = client(rota_server)
    assert [m.id for m in c.models.list()] == ["tiny"]

    answer = chat(c).choices[0].message.content  # waits for the replica, then answers
    assert answer
    seen = services(rota_server)["tiny"]
    assert (seen["cold_starts"], seen["replicas"]["ready"]) == (1, 1)
    assert set(seen["last_cold_start"]) == {"to_running_s", "to_ready_s", "total_s"}

    chunks = [ch.choices[0].delta.content or "" for ch in chat(c, stream=True) if ch.choices]
    assert len([ch for ch in chunks if ch]) > 1 and "".join(chunks) == answer

    replica = seen["jobs"][0]["id"]
    until("the idle replica to stop", lambda: shown(rota_server, replica)["state"] == "cancelled")
    assert services(rota_server)["tiny"]["replicas"]["live"] == 0


def test_an_idle_service_frees_its_gpu_for_a_queued_batch_job(rota_server, tmp_path):
    ok(rota(rota_server, "serve", str(service_file(tmp_path, idle="3s"))))
    chat(client(rota_server))
    replica = services(rota_server)["tiny"]["jobs"][0]["id"]
    batch = json.loads(ok(rota(rota_server, "run", "--gpus", "4", "--json", "--", "sleep",
                               "600")))["id"]
    until("the batch job to run", lambda: shown(rota_server, batch)["state"] == "running")
    freed = shown(rota_server, replica)
    assert freed["state"] == "cancelled"
    # the replica held one of the four GPUs: the batch job was bound only after it ended (an
    # order of the store's events, not of moments: under load the replica may go idle before
    # the batch job is first seen pending, and clocks of one pass differ by milliseconds)
    ended = first_event(rota_server, replica, "-> cancelled")
    assert first_event(rota_server, batch, "bound to") > ended


def first_event(server, job: str, text: str) -> int:
    """The id (the store's order) of the job's first event whose message holds ``text``."""
    found = httpx.get(f"{server.url}/v1/jobs/{job}/events", timeout=30,
                      headers={"Authorization": f"Bearer {server.token}"})
    found.raise_for_status()
    return next(e["id"] for e in found.json() if text in e["message"])


def test_a_waking_service_preempts_the_batch_job_that_borrowed_its_gpus(rota_server,
                                                                       tmp_path):
    batch = json.loads(ok(rota(rota_server, "run", "--gpus", "4", "--json", "--", "sleep",
                               "600")))["id"]
    until("the batch job to run", lambda: shown(rota_server, batch)["state"] == "running")
    ok(rota(rota_server, "serve", str(service_file(tmp_path))))
    assert chat(client(rota_server)).choices[0].message.content
    assert shown(rota_server, batch)["state"] in ("preempting", "pending")


def test_a_burst_scales_the_service_out_to_max_and_back(rota_server, tmp_path):
    ok(rota(rota_server, "serve", str(service_file(
        tmp_path, token_delay=0.05, replicas={"min": 0, "max": 3}, target=2, idle="4s"))))
    c = client(rota_server)
    chat(c)  # the first replica
    peak, errors = [0], []

    def one() -> None:
        try:
            chat(c, max_tokens=40)
        except Exception as exc:  # noqa: BLE001 - counted below
            errors.append(exc)

    def watch(stop: threading.Event) -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], services(rota_server)["tiny"]["replicas"]["live"])
            time.sleep(0.3)

    stop = threading.Event()
    watcher = threading.Thread(target=watch, args=(stop,))
    watcher.start()
    for _ in range(3):  # bursts until the scale-out was seen, at most three
        burst = [threading.Thread(target=one) for _ in range(64)]
        for t in burst:
            t.start()
        for t in burst:
            t.join()
        if peak[0] >= 3:
            break
    stop.set()
    watcher.join()
    assert not errors and peak[0] == 3
    until("the service to scale back to zero",
          lambda: services(rota_server)["tiny"]["replicas"]["live"] == 0)


def test_a_member_of_another_project_cannot_see_or_call_the_model(rota_server, tmp_path):
    ok(rota(rota_server, "serve", str(service_file(tmp_path))))
    ok(rota(rota_server, "project", "create", "speech"))
    ok(rota(rota_server, "user", "add", "bob", "--project", "speech"))
    bob = json.loads(ok(rota(rota_server, "token", "create", "laptop", "--user", "bob",
                             "--json")))["token"]
    c = client(rota_server, bob)
    assert [m.id for m in c.models.list()] == []
    with pytest.raises(openai.NotFoundError):
        chat(c)
    assert services(rota_server)["tiny"]["requests"] == 0  # it never reached the service


def test_a_service_without_quota_answers_503_and_says_why_its_replica_waits(rota_server,
                                                                          tmp_path):
    queues = tmp_path / "queues.yaml"
    queues.write_text(yaml.safe_dump({"queues": [
        {"name": "serving", "quota": {"any": {"nominal": {"gpu": 1}}}}]}))
    ok(rota(rota_server, "queue", "apply", str(queues)))
    batch = json.loads(ok(rota(rota_server, "run", "--queue", "serving", "--gpus", "1",
                               "--json", "--", "sleep", "600")))["id"]  # all of its quota
    until("the batch job to run", lambda: shown(rota_server, batch)["state"] == "running")
    ok(rota(rota_server, "serve", str(service_file(tmp_path, timeout="2s", priority=0)),
            "--queue", "serving"))
    with pytest.raises(openai.APIStatusError) as raised:
        chat(client(rota_server, max_retries=0))
    assert raised.value.status_code == 503
    assert int(raised.value.response.headers["Retry-After"]) > 0
    replica = services(rota_server)["tiny"]["jobs"][0]["id"]
    assert f"rota show {replica}" in raised.value.message
    why = ok(rota(rota_server, "show", replica))
    assert "pending" in why and "quota" in why


def test_a_client_that_goes_away_stops_the_generation_on_the_replica(rota_server, tmp_path):
    ok(rota(rota_server, "serve", str(service_file(tmp_path, token_delay=0.05))))
    c = client(rota_server)
    chat(c)
    endpoint = services(rota_server)["tiny"]["jobs"][0]["endpoint"]
    stream = chat(c, stream=True, max_tokens=2000)  # 100 s if read to the end
    for k, _ in enumerate(stream):
        if k == 3:
            break
    stream.close()

    def stats() -> dict:
        return httpx.get(f"http://{endpoint}/stats", timeout=10).json()
    until("the replica to see the stream cancelled",
          lambda: stats()["cancelled"] == 1 and stats()["in_flight"] == 0)


def test_a_replica_that_keeps_failing_is_replaced_after_a_back_off_not_in_a_spin(rota_server,
                                                                              tmp_path):
    path = service_file(tmp_path, name="broken", model="broken", timeout="3s")
    spec = yaml.safe_load(path.read_text())
    spec["entrypoint"] = "exit 3"
    path.write_text(yaml.safe_dump(spec))
    ok(rota(rota_server, "serve", str(path)))
    with pytest.raises(openai.APIStatusError) as raised:
        client(rota_server, max_retries=0).completions.create(model="broken", prompt="x")
    assert raised.value.status_code == 503
    assert "failed: " in raised.value.message  # why the last one ended
    with rota_server.client() as http:
        failed = http.get("/v1/jobs", params={"state": "failed", "limit": 100}).json()["items"]
    # 1 s, then 2 s between replicas: at most 2 in 3 s (without a back-off: one every launch)
    assert 1 <= len([j for j in failed if j["name"] == "broken"]) <= 3


def test_a_restarted_control_plane_routes_to_the_replica_that_kept_running(rota_server,
                                                                           tmp_path):
    ok(rota(rota_server, "serve", str(service_file(tmp_path))))
    first = chat(client(rota_server)).choices[0].message.content
    [replica] = services(rota_server)["tiny"]["jobs"]
    rota_server.restart()
    again = chat(client(rota_server)).choices[0].message.content  # no new replica needed
    seen = services(rota_server)["tiny"]
    assert again == first
    assert [j["id"] for j in seen["jobs"]] == [replica["id"]] and seen["cold_starts"] == 0


EVAL_JOB = """\
import os, openai
c = openai.OpenAI(base_url=os.environ["ROTA_URL"] + "/v1", api_key=os.environ["ROTA_TOKEN"],
                  timeout=120)
print("models:", ",".join(m.id for m in c.models.list()))
r = c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}],
                              max_tokens=8)
print("answer:", r.choices[0].message.content)
"""


def test_a_job_calls_its_project_s_model_with_its_own_token(rota_server, tmp_path):
    # an evaluation job: no personal token in its environment, only what rota gives each job
    ok(rota(rota_server, "serve", str(service_file(tmp_path))))
    (tmp_path / "eval.py").write_text(EVAL_JOB)
    job = json.loads(ok(rota(rota_server, "run", "--json", "--workdir", str(tmp_path), "--",
                             sys.executable, "eval.py")))["id"]
    until(f"job {job} to end", lambda: shown(rota_server, job)["state"] in (
        "succeeded", "failed"))
    out = ok(rota(rota_server, "logs", job))
    assert shown(rota_server, job)["state"] == "succeeded", out
    assert "models: tiny" in out and "answer: " in out


def test_a_thousand_requests_at_once_to_a_model_with_no_replica_are_each_answered(
        rota_server, tmp_path):
    """1,000 requests at once to a service whose replica never becomes ready (it answers no
    readiness probe): the first ``queue`` wait and are told after ``timeout``, the rest are
    refused at once, every one 503 with ``Retry-After``; the control plane goes on serving."""
    path = service_file(tmp_path, timeout="3s", queue=100)
    spec = yaml.safe_load(path.read_text())
    spec["entrypoint"] = ["sleep", "600"]  # runs, never ready
    path.write_text(yaml.safe_dump(spec))
    ok(rota(rota_server, "serve", str(path)))
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}

    async def everyone() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=1000, max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=rota_server.url, limits=limits, timeout=120,
                                     headers={"Authorization": f"Bearer {rota_server.token}"},
                                     verify=False) as c:
            return await asyncio.gather(*(c.post("/v1/chat/completions", json=body)
                                          for _ in range(1000)))
    answers = asyncio.run(everyone())

    assert [a.status_code for a in answers] == [503] * 1000
    assert all(int(a.headers["Retry-After"]) > 0 for a in answers)
    reasons = [a.json()["error"]["message"] for a in answers]
    waited = [r for r in reasons if "became ready within 3 s" in r]
    assert len(waited) == 100  # the queue's worth waited out the timeout
    assert len(reasons) - len(waited) == 900
    assert all("requests waiting for a replica already" in r for r in reasons
               if r not in waited)
    assert services(rota_server)["tiny"]["requests"] == 1000


def test_a_streamed_first_request_hears_the_cold_start_then_gets_its_answer(rota_server,
                                                                           tmp_path):
    path = service_file(tmp_path)
    spec = yaml.safe_load(path.read_text())
    spec["entrypoint"] = ["sh", "-c", 'sleep 3; exec "$0" "$@"', *spec["entrypoint"]]
    path.write_text(yaml.safe_dump(spec))  # a cold start of at least 3 s
    ok(rota(rota_server, "serve", str(path)))
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hello"}],
            "max_tokens": 8, "stream": True}
    with httpx.stream("POST", f"{rota_server.url}/v1/chat/completions", json=body, timeout=120,
                      headers={"Authorization": f"Bearer {rota_server.token}"},
                      verify=False) as answer:
        lines = [line for line in answer.iter_lines() if line]
    assert answer.status_code == 200
    assert lines[0] == ": waiting for a replica of service tiny"  # a cold start
    assert lines[1].startswith(": waiting for a replica of service tiny: ")
    events = [line.removeprefix("data: ") for line in lines if line.startswith("data: ")]
    assert events[-1] == "[DONE]" and len(events) > 2
    # warm now, the official client streams as before
    chunks = [ch.choices[0].delta.content or "" for ch in chat(client(rota_server), stream=True)
              if ch.choices]
    assert "".join(chunks)
