"""Operators from the terminal: queues bound to projects, deleting queues and projects,
draining nodes; against a real server on loopback."""

from __future__ import annotations

import json

from rota.core import JobState


def apply(server, tmp_path, text: str):
    path = tmp_path / "queues.yaml"
    path.write_text(text)
    return server.rota("queue", "apply", path, user="root"), path


def run_job(server, user: str, project: str, queue: str = "default"):
    return server.rota("run", "--project", project, "--queue", queue, "--json", "--", "true",
                       user=user)


def test_a_bound_queue_shows_who_may_use_it_and_refuses_others(server, tmp_path):
    done, _ = apply(server, tmp_path, "queues:\n  - name: vq\n    projects: [vision]\n")
    assert done.returncode == 0, done.stderr
    table = server.rota("queues", user="bob").stdout
    assert "PROJECTS" in table
    assert [line.split()[:2] for line in table.splitlines() if line.split()[:1] == ["vq"]] == [
        ["vq", "vision"]]
    listed = json.loads(server.rota("queues", "--json", user="bob").stdout)
    assert {q["name"]: q["projects"] for q in listed} == {"default": None, "vq": ["vision"]}
    refused = run_job(server, "bob", "speech", "vq")
    assert refused.returncode == 2
    assert refused.stderr.startswith("error: queue: queue vq does not admit project speech: "
                                     "only project vision may use it")
    assert run_job(server, "alice", "vision", "vq").returncode == 0


def test_an_unknown_project_in_a_queue_file_names_its_entry(server, tmp_path):
    refused, path = apply(server, tmp_path, "queues:\n  - name: x\n    projects: [vision, nlp]\n")
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"error: {path}: queues[0].projects[1]: unknown project "
                                     "'nlp'; projects: ")


def test_show_notes_a_queue_that_no_longer_admits_the_job(server, tmp_path):
    apply(server, tmp_path, "queues:\n  - name: moving\n")
    job = json.loads(run_job(server, "alice", "vision", "moving").stdout)["id"]
    assert "Queue:" not in server.rota("show", job).stdout
    apply(server, tmp_path, "queues:\n  - name: moving\n    projects: [speech]\n")
    shown = server.rota("show", job).stdout
    assert "queue moving no longer admits project vision; this job was accepted" in shown
    assert json.loads(server.rota("show", job, "--json").stdout)["queue_admits_project"] is False


def test_deleting_a_queue_in_use_says_what_holds_it_then_works(server, tmp_path):
    apply(server, tmp_path, "queues:\n  - name: temp\n")
    job = json.loads(run_job(server, "alice", "vision", "temp").stdout)["id"]
    refused = server.rota("queue", "delete", "temp", user="root")
    assert refused.returncode == 1
    assert "queue temp still holds 1 job (1 pending)" in refused.stderr
    listed = json.loads(server.rota("ps", "--queue", "temp", "--json").stdout)
    assert [j["id"] for j in listed] == [job]
    assert server.rota("queue", "delete", "temp", user="alice").returncode == 1  # a member
    server.rota("cancel", job)
    done = server.rota("queue", "delete", "temp", user="root")
    assert done.returncode == 0 and "Deleted queue temp." in done.stdout
    assert "has been deleted" in server.rota("show", job).stdout
    missing = server.rota("queue", "delete", "temp", user="root")
    assert missing.returncode == 1 and "no queue 'temp'" in missing.stderr


def test_deleting_a_project(server, tmp_path):
    assert server.rota("project", "create", "scratch", user="root").returncode == 0
    apply(server, tmp_path, "queues:\n  - name: shared\n    projects: [scratch, vision]\n")
    done = server.rota("project", "delete", "scratch", user="root")
    assert done.returncode == 0
    assert "Deleted project scratch; removed from the projects of queue shared." in done.stdout
    kept = server.rota("project", "delete", "vision", user="root")
    assert kept.returncode == 1 and "project vision" in kept.stderr
    assert "scratch" not in server.rota("project", "list", user="root").stdout


