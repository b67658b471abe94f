"""``rota ps``, ``rota logs``, ``rota queues`` and ``rota nodes`` through their fast path (``rota.cli.fast``) and through the Typer
app (``rota.cli.app``), on the same real server: the same output, error lines and exit status,
so that the two cannot drift. And the fast path is taken: typer, rich, pydantic, rota's domain
model and ``http.client`` are not imported by it. No timing is asserted: ``bench/cli.py``
measures it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_support import FAST, TYPER, cycle, ok
from rota.backends.base import Handle, ReplicaHandle
from rota.backends.local import Proc
from rota.cli import jobrows
from rota.core import GpuDevice, JobState, Node, jobwords
from terminal import on_terminal

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("typer", "rich", "pydantic", "rota.spec", "rota.scheduler")
# loaded by the fast commands only to say what failed (rota.client.errors)
DOMAIN = ("rota.core", "rota.client.errors", "rota.client.http", "http.client")
LIGHT = ("rota.core.shortforms", "rota.core.nodelabels")


def rota_both(server, tmp_path: Path, *args: str, user: str = "alice", **env: str):
    """The command run by ``main`` and by the Typer app; the first's loaded modules."""
    return run_both(server.env(user, **env), tmp_path, *args)


def run_both(full: dict[str, str], tmp_path: Path, *args: str):
    where = tmp_path / "modules.json"
    fast = subprocess.run([sys.executable, "-c", FAST, str(where), *args], capture_output=True,
                          text=True, timeout=60, cwd=ROOT, env=full)
    typer = subprocess.run([sys.executable, "-c", TYPER, *args], capture_output=True,
                           text=True, timeout=60, cwd=ROOT, env=full)
    loaded = set(json.loads(where.read_text()))
    # rota.core stands for its domain model: the package's __init__ loads none of it, and the
    # short forms of rota ps (rota.core.shortforms) and the node labels (rota.core.nodelabels)
    # import nothing
    if not any(m.startswith("rota.core.") and m not in LIGHT for m in loaded):
        loaded.discard("rota.core")
    return fast, typer, loaded


def same(server, tmp_path: Path, *args: str, allowed: tuple[str, ...] = (), **env: str):
    """Both runs print the same and exit the same, and the first loaded none of ``HEAVY`` and
    ``DOMAIN`` but what is ``allowed``; a second try where they differ, for an ``AGE`` that
    ticked over between the two."""
    for _ in range(2):
        fast, typer, loaded = rota_both(server, tmp_path, *args, **env)
        if (fast.stdout, fast.stderr, fast.returncode) == \
                (typer.stdout, typer.stderr, typer.returncode):
            break
    assert (fast.stdout, fast.stderr, fast.returncode) == \
        (typer.stdout, typer.stderr, typer.returncode)
    assert "Traceback" not in fast.stderr
    assert [m for m in HEAVY + DOMAIN if m in loaded and m not in allowed] == [], args
    return fast


@pytest.fixture(scope="module")
def jobs(server, tmp_path_factory):
    """Jobs of every shape: whole, fractional with GPU memory, a gang, no GPU, an array, one
    placed by a cycle, one with output in its logs that ended with exit code 3. The store
    stamps them 3 days and 2.5 hours ago, so that their AGE (``3d2h``) is the same for both
    runs of a command."""
    real = server.store.clock
    server.store.clock = lambda: real() - (3 * 86400 + 2 * 3600 + 1800)
    try:
        return _made(server, tmp_path_factory)
    finally:
        server.store.clock = real


def _made(server, tmp_path_factory) -> dict[str, str]:
    def run(*args):
        return json.loads(ok(server.rota("run", "--json", *args)))["id"]

    made = {"whole": run("--gpus", "1", "--name", "train", "--", "python", "train.py"),
            "half": run("--gpus", "0.5", "--gpu-memory", "20Gi", "--", "jupyter", "lab"),
            "gang": run("--gpus", "2", "--replicas", "2", "--", "torchrun", "x.py"),
            "cpu": run("--cpu", "2", "--memory", "1536Mi", "--", "echo", "hi")}
    work = tmp_path_factory.mktemp("array")
    (work / "job.yaml").write_text("name: sweep\nproject: vision\nqueue: default\n"
                                   "entrypoint: python sweep.py\n")
    ok(server.rota("submit", work / "job.yaml", "--array", "0-4%2"))
    cycle(server)
    logged = run("--name", "echo", "--", "echo", "hello")
    cycle(server)
    (work / "out").write_text("hello from rank 0\nsecond line\n")
    (work / "err").write_text("a warning\n")
    handle = Handle("local", logged, str(work), (ReplicaHandle(0, "gpu-0", ref=Proc(
        4242, 1, str(work), str(work / "out"), str(work / "err")).ref()),),
        ref={"boot_id": "boot"})
    server.store.transition(logged, JobState.RUNNING, backend_handle=handle.to_dict())
    server.store.transition(logged, JobState.FAILED, exit_code=3)
    made["logged"] = logged
    made["pending"] = run("--gpus", "4", "--", "sleep", "1")
    return made


