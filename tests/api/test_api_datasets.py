"""Datasets over HTTP: a member declares them in her project (the size of a path measured),
sees only her projects' (an operator all), names them in jobs (an unknown one refused at
submit, naming the field), and cannot remove one a live job names; operators set quotas on
cached bytes, and a dataset larger than its project's quota is refused. An S3 source is
listed, with the control plane's credentials, against a real S3-compatible server."""

from __future__ import annotations

from apikit import job_file
from s3server import env_of, s3_server


def _tree(tmp_path, name="imagenet"):
    root = tmp_path / "shared" / name
    (root / "train").mkdir(parents=True, exist_ok=True)
    (root / "train" / "a.bin").write_bytes(b"x" * 1000)
    (root / "labels.txt").write_bytes(b"y" * 24)
    return root


def test_a_member_declares_a_dataset_and_its_size_is_measured(api, tmp_path):
    alice = api.auth["alice"]
    made = api.client.post("/v1/datasets", headers=alice, json={
        "name": "imagenet", "project": "p", "source": str(_tree(tmp_path))})
    assert made.status_code == 201, made.text
    assert made.json()["size_bytes"] == 1024 and made.json()["version"] == "1"
    listed = api.client.get("/v1/datasets", headers=alice).json()
    assert [(d["name"], d["project"], d["nodes"]) for d in listed] == [("imagenet", "p", [])]
    again = api.client.post("/v1/datasets", headers=alice, json={
        "name": "imagenet", "project": "p", "source": str(_tree(tmp_path))})
    assert again.status_code == 409


def test_each_project_sees_its_own_datasets_and_operators_all(api, tmp_path):
    source = str(_tree(tmp_path))
    assert api.client.post("/v1/datasets", headers=api.auth["alice"], json={
        "name": "a", "project": "p", "source": source}).status_code == 201
    assert api.client.post("/v1/datasets", headers=api.auth["bob"], json={
        "name": "b", "project": "q", "source": source, "size": 5}).status_code == 201
    names = {u: [d["name"] for d in api.client.get("/v1/datasets", headers=api.auth[u]).json()]
             for u in ("alice", "bob", "root")}
    assert names == {"alice": ["a"], "bob": ["b"], "root": ["a", "b"]}
    assert api.client.get("/v1/datasets/b", headers=api.auth["alice"]).status_code == 404
    assert api.client.delete("/v1/datasets/b", headers=api.auth["alice"]).status_code == 404
    other = api.client.post("/v1/datasets", headers=api.auth["alice"], json={
        "name": "c", "project": "q", "source": source})
    assert other.status_code == 422 and other.json()["error"]["field"] == "project"


def test_bad_declarations_name_the_field(api, tmp_path):
    alice = api.auth["alice"]
    cases = [({"name": "no way", "project": "p", "source": "/x"}, "name"),
             ({"name": "d", "project": "p", "source": "relative/dir"}, "source"),
             ({"name": "d", "project": "p", "source": "https://host/x"}, "source"),
             ({"name": "d", "project": "p", "source": "s3://Bucket/x"}, "source"),
             ({"name": "d", "project": "p", "source": str(tmp_path / "missing")}, "source"),
             ({"name": "d", "project": "p", "source": str(_tree(tmp_path) / "labels.txt")},
              "source"),
             ({"name": "d", "project": "p", "source": str(tmp_path), "size": -1}, "size"),
             ({"name": "d", "project": "p", "source": str(tmp_path), "size": 1,
               "version": "a b"}, "version"),
             ({"name": "d", "project": "p", "source": "/x", "colour": 1}, "colour")]
    for body, field in cases:
        answer = api.client.post("/v1/datasets", headers=alice, json=body)
        assert answer.status_code == 422 and answer.json()["error"]["field"] == field, body
    s3 = api.client.post("/v1/datasets", headers=alice, json=cases[2][0]).json()
    assert "not supported yet" in s3["error"]["message"]