def test_drain_with_a_reason_then_uncordon(server):
    assert server.rota("node", "drain", "gpu-0", user="alice").returncode == 1
    done = server.rota("node", "drain", "gpu-0", "--reason", "bad fan", user="root")
    assert done.returncode == 0 and "Draining gpu-0" in done.stdout
    table = server.rota("nodes").stdout
    assert "drained (bad fan)" in table
    assert not server.store.snapshot(0.0).nodes[0].schedulable
    cordoned = server.rota("node", "cordon", "gpu-0", "--reason", "tests", user="root")
    assert cordoned.returncode == 0 and "cordoned (tests)" in server.rota("nodes").stdout
    assert server.rota("node", "resume", "gpu-0", user="root").returncode == 0
    node = json.loads(server.rota("nodes", "--json").stdout)[0]
    assert (node["state"], node["reason"], node["schedulable"]) == ("ok", "", True)


def test_drain_evict_reports_what_it_asked_to_leave(server):
    from rota.scheduler import build_policy, run_cycle
    job = json.loads(run_job(server, "alice", "vision").stdout)["id"]
    store = server.store
    store.apply(run_cycle(store.snapshot(0.0), build_policy("default"), 0.0), 0.0)
    store.transition(job, JobState.RUNNING)
    draining = server.rota("nodes").stdout
    done = server.rota("node", "drain", "gpu-0", "--evict", user="root")
    assert done.returncode == 0
    [line] = [x for x in done.stdout.splitlines() if x.startswith("Evicting job")]
    assert line.startswith(f"Evicting job {job}: ") or job in line.split(":")[0].removeprefix(
        "Evicting jobs ").split(", ")
    assert store.get_job(job).state is JobState.PREEMPTING
    assert "draining" in server.rota("nodes").stdout and "ok" in draining
    server.rota("node", "uncordon", "gpu-0", user="root")


def test_nodes_warn_while_gpu_memory_shares_are_not_enforced(server):
    from dataclasses import replace

    from rota.core import GPU_MEMORY_ENFORCEMENT
    node = server.store.snapshot(0.0).nodes[0]
    why = "not enforced: the memory watcher's NVML check fails (NVMLError(3))"
    server.store.upsert_nodes([replace(node, labels={**node.labels,
                                                     GPU_MEMORY_ENFORCEMENT: why})], "local")
    shown = server.rota("nodes").stdout
    assert "warning: gpu-0: GPU-memory shares are not enforced: the memory watcher's NVML" in \
        " ".join(shown.split())
    server.store.upsert_nodes([node], "local")
    assert "warning" not in server.rota("nodes").stdout


def test_nodes_say_how_jobs_limits_are_enforced_and_warn_when_they_are_not(server):
    from dataclasses import replace

    from rota.core import JOB_LIMITS
    node = server.store.snapshot(0.0).nodes[0]
    for said, line in (("cpu/memory/pids: cgroup v1",
                        "gpu-0: jobs' CPU, memory and process limits: cpu/memory/pids: cgroup v1"),
                       ("not enforced: cannot create this control plane's cgroups: Permission "
                        "denied", "warning: gpu-0: jobs' CPU, memory and process limits: not "
                        "enforced: cannot create this control plane's cgroups: Permission denied")):
        server.store.upsert_nodes([replace(node, labels={**node.labels, JOB_LIMITS: said})],
                                  "local")
        shown = " ".join(server.rota("nodes").stdout.split())
        assert line in shown, shown
        assert ("warning" in shown) is said.startswith("not enforced")
    server.store.upsert_nodes([node], "local")


def test_user_add_refuses_root_unless_told(server) -> None:
    refused = server.rota("user", "add", "eve", "--unix-user", "root", user="root")
    print(refused.stdout, refused.stderr)
    assert refused.returncode == 2  # bad input
    assert "unix_user" in refused.stderr and "--allow-system-account" in refused.stderr
    done = server.rota("user", "add", "eve", "--unix-user", "root", "--allow-system-account",
                       user="root")
    assert done.returncode == 0, done.stderr
    assert "jobs run as OS user root" in done.stdout
    back = server.rota("user", "set", "eve", "--unix-user", "nobody", user="root")
    assert back.returncode == 0, back.stderr
    again = server.rota("user", "set", "eve", "--unix-user", "root", user="root")
    assert again.returncode == 2 and "--allow-system-account" in again.stderr