@pytest.mark.parametrize("args", [
    ["ps"], ["ps", "-A"], ["ps", "-A", "-o", "wide"], ["ps", "-A", "--json"],
    ["ps", "-o", "json"], ["ps", "-A", "-o", "id,state,reason,exit,cpu,memory,priority"],
    ["ps", "--state", "pending,running"], ["ps", "--state=running", "--state", "failed"],
    ["ps", "-Ao", "wide"], ["ps", "-owide"], ["ps", "--project", "speech"], ["ps", "-A", "-u",
                                                                           "bob"],
    ["ps", "--queue", "nope"], ["ps", "-A", "--limit", "3"], ["ps", "-A", "--limit", "1000"],
    ["ps", "-o", "bogus"], ["ps", "-o", ","], ["ps", "--after", "x"],
    ["ps", "-A", "-o", "id,state,elapsed,timelimit,start,maxrss,gpu-hours"],
], ids=lambda a: " ".join(a))
def test_ps_prints_what_the_typer_command_prints(server, tmp_path, jobs, args):
    same(server, tmp_path, *args)


def test_ps_pages_with_a_note_that_names_the_next_page(server, tmp_path, jobs):
    first = same(server, tmp_path, "ps", "-A", "--limit", "2", "--json")
    shown = json.loads(first.stdout)
    assert len(shown) == 2
    after = shown[-1]["id"]
    assert first.stderr == jobrows.more_line(2, after) + "\n"
    rest = json.loads(same(server, tmp_path, "ps", "-A", "--after", after, "--json").stdout)
    everything = json.loads(ok(server.rota("ps", "-A", "--json")))
    assert shown + rest == everything
    assert [int(j["id"]) for j in everything] == sorted((int(j["id"]) for j in everything),
                                                         reverse=True)


@pytest.mark.parametrize("width", ["30", "60", "90"])
def test_a_table_too_wide_for_the_terminal_is_laid_out_by_rich_in_both(server, tmp_path, jobs,
                                                                        width):
    out = same(server, tmp_path, "ps", "-A", "-o", "wide", allowed=("rich",), COLUMNS=width)
    assert out.stdout.startswith("ID")


def test_a_terminal_gets_the_same_bold_header(server, tmp_path, jobs):
    """Under a pseudo-terminal, as a person at a shell runs it."""
    env = server.env(TERM="xterm", COLUMNS="200")
    for key in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        env.pop(key, None)
    args = ["ps", "-A", "-o", "id,name,state,gpus,where"]
    outputs = [on_terminal([sys.executable, "-c", code, *extra, *args], env, ROOT,
                           lambda _: None)[0].decode()
               for code, extra in ((FAST, [str(tmp_path / "modules.json")]), (TYPER, []))]
    assert outputs[0] == outputs[1]
    assert "\x1b[1mID" in outputs[0]
    assert "rich" not in json.loads((tmp_path / "modules.json").read_text())


@pytest.mark.parametrize("args", [
    ["queues"], ["queues", "-o", "wide"], ["queues", "--output=wide"], ["queues", "--json"],
    ["nodes"], ["nodes", "-o", "wide"], ["nodes", "-owide"], ["nodes", "--json"],
    ["nodes", "-o", "json"],
], ids=lambda a: " ".join(a))
def test_queues_and_nodes_print_what_the_typer_commands_print(server, tmp_path, jobs, args):
    # a wide table may be wider than the terminal: rich lays it out then, in both
    wide = any("wide" in a for a in args)
    out = same(server, tmp_path, *args, allowed=("rich",) if wide else ())
    assert out.stdout.startswith(("[", "QUEUE", "NODE"))


