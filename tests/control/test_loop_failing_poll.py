"""One job whose status the backend cannot read (a record its parser rejects) does not stop the
control loop: every other job is judged, new jobs are scheduled and cancels carried out, and
the unreadable job is neither taken for lost nor launched again; once it can be read, it is
judged as before."""

from __future__ import annotations

from typing import Sequence

from controlkit import drive, python, state_is, submit
from rota.backends.base import BackendError, Handle, Status
from rota.backends.local import LocalBackend
from rota.control import ControlLoop
from rota.core import JobState as S
from rota.scheduler import build_policy


class Unreadable(LocalBackend):
    """The local backend, whose poll fails whenever it is asked about the jobs in ``bad``."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.bad: set[str] = set()
        self.polled: list[int] = []

    def poll(self, handles: Sequence[Handle]) -> list[Status]:
        self.polled.append(len(handles))
        if any(h.job_id in self.bad for h in handles):
            raise BackendError("unreadable", "sacct exit code: expected code:signal, got ''")
        return super().poll(handles)


def test_a_job_whose_status_cannot_be_read_stops_nothing_else(store, data_dir, clock):
    backend = Unreadable(data_dir, node=store.node_records()[0].node)
    loop = ControlLoop(store, backend, build_policy("default"), data_dir, clock=clock)
    try:
        stuck = submit(store, ["sleep", "60"], gpus=1)
        ending = submit(store, python("import time; time.sleep(1)"), gpus=1)
        others = [submit(store, ["sleep", "60"], gpus=0.5) for _ in range(3)]
        for job in (stuck, ending, *others):
            drive(loop, state_is(store, job, S.RUNNING), f"job {job} to run")
        backend.bad.add(stuck)
        drive(loop, state_is(store, ending, S.SUCCEEDED), "the ending job to be judged")
        store.request_cancel(others[0], by="alice")
        drive(loop, state_is(store, others[0], S.CANCELLED), "a cancel to be carried out")
        late = submit(store, ["sleep", "60"], gpus=1)
        drive(loop, state_is(store, late, S.RUNNING), "a new job to be scheduled")
        del backend.polled[:]
        report = loop.step()
        assert any(e.startswith(f"job {stuck}: poll failed") for e in report.errors)
        assert len(backend.polled) <= 32  # the halving stops at the failing job
        rec = store.get_job(stuck)
        assert (rec.state, rec.attempts) == (S.RUNNING, 0)  # not lost, not launched again
        backend.bad.clear()
        store.request_cancel(stuck, by="alice")
        drive(loop, state_is(store, stuck, S.CANCELLED), "the job to be judged again")
    finally:
        loop.stop()
