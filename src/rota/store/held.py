"""The jobs that hold resources, as ``JobRecord``s cached by row version: the control loop
reads every one of them each pass, and few change between two passes.

Every write to a job row bumps its ``version`` (``rota.store.moves``) but two notes:
``billed_until`` (``marks.note_billed``: every running job, every few seconds) and the wait reasons
of a pending job (``cycle``). So ``HeldCache.held`` reads the id, version and
``billed_until`` of each job holding resources (one narrow query), whole rows only for the
jobs new or changed since the last call, and sets ``billed_until`` on the cached records
where it moved: what it returns is what reading every row would return.
"""

from __future__ import annotations

import threading
from dataclasses import replace

from sqlalchemy import Connection, select

from rota.core import JobState
from rota.store import convert
from rota.store.records import JobRecord
from rota.store.schema import jobs

HOLDING = sorted(str(s) for s in JobState if s.holds_resources)
CHUNK = 500  # ids per ``IN`` list


class HeldCache:
    def __init__(self) -> None:
        self._records: dict[int, JobRecord] = {}
        self._lock = threading.Lock()

    def held(self, conn: Connection) -> list[JobRecord]:
        """Every job holding resources as of this transaction, in id order; forgets the
        others."""
        rows = conn.execute(select(jobs.c.id, jobs.c.version, jobs.c.billed_until)
                            .where(jobs.c.state.in_(HOLDING)).order_by(jobs.c.id)).all()
        with self._lock:
            known = dict(self._records)
        stale = [r.id for r in rows if r.id not in known or known[r.id].version != r.version]
        for start in range(0, len(stale), CHUNK):
            for row in conn.execute(select(jobs).where(jobs.c.id.in_(stale[start:start + CHUNK]))):
                known[row.id] = convert.record_from_row(row)
        fresh: dict[int, JobRecord] = {}
        for r in rows:
            rec = known[r.id]
            fresh[r.id] = rec if rec.billed_until == r.billed_until else replace(
                rec, billed_until=r.billed_until)
        with self._lock:
            self._records = fresh
        return list(fresh.values())