@pytest.mark.parametrize("width", ["40", "70"])
@pytest.mark.parametrize("command", ["queues", "nodes"])
def test_queues_and_nodes_too_wide_are_laid_out_by_rich_in_both(server, tmp_path, jobs, command,
                                                                 width):
    same(server, tmp_path, command, "-o", "wide", allowed=("rich",), COLUMNS=width)


def test_the_notes_under_the_nodes_are_the_same(server, tmp_path, jobs):
    """A node whose limits and GPU-memory shares are not enforced: the notes under the table,
    wrapped alike."""
    labels = {"rota.dev/job-limits": "not enforced: no cgroup v2 here, see rota up --help",
              "rota.dev/gpu-memory-enforcement": "not enforced (NVML cannot read processes)"}
    devices = tuple(GpuDevice(i, "H100-80GB", 81920) for i in range(4))
    server.store.upsert_nodes([Node("gpu-0", 64_000, 512 * 1024, devices, labels=labels)],
                              "local")
    try:
        out = same(server, tmp_path, "nodes")
        same(server, tmp_path, "nodes", allowed=("rich",), COLUMNS="80")  # notes wrapped
    finally:
        server.store.upsert_nodes([Node("gpu-0", 64_000, 512 * 1024, devices)], "local")
    assert "warning: gpu-0: jobs' CPU, memory and process limits: not enforced" in out.stdout
    assert "warning: gpu-0: GPU-memory shares are not enforced" in out.stdout


@pytest.mark.parametrize("args", [["queues", "-o", "bogus"], ["nodes", "-o", "tall"]])
def test_queues_and_nodes_leave_a_bad_output_to_typer(server, tmp_path, args):
    fast, typer, _ = rota_both(server, tmp_path, *args)
    assert (fast.stdout, fast.stderr, fast.returncode) == \
        (typer.stdout, typer.stderr, typer.returncode) and typer.returncode == 2


@pytest.mark.parametrize("extra", [[], ["--stdout"], ["--stderr"], ["--tail", "1"], ["-f"],
                                   ["--follow", "--stderr"], ["--replica", "3"], ["--tail=0"]],
                         ids=lambda a: " ".join(a) or "both")
def test_logs_print_what_the_typer_command_prints(server, tmp_path, jobs, extra):
    same(server, tmp_path, "logs", jobs["logged"], *extra,
         allowed=DOMAIN if "--replica" in extra else ())  # replica 3: the server says no


def test_logs_in_detail(server, tmp_path, jobs):
    both = same(server, tmp_path, "logs", jobs["logged"])
    assert (both.stdout, both.stderr) == ("hello from rank 0\nsecond line\n", "a warning\n")
    followed = same(server, tmp_path, "logs", "-f", jobs["logged"])
    assert followed.returncode == 3 and "exit code 3" in followed.stderr
    assert same(server, tmp_path, "logs", jobs["logged"], "--tail", "1").stdout == \
        "second line\n"


@pytest.mark.parametrize("args", [["logs", "999999"], ["logs", "x"], ["logs", "1", "--stdout",
                                                                       "--stderr"]],
                         ids=lambda a: " ".join(a))
def test_logs_fail_with_the_same_line(server, tmp_path, jobs, args):
    out = same(server, tmp_path, *args, allowed=DOMAIN)
    assert out.returncode in (1, 2) and out.stderr.startswith("error: ")


def test_logs_of_a_job_that_never_started(server, tmp_path, jobs):
    """The server answers no_logs: an error without --tail, nothing with it."""
    assert same(server, tmp_path, "logs", jobs["pending"], allowed=DOMAIN).returncode != 0
    assert same(server, tmp_path, "logs", jobs["pending"], "--tail", "5",
                allowed=DOMAIN).stdout == ""


@pytest.mark.parametrize("env", [{"ROTA_URL": "http://127.0.0.1:1"}, {"ROTA_URL": "ftp://x"},
                                 {"ROTA_TOKEN": "rota_not-a-token"}],
                         ids=["no-server", "bad-url", "bad-token"])
def test_failures_say_the_same_line_and_status(server, tmp_path, env):
    for args in (["ps"], ["logs", "1"]):
        out = same(server, tmp_path, *args, allowed=DOMAIN, **env)
        assert out.returncode in (1, 2) and out.stderr.startswith("error: ")


