"""Records parsed from output captured on the fixture cluster (Slurm 22.05.8, data/)."""

import json

import pytest

from rota.backends.slurm.records import (
    NodeAllocation, SlurmPartition, parse_duration, parse_partitions, parse_sacct,
    parse_sacct_exit_codes, parse_sinfo, parse_squeue, with_exit_codes,
)
from rota.backends.slurm.states import ExitCode, JobPhase
from rota.backends.slurm.text import Gres, SlurmOutputError
from slurmkit import data


def test_sinfo_nodes_with_gres_partitions_and_states():
    nodes = {n.name: n for n in parse_sinfo(data("sinfo.json"))}
    assert list(nodes) == ["node1", "node2", "node3", "node4"]
    one = nodes["node1"]
    assert (one.cpus, one.memory_mib, one.threads_per_core, one.address) == (16, 64000, 1,
                                                                             "127.0.0.1")
    assert one.partitions == ("debug",) and nodes["node3"].partitions == ("debug", "high")
    assert one.gres == (Gres("gpu", "h100", 4), Gres("shard", "h100", 16))
    assert one.gres_used[0] == Gres("gpu", "h100", 3, (0, 1, 2))
    assert nodes["node3"].gres[0] == Gres("gpu", "a100", 4)
    assert (nodes["node3"].state, nodes["node3"].reason) == ("down", "bad gpu")
    assert (nodes["node4"].state, nodes["node4"].flags) == ("idle", frozenset({"DRAIN"}))
    assert nodes["node4"].reason == "disk full"


def test_squeue_jobs_with_allocations_per_node():
    jobs = {j.id: j for j in parse_squeue(data("squeue.json"))}
    foreign = jobs[8]
    assert (foreign.name, foreign.state, foreign.phase) == ("train-foreign", "RUNNING",
                                                            JobPhase.RUNNING)
    assert foreign.allocations == (NodeAllocation("node1", 4, 4000, (Gres("gpu", "h100", 2,
                                                                           (0, 1)),)),)
    assert foreign.exit is None and foreign.end_time is None and foreign.start_time
    gang = jobs[10]
    assert (gang.name, gang.comment, gang.nodes) == ("rota-7-1", "rota:7", ("node1", "node2"))
    # gres_detail lists the nodes in the order of job_resources: node1 got GPU 2, node2 GPU 1
    assert [(a.node, a.gres[0].indices) for a in gang.allocations] == [("node1", (2,)),
                                                                      ("node2", (1,))]
    assert gang.gres == (Gres("gpu", None, 2),)
    assert jobs[9].allocations[0].gres == (Gres("shard", None, 1, (0,)),)


def test_squeue_ended_and_pending_jobs():
    jobs = {j.id: j for j in parse_squeue(data("squeue.json"))}
    assert jobs[11].exit == ExitCode(3) and jobs[11].phase is JobPhase.EXITED   # exit 3
    assert jobs[12].exit == ExitCode(0, 9)                                      # kill -9 $$
    assert jobs[6].state == "CANCELLED" and jobs[6].exit == ExitCode(0, 15)
    assert jobs[11].end_time and jobs[11].start_time
    waits = jobs[13]
    assert (waits.phase, waits.reason, waits.allocations) == (JobPhase.PENDING, "Resources", ())
    assert waits.start_time is None and waits.exit is None and waits.time_limit_s == 30 * 60


def test_sacct_json_exit_codes_are_wrong_in_22_05_so_they_come_from_the_parseable_format():
    raw = json.loads(data("sacct.json"))
    failed = next(j for j in raw["jobs"] if j["name"] == "exit3")
    assert failed["exit_code"] == {"status": "SUCCESS", "return_code": 0}  # it exited 3
    jobs = {j.id: j for j in parse_sacct(data("sacct.json"))}
    assert all(j.exit is None for j in jobs.values())
    codes = parse_sacct_exit_codes(data("sacct-exit-codes.txt"))
    merged = {j.id: j for j in with_exit_codes(tuple(jobs.values()), codes)}
    assert merged[11].exit == ExitCode(3) and merged[12].exit == ExitCode(0, 9)
    gang = merged[14]
    assert (gang.name, gang.comment, gang.exit) == ("rota-7-2", "rota:7", ExitCode(4))
    ranks = {s.name: s for s in gang.steps}
    assert ranks["rank-0"].exit == ExitCode(0) and ranks["rank-0"].nodes == ("node1",)
    assert ranks["rank-1"].exit == ExitCode(4) and ranks["rank-1"].state == "FAILED"
    assert ranks["batch"].exit == ExitCode(4)
    assert gang.gres == (Gres("gpu", None, 2),) and gang.nodes == ("node1", "node2")


def test_sacct_exit_codes_lines():
    assert parse_sacct_exit_codes("7|4:0\n7.batch|0:15\n\n") == {
        "7": ExitCode(4), "7.batch": ExitCode(0, 15)}
    with pytest.raises(SlurmOutputError, match="line 1"):
        parse_sacct_exit_codes("7 4:0")


def test_an_empty_or_unreadable_exit_code_is_unknown():
    # sacct's lines for a job whose node failed: its steps have no exit code
    text = "1|0:0\n1.batch|\n1.0|\n2|?\n2.0|3:0\n"
    assert parse_sacct_exit_codes(text) == {"1": ExitCode(0), "2.0": ExitCode(3)}


def test_partitions_with_default_tier_and_nodes():
    assert parse_partitions(data("partitions.txt")) == (
        SlurmPartition("debug", True, True, None, 1, ("node1", "node2", "node3", "node4")),
        SlurmPartition("high", False, True, None, 10, ("node3", "node4")))


@pytest.mark.parametrize("text, seconds", [
    ("infinite", None), ("UNLIMITED", None), ("30", 1800), ("30:15", 1815),
    ("2:00:00", 7200), ("1-02:03:04", 93784), ("1-02", 93600),
])
def test_slurm_durations(text, seconds):
    assert parse_duration(text, "x") == seconds


@pytest.mark.parametrize("text, where", [
    ("not json", "not JSON"),
    ('{"meta": {}}', "no 'nodes' list"),
    ('{"nodes": [], "errors": [{"error": "x"}]}', "reports errors"),
    ('{"nodes": [{"name": "n1"}]}', "sinfo node n1.features: is missing"),
])
def test_unreadable_output_is_an_error_saying_where(text, where):
    with pytest.raises(SlurmOutputError, match=where):
        parse_sinfo(text)


def test_a_wrongly_typed_field_names_the_job_and_field():
    doc = json.loads(data("squeue.json"))
    doc["jobs"][0]["exit_code"] = "zero"
    doc["jobs"][0]["job_state"] = "FAILED"
    with pytest.raises(SlurmOutputError, match=r"squeue job \d+\.exit_code: unexpected"):
        parse_squeue(json.dumps(doc))


def test_sacct_finding_nothing_is_an_empty_answer_and_other_errors_are_errors():
    # sacct --json for a name no job has (Slurm 22.05)
    nothing = ('{"meta": {}, "errors": [{"description": "Nothing found", "error_number": 9003,'
               ' "error": "Nothing found with query", "source": "slurmdb_jobs_get"}], "jobs": []}')
    assert parse_sacct(nothing) == ()
    broken = nothing.replace("9003", "1")
    with pytest.raises(SlurmOutputError, match="reports errors"):
        parse_sacct(broken)
