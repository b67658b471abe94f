"""``rota dataset``: a member declares a dataset, lists and shows it, names it in ``rota run``
(both the fast path and the Typer command send it), and cannot remove it while a job names it;
mistakes name their field or option and exit 2; operators set quotas on cached bytes."""

from __future__ import annotations

import json

from cli_support import ok


def test_a_member_declares_lists_shows_uses_and_removes_a_dataset(server, tmp_path):
    source = tmp_path / "corpus"
    source.mkdir()
    (source / "part-0").write_bytes(b"t" * 2048)
    made = ok(server.rota("dataset", "create", "corpus", "--source", source,
                          "--project", "vision"))
    assert made.strip() == ("dataset corpus (version 1, 2.0 KiB) in project vision; jobs read "
                            "it at $ROTA_DATASETS/corpus")
    table = ok(server.rota("dataset", "ls"))
    assert table.split("\n")[1].split()[:5] == ["corpus", "vision", "1", "2.0", "KiB"]
    assert ok(server.rota("dataset", "ls", user="bob")).startswith("no datasets")
    shown = ok(server.rota("dataset", "show", "corpus"))
    assert "Size:     2.0 KiB" in shown and "on no node yet" in shown
    assert json.loads(ok(server.rota("dataset", "show", "corpus", "--json")))["size_bytes"] == 2048
    job = json.loads(ok(server.rota("run", "--project", "vision", "--dataset", "corpus",
                                    "--json", "--", "true")))
    assert server.store.get_job(job["id"]).run["datasets"] == ["corpus"]
    refused = server.rota("dataset", "rm", "corpus")
    assert refused.returncode != 0 and f"named by live jobs {job['id']}" in refused.stderr
    ok(server.rota("cancel", job["id"]))
    assert ok(server.rota("dataset", "rm", "corpus")).strip() == "dataset corpus removed"


def test_mistakes_name_their_field_or_option(server, tmp_path):
    unknown = server.rota("run", "--project", "vision", "--dataset", "nothing", "--", "true")
    assert unknown.returncode == 2
    assert "datasets.0: no dataset 'nothing' in project vision" in unknown.stderr
    web = server.rota("dataset", "create", "d", "--source", "https://h/k", "--project", "vision")
    assert web.returncode == 2 and "error: source: 'https://h/k': HTTP sources are not " \
        "supported yet" in web.stderr
    s3 = server.rota("dataset", "create", "d", "--source", "s3://b/k", "--project", "vision")
    assert s3.returncode == 2 and "error: source: 's3://b/k': 'b' is not a bucket name" \
        in s3.stderr
    size = server.rota("dataset", "create", "d", "--source", tmp_path, "--size", "lots",
                       "--project", "vision")
    assert size.returncode == 2 and size.stderr.startswith("error: --size: must be a number")


def test_operators_set_a_projects_quota_on_cached_bytes(server):
    assert server.rota("dataset", "quota", "vision", "1Gi").returncode != 0  # a member
    assert ok(server.rota("dataset", "quota", "vision", "1Gi", user="root")).strip() == \
        "project vision: quota 1.0 GiB, cached now 0 B"
    assert ok(server.rota("dataset", "quota", "vision")).strip() == \
        "project vision: quota 1.0 GiB, cached now 0 B"
    ok(server.rota("dataset", "quota", "vision", "none", user="root"))
    assert json.loads(ok(server.rota("dataset", "quota", "vision", "--json")))[
        "cache_bytes"] is None