@pytest.mark.parametrize("args", [["ps", "--help"], ["ps", "--watch", "--interval", "0.01"],
                                  ["ps", "extra"], ["ps", "--limit", "0"], ["ps", "--nope"],
                                  ["ps", "--json=yes"], ["ps", "--limit", "1_0"],
                                  ["logs"], ["logs", "1", "2"], ["logs", "--help"],
                                  ["logs", "1", "--replica", "-1"]],
                         ids=lambda a: " ".join(a))
def test_what_the_fast_parser_does_not_know_goes_to_typer(server, tmp_path, args):
    fast, typer, loaded = rota_both(server, tmp_path, *args)
    assert (fast.stdout, fast.stderr, fast.returncode) == \
        (typer.stdout, typer.stderr, typer.returncode)
    assert "typer" in loaded


JOB_VIEWS = [
    {"request": {"gpu": {"count": 0, "share": 1000}, "cpu_milli": 500, "memory_mib": 512},
     "replicas": 1, "placement": None, "reason": "", "wait_reasons": []},
    {"request": {"gpu": {"count": 1, "share": 250, "memory_mib": 20480}, "cpu_milli": 1000,
                 "memory_mib": 81559}, "replicas": 1,
     "placement": [{"node": "n1", "devices": [{"index": 3, "milli": 250}]}], "reason": None,
     "wait_reasons": [{"code": "quota"}, {"code": "quota"}, {"code": "resources"}]},
    {"request": {"gpu": {"count": 4, "share": 1000}, "cpu_milli": 16000, "memory_mib": 2048},
     "replicas": 2, "placement": [{"node": "a", "devices": [{"index": i, "milli": 1000}
                                                            for i in range(4)]},
                                  {"node": "b", "devices": []}],
     "reason": "preempted", "wait_reasons": None},
]


@pytest.mark.parametrize("view", JOB_VIEWS, ids=["no-gpu", "share", "gang"])
def test_the_fast_columns_say_what_rota_core_jobwords_says(view):
    cells = jobrows.cells(("gpus", "where", "reason"), jobrows.BRIEF, [jobrows.brief(view)] * 2,
                          time.time())
    expected = [jobwords.gpus(view), jobwords.placement(view), jobwords.reason_column(view)]
    assert cells == [[e, e] for e in expected]  # the second job's worded as the first's
    from rota.core.wording import amount
    assert jobrows.memory(view["request"]["memory_mib"]) == \
        amount("memory", view["request"]["memory_mib"])


@pytest.mark.parametrize("seconds", [0, 0.4, 1, 59, 61, 3600, 5400, 86399, 90061, 10 ** 7])
def test_the_fast_age_is_rota_core_jobwords_age(seconds):
    """The AGE column (each age rounded to a second and worded once) says what jobwords says."""
    now = time.time()
    views = [jobrows.brief({**JOB_VIEWS[0], "submit_time": since})
             for since in (now - seconds, None, now - seconds)]
    expected = [jobwords.age(now - seconds, now), jobwords.age(None, now)]
    assert jobrows.cells(("age",), jobrows.BRIEF, views, now) == [expected + expected[:1]]


def test_https_verified_with_the_servers_certificate_and_refused_without(tmp_path):
    """A real ``rota up --tls-cert``: the fast commands check its certificate with the CA
    file of the credentials as the Typer ones do, and fail with the same line without it."""
    sys.path.insert(0, str(ROOT / "tests" / "e2e"))
    from serverkit import RotaServer, make_cert
    cert, key = make_cert(tmp_path, "server")
    other, _ = make_cert(tmp_path, "other")
    server = RotaServer(tmp_path, extra=("--tls-cert", str(cert), "--tls-key", str(key)),
                        verify=str(cert))
    try:
        server.start()
        env = {**server.env, "COLUMNS": "200"}
        for args in (["ps", "-A"], ["ps", "--json"]):
            fast, typer, loaded = run_both(env, tmp_path, *args)
            assert (fast.stdout, fast.stderr, fast.returncode) == \
                (typer.stdout, typer.stderr, typer.returncode) and fast.returncode == 0
            assert [m for m in HEAVY + DOMAIN if m in loaded] == []
        for wrong in ({"ROTA_CA_FILE": str(other)}, {"ROTA_CA_FILE": str(tmp_path / "none")}):
            fast, typer, _ = run_both({**env, **wrong}, tmp_path, "ps")
            assert (fast.stdout, fast.stderr, fast.returncode) == \
                (typer.stdout, typer.stderr, typer.returncode)
            assert fast.returncode in (1, 2) and fast.stderr.startswith("error: ")
    finally:
        server.close()


