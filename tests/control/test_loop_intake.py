"""Work a backend offers becomes jobs: each offer is submitted once (also across a restart of
the control plane between the submit and the launch), waits in its queue like any job, and
one the store refuses is declined to the backend and tried again later. Work offered ends
the loop's rest after a pass (a submit does not), and a pass soon after a step 1 places it
without another step 1. A job that names a
container image is rejected where no node runs container images (the local backend without
podman runs commands on this machine only); a backend that runs container images gets the
workdir as written and the image, and nothing is prepared here for it."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import replace

from builders import job
from controlkit import DEADLINE_S, FakeClock, drive, state_is, submit, wait_until
from rota.backends.base import OFFER_LABEL, Offer
from rota.backends.local import LocalBackend
from rota.control import ControlLoop, loop as loop_module
from rota.control.intake import RETRY_S
from rota.core import JobState as S
from rota.scheduler import build_policy


class Offering(LocalBackend):
    """The local backend, with work of its own on offer (as Kubernetes Pods are offered);
    ``offer`` makes one more and says so to the loop, as a watch of Pods does."""

    def __init__(self, data_dir, node) -> None:
        super().__init__(data_dir, node=node)
        self.waiting: list[Offer] = []
        self.declined: list[tuple[str, str]] = []
        self.wake = lambda **_: None

    def watch(self, wake) -> None:
        self.wake = wake
        super().watch(wake)

    def offer(self, offer: Offer) -> None:
        self.waiting.append(offer)
        self.wake(arrived=True)

    def offers(self) -> list[Offer]:
        return list(self.waiting)

    def decline(self, offer: Offer, reason: str) -> None:
        self.declined.append((offer.key, reason))


def an_offer(key: str, queue: str = "q", gpus: int = 1) -> Offer:
    built = job("x").gpus(gpus).user("alice").project("p").queue(queue).build()
    return Offer(key=key, job=built, name="offered",
                 run={"command": [sys.executable, "-c", "import time; time.sleep(30)"]})


def loop_over(store, backend, data_dir, clock) -> ControlLoop:
    return ControlLoop(store, backend, build_policy("default"), data_dir, clock=clock)


def offered_jobs(store) -> list:
    return [r for r in store.list_jobs().items if dict(r.job.labels).get(OFFER_LABEL)]


def test_an_offer_is_submitted_once_and_runs_like_any_job(store, backend, data_dir, clock):
    offering = Offering(data_dir, backend.node)
    offering.waiting = [an_offer("pod:ml/a@1")]
    loop = loop_over(store, offering, data_dir, clock)
    (rec,) = drive(loop, lambda: offered_jobs(store), "the offer to become a job")
    assert (rec.name, rec.job.queue, rec.job.user) == ("offered", "q", "alice")
    assert dict(rec.job.labels)[OFFER_LABEL] == "pod:ml/a@1"
    drive(loop, state_is(store, rec.id, S.RUNNING), "the offered job to run")
    for _ in range(3):  # still offered (the backend has not launched it): not submitted again
        loop.step()
    assert len(offered_jobs(store)) == 1
    loop.stop()

    # a new control plane over the same store knows the offer from the job's label
    again = loop_over(store, offering, data_dir, clock)
    again.step()
    assert len(offered_jobs(store)) == 1
    again.stop()


def test_an_offer_the_store_refuses_is_declined_and_tried_again_later(
        store, backend, data_dir, clock: FakeClock):
    offering = Offering(data_dir, backend.node)
    offering.waiting = [an_offer("pod:ml/b@2", queue="nope")]
    loop = loop_over(store, offering, data_dir, clock)
    loop.step()
    loop.step()
    assert offered_jobs(store) == []
    assert len(offering.declined) == 1 and "nope" in offering.declined[0][1]
    clock.advance(RETRY_S)
    loop.step()
    assert len(offering.declined) == 2
    loop.stop()


def test_a_pending_job_whose_offer_is_no_longer_made_is_cancelled_and_a_running_one_is_not(
        store, backend, data_dir, clock):
    offering = Offering(data_dir, backend.node)
    whole = len(backend.node.devices)  # waits while the first holds one GPU
    offering.waiting = [an_offer("pod:ml/runs@1"), an_offer("pod:ml/waits@2", gpus=whole)]
    loop = loop_over(store, offering, data_dir, clock)
    drive(loop, lambda: len(offered_jobs(store)) == 2, "the offers to become jobs")
    by_key = {dict(r.job.labels)[OFFER_LABEL]: r.id for r in offered_jobs(store)}
    runs, waits = by_key["pod:ml/runs@1"], by_key["pod:ml/waits@2"]
    drive(loop, state_is(store, runs, S.RUNNING), "the offered job that fits to run")
    loop.step()
    assert store.get_job(waits).state is S.PENDING

    offering.waiting = []  # both Pods gone (or bound): no longer made
    loop.step()
    gone = store.get_job(waits)
    assert gone.state is S.CANCELLED
    assert gone.reason.startswith("the work offered as this job (pod:ml/waits@2) no longer "
                                  "waits for rota")
    assert store.get_job(runs).state is S.RUNNING  # launched: its work is not an offer any more
    loop.stop()


class HourLongPasses:
    """``time`` as the control loop reads it, except that every pass seems to take an hour
    (``monotonic`` moves an hour each time it is read): with ``MAX_REST_S`` an hour, the
    loop would rest an hour after each pass."""

    perf_counter = staticmethod(time.perf_counter)

    def __init__(self) -> None:
        self.t = 0.0

    def monotonic(self) -> float:
        self.t += 3600.0
        return self.t


def test_work_offered_during_the_rest_after_a_pass_is_taken_without_resting_on(
        store, backend, data_dir, clock, monkeypatch):
    monkeypatch.setattr(loop_module, "MAX_REST_S", 3600.0)
    monkeypatch.setattr(loop_module, "time", HourLongPasses())
    offering = Offering(data_dir, backend.node)
    loop = ControlLoop(store, offering, build_policy("default"), data_dir, clock=clock,
                       interval_s=3600.0)
    try:
        loop.start()
        first = submit(store, [sys.executable, "-c", "import time; time.sleep(30)"])
        loop.wake()
        wait_until(lambda: loop.passes >= 2, "a pass to take the first job")  # now it rests
        assert store.get_job(first).state in (S.SCHEDULED, S.RUNNING)
        # a submit through the API wakes the loop too, but waits for the rest to end
        later = submit(store, [sys.executable, "-c", "import time; time.sleep(30)"])
        loop.wake()
        offering.offer(an_offer("pod:ml/c@3"))  # a Pod created for rota: the rest ends
        wait_until(lambda: loop.passes >= 3, "the next pass")
        # that pass took both: the offered work, and the submit that came during the rest
        (rec,) = offered_jobs(store)
        assert rec.state in (S.SCHEDULED, S.RUNNING)
        assert store.get_job(later).state in (S.SCHEDULED, S.RUNNING)
        assert loop.passes == 3  # and now it rests an hour
    finally:
        loop.stop()


class HeldOffering(Offering):
    """Offers, whose launches wait until ``go`` is set (``entered``: those begun)."""

    def __init__(self, data_dir, node) -> None:
        super().__init__(data_dir, node)
        self.go, self.entered = threading.Event(), []

    def launch(self, job, placement, spec, attempt=None):
        if dict(job.labels).get(OFFER_LABEL):
            self.entered.append(job.id)
            assert self.go.wait(DEADLINE_S), "the test never let the launch go"
        return super().launch(job, placement, spec, attempt)


class StoppedMonotonic:
    """``time`` as the control loop reads it, except that ``monotonic`` stands still: every
    pass follows the last step 1 by less than ``RECONCILE_EVERY_S``."""

    perf_counter = staticmethod(time.perf_counter)

    @staticmethod
    def monotonic() -> float:
        return 0.0


def test_work_offered_soon_after_a_full_pass_is_placed_by_a_pass_without_step_1(
        store, backend, data_dir, clock, monkeypatch):
    monkeypatch.setattr(loop_module, "time", StoppedMonotonic())
    offering = HeldOffering(data_dir, backend.node)
    loop = ControlLoop(store, offering, build_policy("default"), data_dir, clock=clock,
                       interval_s=3600.0)
    try:
        loop.start()
        first = submit(store, [sys.executable, "-c", "import time; time.sleep(60)"])
        loop.wake()
        wait_until(state_is(store, first, S.RUNNING), "the first job to run")
        with loop._step_lock:  # between two passes: the next one sees both at once
            store.request_cancel(first, by="alice")
            offering.offer(an_offer("pod:ml/d@4"))
        wait_until(lambda: offering.entered, "the offered job to be placed and launched")
        # its launch is held, so no pass has run since the one that placed it, and that
        # pass did not look at the running jobs: the cancel is not carried out yet
        assert store.get_job(first).state is S.RUNNING
        loop.wake()  # a pass without offered work runs every step
        wait_until(state_is(store, first, S.CANCELLED), "the cancel to be carried out")
    finally:
        offering.go.set()
        loop.stop()


def test_the_local_backend_refuses_a_job_that_names_an_image(store, backend, data_dir, clock):
    # its machine runs commands, not images, without podman: no node has the feature containers
    plain = LocalBackend(data_dir, node=backend.node, podman=("rota-test-no-such-podman",))
    store.upsert_nodes(plain.inventory(), backend="local")
    loop = loop_over(store, plain, data_dir, clock)
    try:
        job_id = submit(store, [sys.executable, "-c", "pass"], image="pytorch/pytorch:2.3.0")
        rec = drive(loop, state_is(store, job_id, S.FAILED), "the job to fail")
    finally:
        loop.stop()
    assert rec.reason.startswith("rejected: never-fits (it names the container image "
                                 "'pytorch/pytorch:2.3.0', which needs a node that runs "
                                 "container images (feature containers); none of this "
                                 "cluster's nodes does)")


class InImages(LocalBackend):
    """The local backend, saying it runs jobs in container images (as Kubernetes does); it
    records what it is asked to launch and runs the command here, in ``here``."""

    def __init__(self, data_dir, node, here) -> None:
        super().__init__(data_dir, node=node)
        self.here, self.asked = here, []

    @property
    def capabilities(self):
        return replace(super().capabilities, containers=True)

    def launch(self, job, placement, spec, attempt=None):
        self.asked.append(spec)
        return super().launch(job, placement, replace(spec, workdir=str(self.here), image=None),
                              attempt)


def test_a_backend_of_container_images_gets_the_workdir_in_the_image_and_nothing_made_here(
        store, backend, data_dir, clock, tmp_path):
    images = InImages(data_dir, backend.node, tmp_path)
    loop = loop_over(store, images, data_dir, clock)
    in_image = submit(store, [sys.executable, "-c", "pass"], image="python:3.12",
                      workdir="/app", checkpoint={"dir": "ckpt"})
    drive(loop, lambda: images.asked, "the job to be launched")
    (spec,) = images.asked
    assert (spec.workdir, spec.image, spec.env["ROTA_CHECKPOINT_DIR"]) == (
        "/app", "python:3.12", "/app/ckpt")
    made = data_dir / "jobs" / in_image  # the local backend's own files may be there
    assert not (made / "work").exists() and not (made / "checkpoints").exists()

    uploaded = submit(store, [sys.executable, "-c", "pass"], image="python:3.12",
                      upload="abc123")
    rec = drive(loop, state_is(store, uploaded, S.FAILED), "the uploaded job to fail")
    assert rec.reason.startswith("cannot be started as written: run.upload: the local backend "
                                 "runs jobs in container images")
    loop.stop()
