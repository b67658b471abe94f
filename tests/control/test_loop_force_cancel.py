"""An operator's force-cancel of a job whose status the backend cannot read: the store ends it
at once, and the control loop's next pass makes one best-effort stop of what it launched and
forgets it."""

from __future__ import annotations

from controlkit import drive, state_is, submit
from rota.backends.base import Handle, ReplicaState
from rota.control import ControlLoop
from rota.core import JobState as S
from rota.scheduler import build_policy
from test_loop_failing_poll import Unreadable


def test_a_force_cancelled_job_is_stopped_by_the_next_pass(store, data_dir, clock):
    backend = Unreadable(data_dir, node=store.node_records()[0].node)
    loop = ControlLoop(store, backend, build_policy("default"), data_dir, clock=clock)
    try:
        stuck = submit(store, ["sleep", "600"], gpus=1)
        drive(loop, state_is(store, stuck, S.RUNNING), "the job to run")
        handle = Handle.from_dict(store.get_job(stuck).backend_handle)
        backend.bad.add(stuck)
        report = loop.step()
        assert any(e.startswith(f"job {stuck}: poll failed") for e in report.errors)
        rec = store.force_cancel(stuck, by="root")
        assert (rec.state, rec.reason) == (S.CANCELLED, "force-cancelled by root")
        backend.bad.clear()                    # only to look: the loop no longer polls it
        drive(loop, lambda: backend.poll([handle])[0].state is ReplicaState.EXITED,
              "the loop to stop what the job launched")
        assert stuck not in loop.reconciler.handles
        assert store.get_job(stuck).state is S.CANCELLED
    finally:
        loop.stop()
