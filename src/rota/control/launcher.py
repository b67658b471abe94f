"""Launching the jobs a pass bound, many at once.

``Launcher.launch(recs)`` takes SCHEDULED jobs and returns, for each, either the handle of its
attempt (started now, or found started by an earlier control plane that died before saving
it) or the verdict that ends or requeues it. Steps, each over all the jobs together:

1. recover: an attempt started before (a crash between the launch and the record of its
   handle) is found and kept, with the token it was given. It comes first, so that nothing
   the next steps decide (an account that cannot be resolved now, a directory that cannot be
   made) can put a job that runs back in the queue, to run again beside itself;
2. prepare: the job's ``run`` read back, the OS account it runs as, its working and
   checkpoint directories (a job that cannot be started as written fails). A job whose
   account cannot run it now (``rota.control.accounts.NoAccount``: missing here, or not the
   control plane's own in single-user mode) is not started: it goes back to the queue
   without spending its restart budget (end ``no-account``), where it waits, held with that
   reason, until the account exists. A backend that
   runs container images (``Capabilities.containers``) gets neither directory made here: the
   ``workdir`` is a path in the image ("" for the image's own), ``checkpoint.dir`` likewise,
   and an upload, which cannot reach the image, is refused. Several backends at once
   (``rota.backends.several.PerJob``) answer this per job: the member that launches it;
3. tokens: one transaction gives each new attempt its own token (``Store.issue_job_tokens``);
4. launch: ``backend.launch`` for every new attempt, with the datasets it reads
   (``rota.store.datasets``: a backend without a dataset cache, a dataset gone since submit
   or over its project's quota on cached bytes fail the job, saying which).

Steps 1, 2 and 4 run on a pool of threads: they wait on disks and on the backend (a spawner,
``sbatch``, the Kubernetes API), so that hundreds of launches of one pass do not wait for each
other.

Launches are pipelined with the passes: ``submit(recs)`` hands the jobs to the pool and returns
at once, and each job's outcome is collected by ``landed()`` as soon as it is known, whatever
the other launches of its pass are doing; ``settle()`` waits for every launch submitted, and
``then(callback)`` calls back once every launch submitted so far has its outcome (without
waiting for those submitted later). The caller records the outcomes (one transaction for all
that landed: ``Reconciler``); until a job's outcome is taken by ``landed()`` it is in
``in_flight``, and the caller leaves it alone (it is neither launched again nor judged). A
launch that failed for a reason nobody foresaw (a bug, the store unreachable for the tokens)
lands with its ``error``: nothing is known of it, so the job stays SCHEDULED and the next pass
launches it again, which finds an attempt that had started (step 2).

A job whose working directory is still to be unpacked from an upload (seconds per GiB) is
prepared on a pool of its own, outside any pass: the pass that first sees it starts the unpack
and goes on without it (the job stays SCHEDULED), and the first pass after the unpack ended
launches it (``on_ready`` wakes the loop for that, as it does when the last launch under way
has landed). A control plane that dies meanwhile
unpacks again after its restart (``prepare_workdir`` moves a finished directory into place in
one rename), so no pass ever waits for an archive.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from rota.backends.base import Backend, BackendError, Handle, LaunchSpec, RunAs
from rota.backends.several import PerJob
from rota.control.accounts import NoAccount
from rota.control.runspec import (
    RunSpec, SpecCache, prepare_checkpoints, prepare_workdir,
)
from rota.control.verdict import Verdict
from rota.core import End, InvalidSpec, JobState
from rota.core.datadir import WORK_DIR, job_home
from rota.core.datasets import Dataset
from rota.store import JobRecord, Store

log = logging.getLogger("rota.control")
LAUNCH_FAILED = "launch failed"
MAX_LAUNCH_FAILURES = 3
WORKERS = 32  # launches of one pass at once: Pod bindings wait on the API server
UNPACKERS = 2  # archives unpacked at once, outside the passes


@dataclass(frozen=True, slots=True)
class Launched:
    """What became of one job: its attempt's ``handle``, the ``verdict`` that moves it, or the
    ``error`` that left it as it was (to be launched again)."""

    rec: JobRecord
    handle: Handle | None = None
    verdict: Verdict | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class _Ready:
    rec: JobRecord
    spec: RunSpec
    run_as: RunAs | None
    workdir: str
    checkpoints: str | None  # None: none (a container job that names no ``checkpoint.dir``)


class Launcher:
    def __init__(self, store: Store, backend: Backend, data_dir: Path,
                 account: Callable[[JobRecord], RunAs | None], api_url: str | None,
                 api_ca_file: str | None = None,
                 on_ready: Callable[[], None] = lambda: None,
                 specs: SpecCache | None = None) -> None:
        self.store, self.backend, self.data_dir = store, backend, data_dir
        self.specs = specs if specs is not None else SpecCache()
        self.account, self.api_url, self.api_ca_file = account, api_url, api_ca_file
        self.on_ready = on_ready
        self._per_job = backend if isinstance(backend, PerJob) else None
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="rota-launch")
        self._rounds = ThreadPoolExecutor(1, thread_name_prefix="rota-launch-round")
        self._unpacker = ThreadPoolExecutor(UNPACKERS, thread_name_prefix="rota-unpack")
        self._unpacking: dict[tuple[str, int], Future] = {}  # (job, attempt) -> its prepare
        self._in_flight: set[str] = set()  # submitted, outcome not taken by ``landed`` yet
        self._outcomes: list[Launched] = []  # known, not taken yet
        self._open: set[str] = set()  # jobs of submitted launches whose outcome is not known yet
        self._after: list[tuple[set[str], Callable[[], None]]] = []  # ``then``'s callbacks
        self._changed = threading.Condition()

    def close(self) -> None:
        self._rounds.shutdown(wait=True)
        self._pool.shutdown(wait=True)
        self._unpacker.shutdown(wait=True, cancel_futures=True)

    @property
    def in_flight(self) -> frozenset[str]:
        return frozenset(self._in_flight)

    def submit(self, recs: Iterable[JobRecord]) -> None:
        """Start launching the SCHEDULED jobs ``recs`` (those not in flight already) and
        return at once; their outcomes come from ``landed``. Called by one thread (the
        control loop's)."""
        fresh = [r for r in recs if r.id not in self._in_flight]
        cancelled = [Launched(r, verdict=Verdict(JobState.CANCELLED, reason="cancelled on "
                                                 "request", end=End.CANCELLED))
                     for r in fresh if r.cancel_requested]
        now, prepared = self._unpacked([r for r in fresh if not r.cancel_requested])
        ready = [p for p in prepared if isinstance(p, _Ready)]
        known = [*cancelled, *(p for p in prepared if isinstance(p, Launched))]
        # from here on each job in flight gets its outcome (jobs still unpacking are not)
        self._in_flight.update(o.rec.id for o in (*known, *ready))
        self._in_flight.update(r.id for r in now)
        with self._changed:
            self._open.update(r.id for r in (*now, *(o.rec for o in known),
                                             *(p.rec for p in ready)))
        for outcome in known:
            self._land(outcome)
        if not (now or ready):
            return
        try:
            self._rounds.submit(self._round, now, ready)
        except RuntimeError as exc:  # closed: nothing was started
            for rec in (*now, *(r.rec for r in ready)):
                self._land(Launched(rec, error=repr(exc)))

    def landed(self) -> list[Launched]:
        """The outcomes known since the last call; their jobs are no longer in flight."""
        with self._changed:
            out, self._outcomes = self._outcomes, []
        self._in_flight -= {o.rec.id for o in out}
        return out

    def settle(self, timeout: float | None = None) -> bool:
        """Wait until every launch submitted has its outcome (False: ``timeout`` passed)."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._open, timeout)

    def then(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (from whichever thread lands the last of them) once every launch
        submitted until now has its outcome; at once when none is under way."""
        with self._changed:
            if self._open:
                self._after.append((set(self._open), callback))
                return
        callback()

    def _land(self, outcome: Launched) -> None:
        """Keep ``outcome`` for ``landed``; once no launch is left under way, wake the loop
        (``on_ready``) to record them (while launches keep landing, the passes that run
        anyway record them as they come). Call the ``then`` callbacks it was the last for."""
        with self._changed:
            self._outcomes.append(outcome)
            self._open.discard(outcome.rec.id)
            for ids, _ in self._after:
                ids.discard(outcome.rec.id)
            due = [cb for ids, cb in self._after if not ids]
            self._after = [(ids, cb) for ids, cb in self._after if ids]
            self._changed.notify_all()
            last = not self._open
        for callback in due:
            try:
                callback()
            except Exception:  # a callback's fault must not lose this outcome
                log.exception("a callback after launches failed")
        if last:
            self.on_ready()

    def _round(self, todo: list[JobRecord], prepared: list[_Ready]) -> None:
        """Steps 1 to 4 for the jobs of one ``submit`` (``prepared``: unpacked since an
        earlier pass), each outcome landed as it is known."""
        left = {r.id: r for r in (*todo, *(p.rec for p in prepared))}
        guard = threading.Lock()  # starts land from the pool's threads

        def land(outcome: Launched) -> None:
            with guard:
                if left.pop(outcome.rec.id, None) is None:
                    return
            self._land(outcome)
        try:
            unstarted: list[JobRecord] = []
            for rec, found in zip(todo, self._pool.map(self._recover, todo)):
                if found is None:
                    unstarted.append(rec)
                else:
                    land(found)
            fresh: list[_Ready] = []
            for r, found in zip(prepared, self._pool.map(lambda p: self._recover(p.rec),
                                                         prepared)):
                if found is None:
                    fresh.append(r)
                else:
                    land(found)
            for found in self._pool.map(self._prepare, unstarted):
                if isinstance(found, _Ready):
                    fresh.append(found)
                else:
                    land(found)
            tokens = self._tokens(fresh)
            for r in fresh:
                future = self._pool.submit(self._start, r, tokens.get(r.rec.id))
                future.add_done_callback(lambda f, rec=r.rec: land(_outcome(f, rec)))
        except Exception as exc:  # nothing known of what is left: it is launched again
            log.exception("launching %d job(s) failed", len(left))
            with guard:
                unknown = list(left.values())
            for rec in unknown:
                land(Launched(rec, error=repr(exc)))

    def _unpacked(self, recs: list[JobRecord]) -> tuple[list[JobRecord], list[_Ready | Launched]]:
        """The jobs to prepare in this pass, and those whose unpack has ended since an earlier
        pass (module docstring); the others are left SCHEDULED for a later pass."""
        now, done = [], []
        asked = set()
        for rec in recs:
            key = (rec.id, rec.attempts)
            asked.add(key)
            future = self._unpacking.get(key)
            if future is not None:
                if future.done():
                    del self._unpacking[key]
                    done.append(future.result())
            elif self._must_unpack(rec):
                future = self._unpacker.submit(self._prepare, rec)
                future.add_done_callback(lambda _: self.on_ready())
                self._unpacking[key] = future
            else:
                now.append(rec)
        for key in [k for k, f in self._unpacking.items() if k not in asked and f.done()]:
            del self._unpacking[key]  # cancelled or moved on meanwhile
        return now, done

    def _must_unpack(self, rec: JobRecord) -> bool:
        """Whether preparing ``rec`` would unpack an upload here."""
        try:
            spec = self.specs.spec(rec)
        except InvalidSpec:
            return False  # ``_prepare`` says why, at once
        return (spec.upload is not None and spec.workdir is None
                and not self._in_containers(rec)
                and not (job_home(self.data_dir, rec.id) / WORK_DIR).is_dir())

    def _prepare(self, rec: JobRecord) -> _Ready | Launched:
        try:
            spec = self.specs.spec(rec)
            run_as = self.account(rec)
            if self._in_containers(rec):
                return _Ready(rec, spec, run_as, *self._in_image(spec))
            if spec.volumes or spec.shm_mib is not None:
                raise InvalidSpec("run.volumes" if spec.volumes else "run.shm_mib", (
                    f"the {self.backend.name} backend runs jobs on its hosts, not in "
                    "containers: it mounts no volume claim and sizes no /dev/shm"))
            workdir = prepare_workdir(spec, self.data_dir, rec.id, run_as)
            checkpoints = prepare_checkpoints(spec, self.data_dir, rec.id, workdir, run_as)
            return _Ready(rec, spec, run_as, str(workdir), str(checkpoints))
        except InvalidSpec as exc:
            return Launched(rec, verdict=_unstartable(exc))
        except NoAccount as exc:
            return Launched(rec, verdict=no_account(exc))
        except (BackendError, OSError) as exc:
            return Launched(rec, verdict=launch_failed(rec, exc))

    def _in_containers(self, rec: JobRecord) -> bool:
        """Whether ``rec`` runs in a container image (``Capabilities.containers``): the
        backend's word, or, for several backends at once, that of the member that launches it
        (a job no member can launch is refused by the launch itself)."""
        if self._per_job is not None and rec.job.placement is not None:
            try:
                return self._per_job.job_capabilities(rec.job).containers
            except BackendError:
                pass
        return self.backend.capabilities.containers

    def _in_image(self, spec: RunSpec) -> tuple[str, str | None]:
        """The working and checkpoint directories of a job that runs in a container image."""
        if spec.upload is not None:
            raise InvalidSpec("run.upload", f"the {self.backend.name} backend runs jobs in "
                              "container images, which an uploaded directory does not reach: "
                              "build it into the image")
        workdir = spec.workdir or ""
        if spec.checkpoint_dir is None:
            return workdir, None
        return workdir, str(Path(workdir or "/", spec.checkpoint_dir))

    def _recover(self, rec: JobRecord) -> Launched | None:
        """The attempt, if an earlier control plane started it (it keeps its token)."""
        assert rec.job.placement is not None
        try:
            found = self.backend.recover(rec.job, rec.job.placement, rec.attempts)
        except (BackendError, OSError) as exc:
            return Launched(rec, verdict=launch_failed(rec, exc))
        return None if found is None else Launched(rec, handle=found)

    def _tokens(self, fresh: list[_Ready]) -> dict[str, str]:
        if self.api_url is None or not fresh:
            return {}
        return self.store.issue_job_tokens([(r.rec.id, r.rec.attempts) for r in fresh])

    def _start(self, r: _Ready, token: str | None) -> Launched:
        rec = r.rec
        env = job_env(r.spec, rec, r.checkpoints)
        if token is not None:
            env.update(ROTA_URL=self.api_url or "", ROTA_TOKEN=token)
            if self.api_ca_file is not None and not self._in_containers(rec):
                env["ROTA_CA_FILE"] = self.api_ca_file  # a path on the job's host
        assert rec.job.placement is not None
        try:
            data, wanted = self._datasets(r)
            handle = self.backend.launch(rec.job, rec.job.placement,
                                         LaunchSpec(r.spec.command, r.workdir, env, r.run_as,
                                                    r.spec.checkpoint_signal, r.spec.grace_s,
                                                    r.spec.image, r.spec.port,
                                                    disk_mib=r.spec.disk_mib,
                                                    volumes=r.spec.volumes,
                                                    shm_mib=r.spec.shm_mib,
                                                    batch=r.spec.slurm, datasets=data,
                                                    datasets_wanted=wanted),
                                         attempt=rec.attempts)
        except InvalidSpec as exc:
            return Launched(rec, verdict=_unstartable(exc))
        except (BackendError, OSError) as exc:
            return Launched(rec, verdict=launch_failed(rec, exc))
        return Launched(rec, handle=handle)

    def _datasets(self, r: _Ready) -> tuple[tuple[Dataset, ...], frozenset[str]]:
        """The datasets the job reads and the cache keys live jobs name (``InvalidSpec`` on
        ``datasets`` where its backend caches none, or one is gone or over its project's
        quota on cached bytes: ``rota.store.datasets``)."""
        if not r.spec.datasets:
            return (), frozenset()
        rec = r.rec
        assert rec.job.placement is not None
        caps = (self._per_job.job_capabilities(rec.job) if self._per_job is not None
                else self.backend.capabilities)
        if not caps.datasets:
            raise InvalidSpec("datasets", f"the {self.backend.name} backend has no dataset "
                              "cache here (docs/datasets.md)")
        nodes = sorted({p.node for p in rec.job.placement.replicas})
        found, wanted = self.store.datasets.for_launch(r.spec.datasets, nodes)
        return tuple(found), wanted


def _outcome(future: Future, rec: JobRecord) -> Launched:
    """What a start's ``future`` came to (``_start`` returns failures it foresaw)."""
    exc = future.exception()
    if exc is None:
        return future.result()
    log.error("job %s: launch failed", rec.id, exc_info=exc)
    return Launched(rec, error=repr(exc))


def job_env(spec: RunSpec, rec: JobRecord, checkpoints: Path | str | None) -> dict[str, str]:
    """The job's own ``env`` and the variables rota sets for each of its attempts."""
    env: dict[str, Any] = dict(spec.env)
    env["ROTA_ATTEMPT"] = str(rec.attempts)
    if checkpoints is not None:
        env["ROTA_CHECKPOINT_DIR"] = str(checkpoints)
    if rec.array_index is not None:
        env["ROTA_ARRAY_ID"], env["ROTA_ARRAY_INDEX"] = str(rec.array_id), str(rec.array_index)
    return env


def _unstartable(exc: InvalidSpec) -> Verdict:
    where = exc.field if exc.field.startswith("run") else f"run.{exc.field}"
    return Verdict(JobState.FAILED, reason=f"cannot be started as written: {where}: {exc.reason}",
                   end=End.FAILED)


def unreadable(exc: InvalidSpec) -> Verdict:
    """A launched job whose stored spec cannot be read any more: it fails, the field named."""
    return Verdict(JobState.FAILED, reason=f"its stored launch spec cannot be read: "
                   f"{exc.field}: {exc.reason}", end=End.FAILED)


def no_account(exc: NoAccount) -> Verdict:
    """A launch whose account cannot run it now: back to the queue, the budget unspent."""
    return Verdict(JobState.PENDING, reason=f"requeued, not started: {exc.why}",
                   end=End.NO_ACCOUNT)


def launch_failed(rec: JobRecord, exc: Exception) -> Verdict:
    """A launch that failed for a reason of the machine's: requeued, up to
    ``MAX_LAUNCH_FAILURES`` counted with the job's other failures."""
    count = rec.failures + 1
    if count >= MAX_LAUNCH_FAILURES:
        return Verdict(JobState.FAILED, reason=f"{LAUNCH_FAILED} {count} times: {exc}",
                       end=End.LAUNCH_FAILED)
    return Verdict(JobState.PENDING, reason=(
        f"{LAUNCH_FAILED} ({count} of {MAX_LAUNCH_FAILURES}), requeued: {exc}"),
        end=End.LAUNCH_FAILED)
