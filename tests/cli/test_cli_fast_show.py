"""``rota show`` through its fast path (``rota.cli.fast.show``) and through the Typer app, on
the same real server: the same output, error lines and exit status for a running, a pending
(with its reasons and estimate), a held, a failed and an array's job, and with ``--json``;
both build their lines with ``rota.cli.showrows``. The fast path loads none of typer, rich or
pydantic (rich only to lay out a table too wide for the terminal, as the Typer command does).
No timing is asserted: ``bench/cli.py`` measures it."""

from __future__ import annotations

import json
import sys

import pytest

from cli_support import FAST, TYPER, cycle, ok
from rota.backends.base import Handle, ReplicaHandle
from rota.backends.local import Proc
from rota.core import JobState
from rota.core.decisions import Decisions, Holder, Reason, ReasonCode, Wait
from test_cli_fast import DOMAIN, HEAVY, ROOT, rota_both, same
from terminal import on_terminal

DAYS = 3 * 86400 + 2 * 3600 + 1800  # the jobs' age: 3d2h for both runs of a command


@pytest.fixture(scope="module")
def shown(server, tmp_path_factory):
    """Jobs of each kind ``rota show`` tells apart, made 3 days and 2.5 hours ago."""
    real = server.store.clock
    server.store.clock = lambda: real() - DAYS
    try:
        return _made(server, tmp_path_factory.mktemp("show"))
    finally:
        server.store.clock = real


def _made(server, work) -> dict[str, str]:
    def run(*args):
        return json.loads(ok(server.rota("run", "--json", *args)))["id"]

    made = {"running": run("--gpus", "1", "--name", "train", "--walltime", "4h", "--", "python",
                           "train.py")}
    (work / "job.yaml").write_text("name: sweep\nproject: vision\nqueue: default\n"
                                   "entrypoint: python sweep.py\n")
    array = json.loads(ok(server.rota("submit", work / "job.yaml", "--array", "0-2",
                                      "--json")))
    made["array"] = str(array["id"] if "id" in array else array[0]["id"])
    cycle(server)
    server.store.transition(made["running"], JobState.RUNNING)
    failed = run("--name", "crash", "--", "python", "crash.py")
    cycle(server)
    (work / "out").write_text("starting\n")
    (work / "err").write_text("".join(f"line {k}\n" for k in range(14)) +
                              "ModuleNotFoundError: No module named 'torch'\n")
    handle = Handle("local", failed, str(work), (ReplicaHandle(0, "gpu-0", ref=Proc(
        4242, 1, str(work), str(work / "out"), str(work / "err")).ref()),),
        ref={"boot_id": "boot"})
    server.store.transition(failed, JobState.RUNNING, backend_handle=handle.to_dict())
    server.store.transition(failed, JobState.FAILED, exit_code=3)
    made["failed"] = failed
    made["pending"] = run("--gpus", "4", "--name", "big", "--", "torchrun", "big.py")
    made["held"] = run("--gpus", "4", "--", "sleep", "1")
    server.store.hold(made["held"], "data not ready", by="alice")
    now = server.store.clock()
    server.store.apply(Decisions(waits=[Wait(made["pending"], (
        Reason(ReasonCode.RESOURCES),
        Reason(ReasonCode.ESTIMATE, holders=(Holder(made["running"], ("gpu-0",),
                                                    now + DAYS + 3930, True),))),
        now + DAYS + 3930)]), now)
    return made


@pytest.mark.parametrize("kind", ["running", "pending", "held", "failed", "array"])
def test_show_prints_what_the_typer_command_prints(server, tmp_path, shown, kind):
    out = same(server, tmp_path, "show", shown[kind], allowed=("rota.core",))
    assert out.returncode == 0 and out.stdout.startswith(f"Job {shown[kind]}")


