"""Launching the jobs a pass bound, many at once.

``Launcher.launch(recs)`` takes SCHEDULED jobs and returns, for each, either the handle of its
attempt (started now, or found started by an earlier control plane that died before saving
it) or the verdict that ends or requeues it. Steps, each over all the jobs together:

1. prepare: the job's ``run`` read back, the OS account it runs as, its working and
   checkpoint directories (a job that cannot be started as written fails). A backend that
   runs container images (``Capabilities.containers``) gets neither directory made here: the
   ``workdir`` is a path in the image ("" for the image's own), ``checkpoint.dir`` likewise,
   and an upload, which cannot reach the image, is refused;
2. recover: an attempt started before (a crash between the launch and the record of its
   handle) is found and kept, with the token it was given;
3. tokens: one transaction gives each new attempt its own token (``Store.issue_job_tokens``);
4. launch: ``backend.launch`` for every new attempt.

Steps 1, 2 and 4 run on a pool of threads: they wait on disks and on the backend (a spawner,
``sbatch``, the Kubernetes API), so that hundreds of launches of one pass do not wait for each
other. The caller records the handles (one transaction for all: ``Reconciler``).

A job whose working directory is still to be unpacked from an upload (seconds per GiB) is
prepared on a pool of its own, outside any pass: the pass that first sees it starts the unpack
and goes on without it (the job stays SCHEDULED), and the first pass after the unpack ended
launches it (``on_ready`` wakes the loop for that). A control plane that dies meanwhile
unpacks again after its restart (``prepare_workdir`` moves a finished directory into place in
one rename), so no pass ever waits for an archive.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from rota.backends.base import Backend, BackendError, Handle, LaunchSpec, RunAs
from rota.control.runspec import (
    RunSpec, job_dir, parse_run, prepare_checkpoints, prepare_workdir,
)
from rota.control.verdict import Verdict
from rota.core import End, InvalidSpec, JobState
from rota.store import JobRecord, Store

LAUNCH_FAILED = "launch failed"
MAX_LAUNCH_FAILURES = 3
WORKERS = 32  # launches of one pass at once: Pod bindings wait on the API server
UNPACKERS = 2  # archives unpacked at once, outside the passes


@dataclass(frozen=True, slots=True)
class Launched:
    """What became of one job: its attempt's ``handle``, or the ``verdict`` that moves it."""

    rec: JobRecord
    handle: Handle | None = None
    verdict: Verdict | None = None


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
                 on_ready: Callable[[], None] = lambda: None) -> None:
        self.store, self.backend, self.data_dir = store, backend, data_dir
        self.account, self.api_url, self.api_ca_file = account, api_url, api_ca_file
        self.on_ready = on_ready
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="rota-launch")
        self._unpacker = ThreadPoolExecutor(UNPACKERS, thread_name_prefix="rota-unpack")
        self._unpacking: dict[tuple[str, int], Future] = {}  # (job, attempt) -> its prepare

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._unpacker.shutdown(wait=True, cancel_futures=True)

    def launch(self, recs: Iterable[JobRecord]) -> list[Launched]:
        out: list[Launched] = []
        todo = []
        for rec in recs:
            if rec.cancel_requested:
                out.append(Launched(rec, verdict=Verdict(
                    JobState.CANCELLED, reason="cancelled on request", end=End.CANCELLED)))
            else:
                todo.append(rec)
        ready: list[_Ready] = []
        todo, prepared = self._unpacked(todo)
        for found in [*prepared, *self._pool.map(self._prepare, todo)]:
            (ready if isinstance(found, _Ready) else out).append(found)  # type: ignore[arg-type]
        fresh: list[_Ready] = []
        for r, found in zip(ready, self._pool.map(self._recover, ready)):
            if isinstance(found, Launched):
                out.append(found)
            else:
                fresh.append(r)
        tokens = self._tokens(fresh)
        out.extend(self._pool.map(lambda r: self._start(r, tokens.get(r.rec.id)), fresh))
        return out

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
            spec = parse_run(rec.run)
        except InvalidSpec:
            return False  # ``_prepare`` says why, at once
        return (spec.upload is not None and spec.workdir is None
                and not self.backend.capabilities.containers
                and not (job_dir(self.data_dir, rec.id) / "work").is_dir())

    def _prepare(self, rec: JobRecord) -> _Ready | Launched:
        try:
            spec = parse_run(rec.run)
            run_as = self.account(rec)
            if self.backend.capabilities.containers:
                return _Ready(rec, spec, run_as, *self._in_image(spec))
            workdir = prepare_workdir(spec, self.data_dir, rec.id, run_as)
            checkpoints = prepare_checkpoints(spec, self.data_dir, rec.id, workdir, run_as)
            return _Ready(rec, spec, run_as, str(workdir), str(checkpoints))
        except InvalidSpec as exc:
            return Launched(rec, verdict=_unstartable(exc))
        except (BackendError, OSError) as exc:
            return Launched(rec, verdict=launch_failed(rec, exc))

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

    def _recover(self, r: _Ready) -> Launched | None:
        """The attempt, if an earlier control plane started it (it keeps its token)."""
        assert r.rec.job.placement is not None
        try:
            found = self.backend.recover(r.rec.job, r.rec.job.placement, r.rec.attempts)
        except (BackendError, OSError) as exc:
            return Launched(r.rec, verdict=launch_failed(r.rec, exc))
        return None if found is None else Launched(r.rec, handle=found)

    def _tokens(self, fresh: list[_Ready]) -> dict[str, str]:
        if self.api_url is None or not fresh:
            return {}
        return self.store.issue_job_tokens([(r.rec.id, r.rec.attempts) for r in fresh])

    def _start(self, r: _Ready, token: str | None) -> Launched:
        rec = r.rec
        env = job_env(r.spec, rec, r.checkpoints)
        if token is not None:
            env.update(ROTA_URL=self.api_url or "", ROTA_TOKEN=token)
            if self.api_ca_file is not None and not self.backend.capabilities.containers:
                env["ROTA_CA_FILE"] = self.api_ca_file  # a path on the job's host
        assert rec.job.placement is not None
        try:
            handle = self.backend.launch(rec.job, rec.job.placement,
                                         LaunchSpec(r.spec.command, r.workdir, env, r.run_as,
                                                    r.spec.checkpoint_signal, r.spec.grace_s,
                                                    r.spec.image, r.spec.port),
                                         attempt=rec.attempts)
        except InvalidSpec as exc:
            return Launched(rec, verdict=_unstartable(exc))
        except (BackendError, OSError) as exc:
            return Launched(rec, verdict=launch_failed(rec, exc))
        return Launched(rec, handle=handle)


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