@pytest.mark.parametrize("argv, expected", [
    (["-Ao", "wide", "--limit=5"], {"all": True, "output": "wide", "limit": 5}),
    (["-owide", "--json"], {"output": "wide", "json": True}),
    (["--state", "a", "--state=b,c", "--project", "p"], {"state": ["a", "b,c"],
                                                        "project": ["p"]}),
    (["-u", "bob", "--user", "carol"], {"user": "carol"}),  # the last one wins, as in click
    (["--after", "12", "-A"], {"after": "12", "all": True}),
], ids=["cluster", "glued-value", "repeated", "last-wins", "after"])
def test_the_fast_parser_reads_options_as_click_does(argv, expected):
    from rota.cli.fast import PS, parse
    assert parse(argv, PS, 0) == {**expected, "arguments": []}


@pytest.mark.parametrize("argv", [
    ["--json=yes"], ["--watch"], ["-w"], ["--help"], ["extra"], ["--limit", "x"],
    ["--limit", "-1"], ["--queue"], ["--queue", "--json"], ["-Az"], ["--", "x"],
], ids=lambda a: " ".join(a))
def test_the_fast_parser_leaves_what_it_does_not_know_to_typer(argv):
    from rota.cli.fast import PS, Usage, parse
    with pytest.raises(Usage):
        parse(argv, PS, 0)


def test_the_fast_parser_takes_arguments_anywhere_and_after_a_double_dash():
    from rota.cli.fast import LOGS, parse
    assert parse(["-f", "12", "--tail", "3"], LOGS, 1) == {"follow": True, "tail": 3,
                                                          "arguments": ["12"]}
    assert parse(["--", "12"], LOGS, 1) == {"arguments": ["12"]}


def test_the_brief_values_the_typer_command_makes_are_in_the_servers_order():
    from rota.store.briefs import BRIEF_COLUMNS
    assert jobrows.BRIEF == BRIEF_COLUMNS


def test_a_table_reads_only_the_brief_values_it_asks_the_server_for():
    """``values_for``: for every column, and the sets of ``-o wide`` and the default, the
    cells of brief views cut down to the values asked for are those of whole ones (an array's
    tasks folded included)."""
    rows = [jobrows.brief({**view, "id": str(k), "name": f"n{k}", "project": "p",
                           "user": "u", "queue": "q", "state": "pending", "priority": 0,
                           "submit_time": 100.0, "exit_code": None,
                           "array_id": "7" if k > 2 else None, "array_index": k,
                           "array_limit": 2 if k > 2 else None})
            for k, view in enumerate(JOB_VIEWS * 2)]
    for names in [(n,) for n in jobrows.COLUMNS] + [jobrows.WIDE, jobrows.DEFAULT]:
        asked = jobrows.values_for(names)
        cut = [[r[jobrows.BRIEF.index(v)] for v in asked] for r in rows]
        assert jobrows.cells(names, asked, cut, 200.0) == \
            jobrows.cells(names, jobrows.BRIEF, rows, 200.0), names


@pytest.mark.parametrize("state,reason,word,text", [
    # launched, and its backend holds it unstarted: starting, in the backend's words
    ("scheduled", "starting: Slurm job 41 is pending (Resources)", "starting",
     "starting (Slurm job 41 is pending (Resources))"),
    ("scheduled", "", "scheduled", "scheduled"),
    ("running", "", "running", "running"),
    ("pending", "requeued: preempted", "pending", "pending (requeued: preempted)"),
], ids=["starting", "scheduled", "running", "pending"])
def test_a_job_its_backend_has_not_started_is_starting_in_ps_and_show(state, reason, word, text):
    view = {**JOB_VIEWS[0], "id": "1", "name": "n", "project": "p", "user": "u", "queue": "q",
            "state": state, "reason": reason, "priority": 0, "submit_time": 100.0,
            "exit_code": None, "array_id": None, "array_index": None, "array_limit": None}
    assert jobrows.cells(("state",), jobrows.BRIEF, [jobrows.brief(view)], 200.0) == [[word]]
    assert jobwords.state_text(view) == text
