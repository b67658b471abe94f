"""``rota up --tls-cert --tls-key`` serves HTTPS: the credentials file it writes makes the CLI
verify the certificate, a client without the CA is refused by TLS, and a key that does not
match its certificate stops ``rota up`` with an error naming the option."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from commands import rota_command
from rotaup import up_once
from serverkit import RotaServer, make_cert
from waiting import poll


def test_rota_up_serves_https_and_the_cli_verifies_it(tmp_path):
    cert, key = make_cert(tmp_path)
    server = RotaServer(tmp_path, extra=("--tls-cert", str(cert), "--tls-key", str(key)),
                        verify=str(cert))
    try:
        server.start()
        assert server.url.startswith("https://127.0.0.1:")
        assert f"rota control plane at {server.url}" in server.output()
        assert f"data directory: {server.data_dir}, " in server.output()  # and its disk use
        assert "used; finished jobs' working directories kept 7 days, logs 30 days" in \
            server.output()
        stored = json.loads(server.credentials.read_text())
        assert stored["ca_file"] == str(cert.resolve())
        who = subprocess.run([sys.executable, "-m", "rota.cli.main", "whoami", "--json"],
                             env=server.env, capture_output=True, text=True, timeout=60)
        assert who.returncode == 0, who.stderr
        assert json.loads(who.stdout)["role"] == "operator"
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(f"{server.url}/v1/whoami", timeout=10)  # the system's CAs only
        plain = server.url.replace("https://", "http://")
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"{plain}/v1/whoami", timeout=10)
    finally:
        server.close()


def test_a_job_on_an_https_control_plane_verifies_it_with_rota_ca_file(tmp_path):
    """The job's own token reaches the API over HTTPS: ``rota checkpoint`` inside the job
    verifies the server with the certificate copy ``ROTA_CA_FILE`` names."""
    cert, key = make_cert(tmp_path)
    server = RotaServer(tmp_path, extra=("--tls-cert", str(cert), "--tls-key", str(key)),
                        verify=str(cert))
    try:
        server.start()
        with server.client() as op:
            job = op.post("/v1/jobs", json={
                "project": "default", "queue": "default",
                "entrypoint": ["sh", "-c", f'echo "ca=$ROTA_CA_FILE"; {rota_command()[0]} '
                                           "checkpoint && echo reported"]}).json()["id"]
            done = poll(lambda: (j := op.get(f"/v1/jobs/{job}").json())["state"] in (
                "succeeded", "failed") and j, "the job to end", timeout=120)
            out = op.get(f"/v1/jobs/{job}/logs").text
            err = op.get(f"/v1/jobs/{job}/logs?stream=stderr").text
        assert done["state"] == "succeeded", out + err
        assert "reported" in out
        ca = out.split("ca=")[1].split()[0]
        assert Path(ca).read_bytes() == cert.read_bytes() and ca != str(cert)
    finally:
        server.close()


def test_a_key_that_does_not_match_its_certificate_is_refused(tmp_path):
    cert, _ = make_cert(tmp_path, "one")
    _, other_key = make_cert(tmp_path, "two")
    env = RotaServer(tmp_path).env
    result = up_once(env, "--port", "0", "--data-dir", str(tmp_path / "data"), "--gpus",
                     "1xH100-80GB", "--tls-cert", str(cert), "--tls-key", str(other_key),
                     timeout=60)
    assert result.returncode == 2, result.stderr
    assert "--tls-cert: cannot serve HTTPS with" in result.stderr
    half = up_once(env, "--tls-cert", str(cert), timeout=60)
    assert half.returncode == 2 and "give both --tls-cert and --tls-key" in half.stderr
