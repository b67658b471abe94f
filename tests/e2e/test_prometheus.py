"""A real Prometheus server (``ROTA_TEST_PROMETHEUS``: ``.ci/prometheus`` installs Debian's)
scrapes a real ``rota up`` with a metrics token and evaluates the shipped rules
(``deploy/prometheus/rota-rules.yml``): PromQL shows the GPUs allocated per queue, fractions
counted by their share; the metrics address of ``--metrics-address`` answers without a token.
Skipped where no Prometheus is named."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from serverkit import RotaServer

PROMETHEUS = os.environ.get("ROTA_TEST_PROMETHEUS")
DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RULES = DEPLOY / "prometheus" / "rota-rules.yml"
DASHBOARD = DEPLOY / "grafana" / "rota-dashboard.json"
pytestmark = pytest.mark.skipif(not PROMETHEUS, reason="ROTA_TEST_PROMETHEUS names no "
                                "Prometheus binary (.ci/prometheus installs one)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    s = RotaServer(tmp_path, gpus="2xH100-80GB", extra=("--metrics-address", "127.0.0.1:0"))
    try:
        s.start()
        yield s
    finally:
        s.close()


@pytest.fixture
def prometheus(server, tmp_path):
    env = {**server.env, "ROTA_URL": server.url, "ROTA_TOKEN": server.token}
    made = subprocess.run([sys.executable, "-m", "rota.cli.main", "token", "create",
                           "prometheus", "--metrics"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert made.returncode == 0 and "(metrics)" in made.stderr, made.stderr
    token_file = tmp_path / "metrics-token"
    token_file.write_text(made.stdout.strip())
    token_file.chmod(0o600)
    target = server.url.removeprefix("http://")
    config = tmp_path / "prometheus.yml"
    config.write_text(f"""
global: {{scrape_interval: 1s, evaluation_interval: 1s}}
rule_files: [{RULES}]
scrape_configs:
  - job_name: rota
    metrics_path: /metrics
    authorization: {{type: Bearer, credentials_file: {token_file}}}
    static_configs: [{{targets: ["{target}"]}}]
""")
    port = free_port()
    log = open(tmp_path / "prometheus.log", "wb")
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={config}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=log)
    try:
        yield f"http://127.0.0.1:{port}", tmp_path / "prometheus.log"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def query(url: str, promql: str) -> list[dict]:
    answer = httpx.get(f"{url}/api/v1/query", params={"query": promql}, timeout=10)
    answer.raise_for_status()
    return answer.json()["data"]["result"]


def eventually(url: str, promql: str, log: Path, timeout: float = 90) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = query(url, promql)
            if found:
                return found
        except httpx.HTTPError:
            pass  # not up yet
        if time.monotonic() > deadline:
            raise AssertionError(f"no result for {promql!r}:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)


def test_prometheus_shows_the_gpus_allocated_per_queue(server, prometheus):
    url, log = prometheus
    with server.client() as c:
        for gpus in (1, 0.5):
            body = {"name": f"hold-{gpus}", "project": "default", "queue": "default",
                    "entrypoint": ["sleep", "300"], "workdir": "/tmp",
                    "resources": {"gpu": gpus, "cpu": "100m", "memory": "64Mi"}}
            made = c.post("/v1/jobs", json=body)
            assert made.status_code == 201, made.text
    assert eventually(url, 'up{job="rota"} == 1', log)
    allocated = eventually(url, 'sum by (queue) (rota_allocated_gpus{job="rota"}) == 1.5', log)
    assert [r["metric"]["queue"] for r in allocated] == ["default"]
    rule = eventually(url, "queue:rota_allocated_gpus:sum == 1.5", log)
    assert rule[0]["metric"]["queue"] == "default"
    running = eventually(url, 'rota_jobs{job="rota", state="running"} == 2', log)
    assert running[0]["metric"]["queue"] == "default"
    assert eventually(url, "rota_lease_held == 1", log)


def test_every_panel_of_the_dashboard_is_a_query_prometheus_answers(server, prometheus):
    """Grafana's variables replaced as Grafana would (every queue, a 1-minute rate window):
    each query is valid PromQL, and the panels of what a running job shows have data."""
    url, log = prometheus
    with server.client() as c:
        body = {"name": "hold", "project": "default", "queue": "default",
                "entrypoint": ["sleep", "300"], "workdir": "/tmp",
                "resources": {"gpu": 1, "cpu": "100m", "memory": "64Mi"}}
        assert c.post("/v1/jobs", json=body).status_code == 201
    eventually(url, 'rota_jobs{state="running"} == 1', log)
    panels = json.loads(DASHBOARD.read_text())["panels"]
    with_data = set()
    for panel in panels:
        for target in panel["targets"]:
            promql = target["expr"].replace("$queue", ".*").replace("$__rate_interval", "1m")
            answer = httpx.get(f"{url}/api/v1/query", params={"query": promql}, timeout=10)
            assert answer.status_code == 200, (panel["title"], promql, answer.text)
            if answer.json()["data"]["result"]:
                with_data.add(panel["title"])
    assert {"GPUs allocated per queue", "GPU allocation per device",
            "Control plane health"} <= with_data, with_data


def test_the_metrics_address_answers_without_a_token(server):
    found = re.search(r"without a token at (http://\S+/metrics)", server.output())
    assert found, server.output()
    answer = httpx.get(found.group(1), timeout=10)
    assert answer.status_code == 200 and "rota_lease_held 1.0" in answer.text
    assert httpx.get(f"{server.url}/metrics", timeout=10).status_code == 401


def test_the_metrics_follow_prometheus_naming_conventions(server):
    """``promtool check metrics`` (beside the Prometheus binary) lints names, units, types and
    help texts of a scrape with jobs running."""
    promtool = Path(PROMETHEUS).with_name("promtool")
    if not promtool.exists():
        pytest.skip(f"no promtool beside {PROMETHEUS}")
    with server.client() as c:
        body = {"name": "hold", "project": "default", "queue": "default",
                "entrypoint": ["sleep", "300"], "workdir": "/tmp",
                "resources": {"gpu": 0.5, "cpu": "100m", "memory": "64Mi"}}
        assert c.post("/v1/jobs", json=body).status_code == 201
        deadline = time.monotonic() + 60
        while "rota_allocated_gpus{" not in (text := c.get("/metrics").text):
            assert time.monotonic() < deadline, text
            time.sleep(0.5)
    lint = subprocess.run([str(promtool), "check", "metrics"], input=text, text=True,
                          capture_output=True, timeout=60)
    assert lint.returncode == 0 and not (lint.stdout + lint.stderr).strip(), lint.stdout
