"""Finding the server and proving who you are: ``rota login URL`` (the token on stdin) writes
the credentials file (mode 0600) that later commands read; ``ROTA_URL``/``ROTA_TOKEN`` override it; tokens are
created, listed and revoked; no server, or a bad token, is one clear line and exit 1."""

from __future__ import annotations

import json
import stat

from rota.client import credentials_path, discover


def test_discovery_order(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    assert discover(env).url == "http://127.0.0.1:8470" and discover(env).token is None
    path = credentials_path(env)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"url": "http://10.0.0.5:9000/", "token": "rota_file"}))
    found = discover(env)
    assert (found.url, found.token, found.source) == ("http://10.0.0.5:9000", "rota_file", str(path))
    over = discover({**env, "ROTA_URL": "http://h:1", "ROTA_TOKEN": "rota_env"})
    assert (over.url, over.token, over.source) == ("http://h:1", "rota_env", "ROTA_URL")


def test_login_token_lifecycle_and_revocation(server, tmp_path):
    issued = json.loads(server.rota("token", "create", "laptop", "--json").stdout)
    env = server.env(XDG_CONFIG_HOME=str(tmp_path))
    del env["ROTA_URL"], env["ROTA_TOKEN"]
    login = server.rota("login", server.url, env=env, input=issued["token"] + "\n")
    assert login.returncode == 0, login.stderr
    assert "as alice (member; projects: vision)" in login.stdout
    path = tmp_path / "rota" / "credentials.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {"url": server.url, "token": issued["token"]}
    who = server.rota("whoami", "--json", env=env)
    assert json.loads(who.stdout)["user"] == "alice"
    listed = json.loads(server.rota("token", "list", "--json", env=env).stdout)
    assert [t["name"] for t in listed] == ["cli", "laptop"]
    assert server.rota("token", "revoke", "laptop").stdout.startswith("Revoked token laptop")
    refused = server.rota("ps", env=env)
    assert refused.returncode == 1 and "rota login" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_no_server_is_one_line_that_says_how_to_start_one(server, tmp_path):
    env = server.env(ROTA_URL="http://127.0.0.1:9", XDG_CONFIG_HOME=str(tmp_path))
    result = server.rota("ps", env=env)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "error: no rota server at http://127.0.0.1:9: start one with `rota up`, or point "
        "ROTA_URL (or rota login --url) at a running one"]
    bad = server.rota("login", "--url", "ftp://x", env=env, input="t\n")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --url: ")
    bad = server.rota("login", "ftp://x", env=env, input="t\n")
    assert bad.returncode == 2 and bad.stderr.startswith("error: URL: ")


def test_token_list_leaves_job_attempts_tokens_to_all(server):
    job = json.loads(server.rota("run", "--json", "--", "true").stdout)
    server.store.issue_job_tokens([(job["id"], 1)])
    listed = server.rota("token", "list")
    assert listed.returncode == 0 and f"job-{job['id']}-1" not in listed.stdout
    assert "token of job attempts not shown: rota token list --all shows them" in listed.stderr
    every = json.loads(server.rota("token", "list", "--all", "--json").stdout)
    assert f"job-{job['id']}-1" in [t["name"] for t in every]
    assert all(t["role"] != "job" for t in json.loads(
        server.rota("token", "list", "--json").stdout))
    server.rota("cancel", job["id"])