def test_show_in_detail(server, tmp_path, shown):
    pending = same(server, tmp_path, "show", shown["pending"], allowed=("rota.core",)).stdout
    assert "Why pending (the latest scheduling cycle):" in pending
    assert "Estimated start: in 1h5m" in pending and "held by 1 on gpu-0" in pending
    failed = same(server, tmp_path, "show", shown["failed"], allowed=("rota.core",)).stdout
    assert "failed, exit code 3" in failed
    assert failed.count("  line ") == 9 and "ModuleNotFoundError" in failed
    running = same(server, tmp_path, "show", shown["running"], allowed=("rota.core",)).stdout
    assert "Placement: gpu-0: GPU " in running and "Attempts" in running and "Events" in running
    held = same(server, tmp_path, "show", shown["held"], allowed=("rota.core",)).stdout
    assert "Held:      data not ready (held by alice)" in held


@pytest.mark.parametrize("kind", ["running", "pending", "failed"])
def test_show_json_is_the_typer_commands(server, tmp_path, shown, kind):
    out = same(server, tmp_path, "show", shown[kind], "--json")
    assert json.loads(out.stdout)["id"] == shown[kind]


@pytest.mark.parametrize("width", ["40", "72"])
def test_a_narrow_terminal_gets_the_same_lines(server, tmp_path, shown, width):
    # sentences wrap alike; a table too wide is laid out by rich in both
    for kind in ("pending", "failed", "running"):
        same(server, tmp_path, "show", shown[kind], allowed=("rota.core", "rich"),
             COLUMNS=width)


def test_a_job_of_another_project_an_unknown_one_and_a_bad_id_fail_alike(server, tmp_path,
                                                                         shown):
    for args in (["show", "999999"], ["show", "x"]):
        out = same(server, tmp_path, *args, allowed=DOMAIN)
        assert out.returncode in (1, 2) and out.stderr.startswith("error: ")
    theirs = same(server, tmp_path, "show", shown["running"], user="bob", allowed=DOMAIN)
    assert (theirs.returncode, theirs.stderr) == (1, f"error: no job '{shown['running']}'\n")


@pytest.mark.parametrize("args", [["show"], ["show", "1", "2"], ["show", "--help"],
                                  ["show", "1", "--jsn"], ["show", "--json=yes", "1"]],
                         ids=lambda a: " ".join(a))
def test_what_the_fast_parser_does_not_know_goes_to_typer(server, tmp_path, args):
    fast, typer, loaded = rota_both(server, tmp_path, *args)
    assert (fast.stdout, fast.stderr, fast.returncode) == \
        (typer.stdout, typer.stderr, typer.returncode)
    assert "typer" in loaded


def test_without_a_server_both_say_so(server, tmp_path):
    out = same(server, tmp_path, "show", "1", allowed=DOMAIN, ROTA_URL="http://127.0.0.1:1")
    assert out.returncode == 1 and out.stderr.startswith("error: ")


def test_the_fast_path_is_taken_and_loads_no_heavy_module(server, tmp_path, shown):
    fast, _, loaded = rota_both(server, tmp_path, "show", shown["pending"])
    assert fast.returncode == 0
    assert [m for m in HEAVY if m in loaded] == []
    assert "rota.cli.showrows" in loaded and "rota.cli.detail" not in loaded


def test_a_terminal_gets_the_same_bold_title_and_headings(server, tmp_path, shown):
    """Under a pseudo-terminal, as a person at a shell runs it."""
    env = server.env(TERM="xterm", COLUMNS="200")
    for key in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        env.pop(key, None)
    for kind in ("running", "failed"):
        outputs = [on_terminal([sys.executable, "-c", code, *extra, "show", shown[kind]],
                               env, ROOT, lambda _: None)[0].decode()
                   for code, extra in ((FAST, [str(tmp_path / "modules.json")]), (TYPER, []))]
        assert outputs[0] == outputs[1]
        assert f"\x1b[1mJob {shown[kind]}" in outputs[0] and "\x1b[1mEvents" in outputs[0]
        assert "rich" not in json.loads((tmp_path / "modules.json").read_text())
