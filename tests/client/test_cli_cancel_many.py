"""``rota cancel`` as ``scancel`` chooses jobs: a whole array by its ID, an array's tasks as
``rota ps`` prints them (``88[3-9]``), and filters (``--user``, ``--state``, ``--name``,
``--queue``), alone or narrowing IDs; ``rota delete`` is the same command. Against a real
server (no control loop runs: the jobs stay pending); the selection rules alone below."""

from __future__ import annotations

import json

import pytest

from cli_support import ok
from rota.cli.selection import Filters, Mistake, Wanted, choose, parse


def submit_array(server, tmp_path, name: str, tasks: str, user: str = "alice") -> list[dict]:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\nentrypoint: 'true'\n")
    ok(server.rota("submit", path, "--array", tasks, user=user))
    jobs = json.loads(ok(server.rota("ps", "--json", "--limit", "10000", user=user)))
    return sorted((j for j in jobs if j["name"] == name), key=lambda j: j["array_index"])


def states(server, jobs: list[dict]) -> list[str]:
    return [str(server.store.get_job(j["id"]).state) for j in jobs]


def test_an_arrays_tasks_then_the_rest_of_it(server, tmp_path):
    tasks = submit_array(server, tmp_path, "sweep", "0-5")
    array = tasks[0]["array_id"]
    out = ok(server.rota("cancel", f"{array}[2-3]"))
    assert out.splitlines() == [f"Cancelled job {tasks[2]['id']}.",
                                f"Cancelled job {tasks[3]['id']}."]
    assert states(server, tasks) == ["pending", "pending", "cancelled", "cancelled",
                                     "pending", "pending"]
    ok(server.rota("delete", array))  # the array's ID: every task left, as scancel 88
    assert set(states(server, tasks)) == {"cancelled"}


def test_the_first_task_alone_and_a_list_of_indices(server, tmp_path):
    tasks = submit_array(server, tmp_path, "grid", "0-4")
    array = tasks[0]["array_id"]
    ok(server.rota("cancel", f"{array}[0]", f"{array}[2,4%2]"))
    assert states(server, tasks) == ["cancelled", "pending", "cancelled", "pending",
                                     "cancelled"]
    ok(server.rota("cancel", array))


def test_filters_choose_among_the_jobs_one_may_see(server, tmp_path):
    mine = submit_array(server, tmp_path, "mine", "0-1")
    other = submit_array(server, tmp_path, "other", "0-1")
    theirs = submit_array(server, tmp_path, "mine", "0-1", user="bob")
    ok(server.rota("cancel", "--name", "mine"))  # alice sees only her project's jobs
    assert set(states(server, mine)) == {"cancelled"}
    assert set(states(server, other)) == set(states(server, theirs)) == {"pending"}
    narrowed = server.rota("cancel", other[0]["id"], "--name", "mine")
    assert narrowed.returncode == 1 and "no unfinished job you may see matches it and the " \
        "filters" in narrowed.stderr
    assert set(states(server, other)) == {"pending"}
    ok(server.rota("cancel", "--user", "bob", "--state", "pending", user="root"))
    assert set(states(server, theirs)) == {"cancelled"}
    ok(server.rota("cancel", "--name", "other", "--queue", "default"))
    assert set(states(server, other)) == {"cancelled"}


def test_many_jobs_are_counted_not_listed(server, tmp_path):
    tasks = submit_array(server, tmp_path, "many", "0-11")
    out = ok(server.rota("cancel", tasks[0]["array_id"]))
    assert out.strip() == "Cancelled 12 jobs."


@pytest.mark.parametrize("args, status, said", [
    ([], 2, "name the jobs to cancel: IDs (88), an array's tasks (88[3-9]), a job file (-f), or "
              "a filter"),
    (["88[x]"], 2, "'88[x]': expected a job ID (88) or an array's tasks"),
    (["88[9-3]"], 2, "the range 9-3 is empty"),
    (["999999[1-2]"], 1, "error: job 999999[1-2]: no unfinished job you may see matches it"),
], ids=["nothing", "not-an-id", "empty-range", "no-such-array"])
def test_what_names_no_job_is_said(server, args, status, said):
    result = server.rota("cancel", *args)
    assert result.returncode == status and said in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_a_finished_job_named_by_id_gets_the_servers_answer(server, tmp_path):
    (job,) = submit_array(server, tmp_path, "once", "0")
    ok(server.rota("cancel", job["id"]))
    again = server.rota("cancel", job["id"], "--state", "pending")
    assert again.returncode == 1 and job["id"] in again.stderr


# -- the rules alone -----------------------------------------------------------------------------

def test_parse_reads_ids_and_tasks_as_rota_ps_prints_them():
    assert parse(["7", "88[0-2,5]", "88[9%3]", "7"]) == Wanted(("7",), {"88": frozenset({0, 1, 2, 5, 9})})
    with pytest.raises(Mistake):
        parse(["88[1-]"])


