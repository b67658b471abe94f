"""``rota ps -o`` with sacct's accounting columns (elapsed, timelimit, start, maxrss and
GPU-hours) against a real server, and ``rota ps --watch`` piped: the table once, then a line
per change of a job's state."""

from __future__ import annotations

import json
import queue
import re
import subprocess
import threading
import time

from cli_support import cycle, ok
from commands import rota_command
from rota.core import JobState
from rota.core.decisions import Decisions, Reason, ReasonCode, Wait


def test_accounting_columns_of_a_running_and_a_pending_job(server):
    run = json.loads(ok(server.rota("run", "--gpus", "2", "--walltime", "1h", "--json", "--",
                                    "sleep", "1")))["id"]
    cycle(server)
    server.store.transition(run, JobState.RUNNING)
    waits = json.loads(ok(server.rota("run", "--gpus", "4", "--json", "--", "true")))["id"]
    now = server.store.clock()
    server.store.apply(Decisions(waits=[Wait(waits, (Reason(ReasonCode.RESOURCES),),
                                             now + 3900 + 30)]), now)
    table = ok(server.rota("ps", "-o", "id,state,elapsed,timelimit,start,maxrss,gpu-hours"))
    lines = {line.split()[0]: line.split() for line in table.splitlines()[1:]}
    assert table.split()[:7] == ["ID", "STATE", "ELAPSED", "TIMELIMIT", "START", "MAXRSS",
                                 "GPU-HOURS"]
    # running: its walltime; started seconds ago; 2 GPUs for seconds are 0.00 GPU-hours
    row = table.splitlines()[[line.split()[0] for line in table.splitlines()].index(run)]
    assert re.fullmatch(rf"{run}\s+running\s+\d+s\s+1h\s+(now|\d+s ago)\s+n/a\s+0\.00", row)
    # pending: no walltime, no elapsed time, no GPU-hours, its estimated start
    assert lines[waits][1:4] == ["pending", "-", "none"]
    assert " ".join(lines[waits][4:6]) == "in 1h5m" and lines[waits][-2:] == ["n/a", "-"]


def test_ps_watch_piped_prints_the_table_then_each_change_of_state(server):
    job = json.loads(ok(server.rota("run", "--gpus", "1", "--json", "--", "true")))["id"]
    proc = subprocess.Popen([*rota_command(), "ps", "--watch", "--interval", "0.2"],
                            env=server.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()

    def line_with(*words: str) -> str:
        """The first line printed from now on that has every word; fails after 30 s."""
        deadline = time.monotonic() + 30
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line with {words} within 30 s") from None
            if all(w in line.split() for w in words):
                return line

    try:
        assert line_with("ID", "NAME").split()[:2] == ["ID", "NAME"]
        cycle(server)
        line = line_with(job, "pending", "scheduled")
        assert line.split()[1:] == [job, "pending", "->", "scheduled"], line
        assert time.strptime(line.split()[0], "%Y-%m-%dT%H:%M:%SZ")
        server.store.transition(job, JobState.RUNNING)
        server.store.transition(job, JobState.SUCCEEDED, exit_code=0)
        # no longer listed (finished): the state it ended in
        line = line_with(job, "succeeded")
        assert line.split()[1:] in ([job, "scheduled", "->", "succeeded"],
                                    [job, "running", "->", "succeeded"]), line
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_maxrss_is_the_peak_memory_of_the_latest_attempt_that_told_it(server):
    job = json.loads(ok(server.rota("run", "--gpus", "1", "--json", "--", "true")))["id"]
    cycle(server)
    server.store.transition(job, JobState.RUNNING)
    shown = ok(server.rota("ps", "-o", "id,maxrss")).splitlines()
    assert [line.split() for line in shown if line.split()[0] == job] == [[job, "n/a"]]
    server.store.transition(job, JobState.SUCCEEDED, exit_code=0, max_rss_kib=3 * 1024 * 1024)
    shown = ok(server.rota("ps", "-A", "-o", "id,maxrss")).splitlines()
    assert [line.split()[1:] for line in shown if line.split()[0] == job] == [["3", "GiB"]]
    attempts = json.loads(ok(server.rota("show", job, "--json")))
    assert attempts["history"][-1]["max_rss_kib"] == 3 * 1024 * 1024