def test_jobs_name_datasets_of_their_project_only(api, tmp_path):
    source = str(_tree(tmp_path))
    for user, name, project in (("alice", "mine", "p"), ("bob", "theirs", "q")):
        assert api.client.post("/v1/datasets", headers=api.auth[user], json={
            "name": name, "project": project, "source": source}).status_code == 201
    ok = api.post_job(job_file(datasets=["mine"]))
    assert ok.status_code == 201, ok.text
    assert api.store.get_job(ok.json()["id"]).run["datasets"] == ["mine"]
    for names, field in ((["nothing"], "datasets.0"), (["mine", "theirs"], "datasets.1"),
                         (["mine", "mine"], "datasets.1")):
        refused = api.post_job(job_file(datasets=names))
        assert refused.status_code == 422, names
        assert refused.json()["error"]["field"] == field, refused.text
    assert "no dataset 'nothing' in project p" in api.post_job(
        job_file(datasets=["nothing"])).json()["error"]["message"]


def test_a_dataset_a_live_job_names_is_not_removed(api, tmp_path):
    alice = api.auth["alice"]
    assert api.client.post("/v1/datasets", headers=alice, json={
        "name": "mine", "project": "p", "source": str(_tree(tmp_path))}).status_code == 201
    job = api.post_job(job_file(datasets=["mine"])).json()["id"]
    refused = api.client.delete("/v1/datasets/mine", headers=alice)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "dataset_in_use"
    assert f"live jobs {job}" in refused.json()["error"]["message"]
    assert api.client.post(f"/v1/jobs/{job}/cancel", headers=alice).status_code == 200
    assert api.client.delete("/v1/datasets/mine", headers=alice).status_code == 200
    assert api.client.get("/v1/datasets/mine", headers=alice).status_code == 404


def test_operators_set_quotas_and_a_dataset_over_its_quota_is_refused(api, tmp_path):
    root, alice = api.auth["root"], api.auth["alice"]
    assert api.client.put("/v1/dataset-quotas/p", headers=alice,
                          json={"cache_bytes": 10}).status_code == 403
    set_ = api.client.put("/v1/dataset-quotas/p", headers=root, json={"cache_bytes": 1000})
    assert set_.json() == {"project": "p", "cache_bytes": 1000, "cached_bytes": 0}
    over = api.client.post("/v1/datasets", headers=alice, json={
        "name": "big", "project": "p", "source": str(_tree(tmp_path))})
    assert over.status_code == 422 and over.json()["error"]["field"] == "size"
    assert "quota" in over.json()["error"]["message"]
    assert api.client.get("/v1/dataset-quotas/p", headers=alice).json()["cache_bytes"] == 1000
    assert api.client.get("/v1/dataset-quotas/q", headers=alice).status_code == 404


def test_an_s3_source_is_measured_by_listing_with_the_control_planes_credentials(api,
                                                                               tmp_path):
    seed = tmp_path / "seed" / "corpus"
    (seed / "text" / "part").mkdir(parents=True)
    (seed / "text" / "part" / "0.txt").write_bytes(b"t" * 700)
    (seed / "text" / "1.txt").write_bytes(b"t" * 300)
    alice = api.auth["alice"]
    with s3_server(seed.parent, tmp_path / "s3") as server:
        with env_of(server.env):
            made = api.client.post("/v1/datasets", headers=alice, json={
                "name": "text", "project": "p", "source": "s3://corpus/text/"})
            assert made.status_code == 201, made.text
            assert (made.json()["source"], made.json()["size_bytes"]) == ("s3://corpus/text",
                                                                          1000)
            empty = api.client.post("/v1/datasets", headers=alice, json={
                "name": "none", "project": "p", "source": "s3://corpus/nothing"})
            assert empty.status_code == 422
            assert "s3://corpus/nothing holds no objects" in empty.json()["error"]["message"]
        with env_of({**server.env, "AWS_SECRET_ACCESS_KEY": "0" * 32}):
            refused = api.client.post("/v1/datasets", headers=alice, json={
                "name": "other", "project": "p", "source": "s3://corpus/text"})
            error = refused.json()["error"]
            assert refused.status_code == 422 and error["field"] == "source"
            assert "403 SignatureDoesNotMatch" in error["message"] and "0" * 32 not in refused.text