def test_choose_takes_whole_arrays_and_says_what_matched_nothing():
    jobs = [{"id": "88", "array_id": "88", "array_index": 0, "name": "a", "state": "pending"},
            {"id": "89", "array_id": "88", "array_index": 1, "name": "a", "state": "running"},
            {"id": "90", "array_id": None, "array_index": None, "name": "b", "state": "pending"}]
    assert choose(jobs, parse(["88"]), Filters()) == (["88", "89"], [])
    assert choose(jobs, parse(["88[1]", "91", "90[0]"]), Filters()) == (["89"], ["91", "90[0]"])
    assert choose(jobs, Wanted(), Filters(states=("pending",))) == (["88", "90"], [])
    assert choose(jobs, parse(["88"]), Filters(name="b")) == ([], ["88"])  # the filters keep none


def test_cancelling_a_finished_job_says_how_it_ended(server, tmp_path):
    from rota.core import JobState
    (job,) = submit_array(server, tmp_path, "ended", "0")
    server.store.transition(job["id"], JobState.FAILED)
    again = server.rota("cancel", job["id"])
    assert again.returncode == 1 and f"job {job['id']} has already failed" in again.stderr


def test_a_submit_past_the_projects_hard_budget_says_it_waits(server, tmp_path):
    """The job is accepted and waits (the control loop holds it with reason budget); the
    submit says so at once, on stderr, through the fast path and the Typer command alike."""
    server.store.set_budget("speech", None, 0.0)  # bob's project: 0 GPU-hours used is at it
    try:
        for args in (["run", "--", "true"], ["run", "--gpus", "1", "--workdir", "/srv/x", "--",
                                              "true"]):
            result = server.rota(*args, user="bob")
            assert result.returncode == 0 and result.stdout.startswith("Submitted job ")
            assert "warning: project speech has used 0.00 GPU-hours in " in result.stderr
            assert "at or past its hard budget of 0: this job waits until " in result.stderr
            job = result.stdout.split()[2]
            ok(server.rota("cancel", job, user="bob"))
        quiet = server.rota("run", "--", "true")  # alice's project has no budget
        assert quiet.returncode == 0 and "warning" not in quiet.stderr
        ok(server.rota("cancel", quiet.stdout.split()[2]))
    finally:
        server.store.set_budget("speech", None, None)


def test_a_job_file_names_the_jobs_it_made_as_kubectl_delete_f(server, tmp_path):
    path = tmp_path / "train.yaml"
    path.write_text("name: train\nproject: vision\nentrypoint: 'true'\n")
    ok(server.rota("submit", path, "--array", "0-2"))
    other = submit_array(server, tmp_path, "eval", "0")
    ok(server.rota("delete", "-f", path))
    jobs = json.loads(ok(server.rota("ps", "--json", "--limit", "10000")))
    assert not [j for j in jobs if j["name"] == "train"]
    assert states(server, other) == ["pending"]
    nameless = tmp_path / "anon.yaml"
    nameless.write_text("entrypoint: 'true'\n")
    refused = server.rota("delete", "-f", nameless)
    assert refused.returncode == 2 and "names no job (name:)" in refused.stderr
    clash = server.rota("cancel", "-f", path, "--name", "eval")
    assert clash.returncode == 2 and "--name: 'eval' is not the file's 'train'" in clash.stderr
    ok(server.rota("cancel", other[0]["id"]))


def test_update_changes_a_pending_job_as_scontrol_update(server, tmp_path):
    """A member lowers its job's walltime or priority and moves it to another queue its
    project may use; raising either is an operator's; a running job is not changed."""
    from rota.core import Queue
    server.store.put_queue(Queue("spare"))
    path = tmp_path / "long.yaml"
    path.write_text("name: long\nentrypoint: 'true'\nwalltime: 4h\npriority: 5\n")
    job = json.loads(ok(server.rota("submit", path, "--json")))["id"]
    out = ok(server.rota("update", job, "--walltime", "2h", "--priority", "3", "--queue",
                         "spare"))
    assert out.startswith(f"Updated job {job}: walltime 4h -> 2h, priority 5 -> 3, queue "
                          "default -> spare.")
    rec = server.store.get_job(job)
    assert (rec.job.walltime_s, rec.job.priority, rec.job.queue) == (7200.0, 3, "spare")
    raised = server.rota("update", job, "--walltime", "8h")
    assert raised.returncode == 2 and "only an operator may raise a walltime" in raised.stderr
    higher = server.rota("update", job, "--priority", "9")
    assert higher.returncode == 2 and "only an operator may raise a priority" in higher.stderr
    ok(server.rota("update", job, "--priority", "9", user="root"))
    assert server.store.get_job(job).job.priority == 9
    nowhere = server.rota("update", job, "--queue", "nosuch")
    assert nowhere.returncode == 2 and "no queue named 'nosuch'" in nowhere.stderr
    empty = server.rota("update", job)
    assert empty.returncode == 2 and "--walltime, --priority or --queue" in empty.stderr
    ok(server.rota("cancel", job))
    ended = server.rota("update", job, "--priority", "1")
    assert ended.returncode == 1 and "only a pending job can be changed" in ended.stderr
