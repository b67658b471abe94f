"""A submit acknowledged is a submit kept: kill -9 the process in the middle of a burst of
concurrent submits (group commit at work), reopen the database, and every id the process had
acknowledged is there.

The writing process prints an id only after ``Store.submit`` returned it, as the API answers a
request only then. SQLite runs as in production (WAL, ``synchronous=FULL``); the kill hits the
process, not the machine (see ``rota.store.engine`` for what a machine crash keeps).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from rota.store import JobFilter, Store
from storekit import seed

WRITER = textwrap.dedent("""
    import sys, threading
    sys.path[:0] = sys.argv[2:]
    from rota.store import Store
    from storekit import submission

    store = Store.open(sys.argv[1])
    lock = threading.Lock()

    def work():
        while True:
            job_id = store.submit(submission(1))
            with lock:
                sys.stdout.write(job_id + "\\n")
                sys.stdout.flush()

    for _ in range(8):
        threading.Thread(target=work, daemon=True).start()
    threading.Event().wait()
""")
TESTS = Path(__file__).resolve().parent


def test_every_acknowledged_submit_survives_a_kill_9(db_url, clock, tmp_path):
    seed(Store.open(db_url, clock=clock)).close()
    proc = subprocess.Popen([sys.executable, "-c", WRITER, db_url, str(TESTS),
                             str(TESTS.parent)], stdout=subprocess.PIPE, text=True)
    acked: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while len(acked) < 200 and time.monotonic() < deadline:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            if not line:
                break
            acked.append(line.strip())
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    # what was printed before the kill but not yet read is acknowledged too
    acked += [line.strip() for line in proc.stdout.read().splitlines() if line.strip()]  # type: ignore[union-attr]
    assert len(acked) >= 200, f"the writer acknowledged only {len(acked)} submits"
    stored: set[str] = set()
    with Store.open(db_url, clock=clock) as again:
        after = None
        while True:
            page = again.list_jobs(JobFilter(), limit=1000, after=after)
            stored |= {r.id for r in page.items}
            if (after := page.next_after) is None:
                break
    assert len(set(acked)) == len(acked)
    assert set(acked) <= stored
