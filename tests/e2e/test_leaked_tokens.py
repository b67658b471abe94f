"""A live token written in a log of the control plane (``rota-up.log`` in the data directory,
and its rotated copies, compressed or not) is revoked when ``rota up`` starts, and the log
says so by the token's name and owner, never its secret; the operator token of the
credentials file, so revoked, is replaced. Tokens that no log holds keep working.

A real ``rota up`` (``rota_server``), stopped, given such logs, and started again."""

from __future__ import annotations

import gzip
import json


def status(server, token: str) -> int:
    with server.client(token) as client:
        return client.get("/v1/whoami").status_code


def test_live_tokens_found_in_the_control_plane_logs_are_revoked_at_start(rota_server):
    server = rota_server
    with server.client() as op:
        assert op.post("/v1/users", json={"name": "alice",
                                          "projects": ["default"]}).status_code == 201
        issued = {name: op.post("/v1/tokens", json={"name": name, "user": "alice"}).json()
                  for name in ("laptop", "ci", "old")}
        me = op.get("/v1/whoami").json()["user"]
    laptop, ci, old = (issued[n]["token"] for n in ("laptop", "ci", "old"))
    operator = server.token
    server.stop()

    log = server.data_dir / "rota-up.log"
    with open(log, "a") as f:  # as a debug print of an earlier version might have
        f.write(f"2026-01-01 rota.debug: request from alice Authorization: Bearer {laptop}\n"
                f"2026-01-01 rota.debug: credentials {{\"token\": \"{operator}\"}}\n")
    with gzip.open(server.data_dir / "rota-up.log.2.gz", "wt") as f:
        f.write(f"rotated away long ago: {old}\n")
    (server.data_dir / "elsewhere.log").write_text(f"not a log of rota up: {ci}\n")
    before = server.output()
    server.start()

    assert status(server, laptop) == 401
    assert status(server, old) == 401
    assert status(server, operator) == 401
    assert status(server, ci) == 200  # only in a file that is not the control plane's log
    assert server.token != operator and status(server, server.token) == 200  # replaced
    assert json.loads(server.credentials.read_text())["token"] == server.token

    said = server.output()[len(before):]
    for name, where in (("laptop", log), ("old", server.data_dir / "rota-up.log.2.gz")):
        shown = issued[name]["token"][:11]
        assert (f"token '{name}' of user alice (member, {shown}...) was written to {where}: "
                "revoked") in said, said
    assert f"token 'rota-up-1' of user {me} (operator" in said
    for secret in (laptop, old, operator, server.token):
        assert secret not in said
    with server.client() as op:
        listed = {t["name"]: t for t in op.get("/v1/tokens", params={"user": "alice"}).json()}
    assert listed["laptop"]["revoked_at"] is not None
    assert listed["ci"]["revoked_at"] is None

    server.restart()  # already revoked: nothing more to say
    assert "was written to" not in server.output()[len(before) + len(said):]


def test_a_token_cut_by_the_end_of_a_read_is_found_whole(tmp_path):
    """The logs are read a chunk at a time; a token across two chunks is found all the same."""
    from rota.server.leaks import CHUNK, token_texts
    token = "rota_" + "a1B2-_" * 7 + "c"  # 43 characters after the prefix
    assert len(token) == 48
    log = tmp_path / "rota-up.log"
    log.write_bytes(b"x" * (CHUNK - 20) + f" {token} ".encode() + b"y" * 100)
    assert token_texts(log) == {token}
