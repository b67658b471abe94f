"""Uploads (safe archives only, a size limit, the uploader's own), replica logs (a snapshot and
a follow that ends with the job), and listing and revoking tokens."""

from __future__ import annotations

import io
import os
import tarfile
import threading
import time

import pytest
from apikit import job_file

from rota.backends.base import Handle, ReplicaHandle
from rota.backends.local import Proc
from rota.core import JobState
from rota.scheduler import build_policy, run_cycle


def tar_gz(members: list[tuple[str, bytes | None, str | None]]) -> bytes:
    """(name, content or None for a directory, link target or None)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, content, link in members:
            info = tarfile.TarInfo(name)
            if link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, link
                tar.addfile(info)
            elif content is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def upload(api, data: bytes, user: str = "alice"):
    return api.client.post("/v1/uploads", headers=api.auth[user], content=data)


def test_an_upload_is_kept_and_only_its_uploader_may_use_it(api):
    data = tar_gz([("src", None, None), ("src/train.py", b"print('hi')\n", None),
                   ("latest", None, "src/train.py")])
    response = upload(api, data)
    assert response.status_code == 201, response.text
    body = response.json()
    assert (body["size"], body["files"]) == (len(data), 3)
    assert body["unpacked"] == len(b"print('hi')\n")
    assert (api.data_dir / "uploads" / f"{body['id']}.tar.gz").read_bytes() == data
    job = api.post_job(job_file(upload=body["id"])).json()
    assert api.store.get_job(job["id"]).run["upload"] == body["id"]
    foreign = api.post_job(job_file(project="q", upload=body["id"]), user="bob")
    assert foreign.status_code == 422 and foreign.json()["error"]["field"] == "upload"
    assert api.post_job(job_file(upload=body["id"]), user="root").status_code == 201


@pytest.mark.parametrize("data, words", [
    (tar_gz([("/etc/passwd", b"x", None)]), "outside"),
    (tar_gz([("../escape", b"x", None)]), "outside"),
    (tar_gz([("a/../../escape", b"x", None)]), "outside"),
    (tar_gz([("link", None, "/etc/passwd")]), "points outside"),
    (tar_gz([("d", None, None), ("d/link", None, "../../x")]), "points outside"),
    (tar_gz([("a", None, None), ("a/b", None, ".."), ("a/b/c", None, "..")]),
     "it lies under the symbolic link 'a/b'"),
    (tar_gz([("a", None, "."), ("a/x", b"x", None)]), "it lies under the symbolic link 'a'"),
    (tar_gz([("zeros", bytes(2 * 1024 * 1024), None)]), "unpacks to more than 1048576 bytes"),
    (b"plain text, not an archive", "not a tar.gz"),
    (b"", "empty"),
], ids=["absolute", "dotdot", "nested-dotdot", "abs-link", "climbing-link", "link-chain",
        "under-a-link", "unpacks-too-large", "not-gzip", "empty"])
def test_unsafe_or_broken_archives_are_refused(api, data, words):
    response = upload(api, data)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["field"] == "body" and words in error["message"]
    assert not [p for p in (api.data_dir / "uploads").iterdir()]  # nothing left behind


def test_an_upload_over_the_limit_is_413(api):
    import os
    big = tar_gz([("noise", os.urandom(100 * 1024), None)])  # incompressible, > 64 KiB limit
    response = upload(api, big)
    assert response.status_code == 413 and response.json()["error"]["code"] == "too_large"
    chunked = api.client.post("/v1/uploads", headers=api.auth["alice"],
                              content=iter([big[:40_000], big[40_000:]]))
    assert chunked.status_code == 413
    assert not list((api.data_dir / "uploads").iterdir())


def start(api, tmp_path, user="alice"):
    """Submit a job, bind it with a real cycle, and mark it running with a handle whose log
    files are under ``tmp_path``; the job id and the two log paths."""
    job = api.post_job(job_file(replicas=1), user=user).json()
    api.store.apply(run_cycle(api.store.snapshot(100.0), build_policy("default"), 100.0), 100.0)
    out, err = tmp_path / "stdout.log", tmp_path / "stderr.log"
    out.write_text("step 1\n")
    err.write_text("warning: slow\n")
    handle = Handle("local", job["id"], str(tmp_path), (
        ReplicaHandle(0, "n1", ref=Proc(4242, 1, str(tmp_path), str(out), str(err)).ref()),),
        ref={"boot_id": "boot"})
    api.store.transition(job["id"], JobState.RUNNING, backend_handle=handle.to_dict())
    return job["id"], out, err


def test_logs_of_a_running_job(api, tmp_path):
    job_id, _, _ = start(api, tmp_path)
    logs = api.client.get(f"/v1/jobs/{job_id}/logs", headers=api.auth["alice"])
    assert logs.status_code == 200 and logs.text == "step 1\n"
    err = api.client.get(f"/v1/jobs/{job_id}/logs?stream=stderr", headers=api.auth["alice"])
    assert err.text == "warning: slow\n"
    for query, field in (("replica=1", "replica"), ("stream=both", "stream"),
                         ("replica=-1", "replica"), ("follow=maybe", "follow")):
        bad = api.client.get(f"/v1/jobs/{job_id}/logs?{query}", headers=api.auth["alice"])
        assert bad.status_code == 422 and bad.json()["error"]["field"] == field, query
    hidden = api.client.get(f"/v1/jobs/{job_id}/logs", headers=api.auth["bob"])
    assert hidden.status_code == 404


def test_follow_streams_appended_lines_until_the_job_ends(api, tmp_path):
    job_id, out, _ = start(api, tmp_path)

    def work() -> None:
        for k in (2, 3):
            time.sleep(0.05)
            with out.open("a") as f:
                f.write(f"step {k}\n")
        api.store.transition(job_id, JobState.SUCCEEDED, exit_code=0)

    writer = threading.Thread(target=work)
    writer.start()
    logs = api.client.get(f"/v1/jobs/{job_id}/logs?follow=true", headers=api.auth["alice"])
    writer.join()
    assert logs.text == "step 1\nstep 2\nstep 3\n"


def test_a_pending_job_has_no_logs_yet(api):
    job = api.post_job(job_file(resources={"gpu": 1})).json()  # no control loop runs here
    response = api.client.get(f"/v1/jobs/{job['id']}/logs", headers=api.auth["alice"])
    assert response.status_code == 409 and response.json()["error"]["code"] == "no_logs"
    api.client.post(f"/v1/jobs/{job['id']}/cancel", headers=api.auth["alice"])
    ended = api.client.get(f"/v1/jobs/{job['id']}/logs?follow=true", headers=api.auth["alice"])
    assert ended.status_code == 409 and "without starting" in ended.json()["error"]["message"]


def test_tokens_are_listed_and_revoked_by_their_owner(api):
    issued = api.client.post("/v1/tokens", headers=api.auth["alice"], json={"name": "laptop"}).json()
    mine = api.client.get("/v1/tokens", headers=api.auth["alice"]).json()
    assert [(t["name"], t["user"], t["revoked_at"]) for t in mine] == [
        ("t", "alice", None), ("laptop", "alice", None)]
    assert all("token" not in t and t["display"].startswith("rota_") for t in mine)
    assert api.client.get("/v1/tokens?user=root", headers=api.auth["alice"]).status_code == 403
    assert api.client.delete("/v1/tokens/laptop?user=bob",
                             headers=api.auth["alice"]).status_code == 403
    assert api.client.delete("/v1/tokens/laptop", headers=api.auth["alice"]).status_code == 200
    laptop = {"Authorization": f"Bearer {issued['token']}"}
    assert api.client.get("/v1/whoami", headers=laptop).status_code == 401
    again = api.client.delete("/v1/tokens/laptop", headers=api.auth["alice"])
    assert again.status_code == 404 and again.json()["error"]["code"] == "not_found"
    listed = api.client.get("/v1/tokens?user=alice", headers=api.auth["root"]).json()
    assert [t["revoked_at"] is not None for t in listed] == [False, True]


def _hard_link_archive(name: str, target: str) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        info = tarfile.TarInfo("data.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"ok"))
        link = tarfile.TarInfo(name)
        link.type, link.linkname = tarfile.LNKTYPE, target
        tar.addfile(link)
    return out.getvalue()


def test_a_directory_with_hard_links_is_uploaded_and_unpacked_with_them(api, tmp_path):
    from rota.cli.upload import pack
    from rota.control.runspec import extract_upload
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "model.bin").write_bytes(b"weights")
    os.link(work / "src" / "model.bin", work / "latest.bin")  # as checkpoints often are
    archive = tmp_path / "work.tar.gz"
    assert pack(work, archive) == []
    response = upload(api, archive.read_bytes())
    assert response.status_code == 201, response.text
    dest = tmp_path / "unpacked"
    dest.mkdir()
    extract_upload(api.data_dir / "uploads" / f"{response.json()['id']}.tar.gz", dest)
    first, second = dest / "src" / "model.bin", dest / "latest.bin"
    assert first.read_bytes() == second.read_bytes() == b"weights"
    assert first.stat().st_ino == second.stat().st_ino


@pytest.mark.parametrize("name, target", [
    ("passwd", "/etc/passwd"), ("up", "../../etc/passwd"), ("early", "later.txt"),
], ids=["absolute", "climbing", "not-packed-before"])
def test_a_hard_link_to_anything_but_a_file_packed_before_it_is_refused(api, name, target):
    response = upload(api, _hard_link_archive(name, target))
    print(f"hard link {name} -> {target}: {response.status_code} {response.text}")
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "body" and "hard link" in response.text
