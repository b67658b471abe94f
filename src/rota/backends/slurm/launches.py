"""Launching an attempt as one Slurm batch job, and finding it again: ``Launches``, the part of
``SlurmBackend`` that submits (on ``view.SlurmView``).

Launch, crash-safe (``attempts`` says what each file proves):

1. ``submit.json`` is written: from now on a restart asks Slurm before launching again;
2. ``sbatch --hold`` (as the job's OS account) prints the Slurm job id; the job is held, so
   that nothing runs before step 4;
3. ``handle.json`` is written;
4. ``scontrol release``: Slurm may start it (while the backend is watched, the launches of a
   pass are released together, right after, by ``release.Releaser``).

``recover`` finds an attempt from its files, or by its name in ``squeue``/``sacct`` once no
``sbatch`` of it is still running here (without files, Slurm is asked only while taking over
from another control plane of the same instance: ``taking_over``); a held job it finds is
released. Two Slurm jobs of one attempt can only come from an ``sbatch`` whose answer was
lost in a crash: both are held until one is recorded, and the one not recorded is cancelled
wherever it is seen (``recover``, ``poll``), before it was ever released. So an attempt never
runs twice.
"""

from __future__ import annotations

import os

from rota.backends.base import BackendError, Handle, LaunchSpec
from rota.backends.env import account_env, inherited
from rota.backends.procs import make_dirs
from rota.backends.slurm import attempts, interact
from rota.backends.slurm.attempts import AttemptFiles
from rota.backends.slurm.commands import SlurmCommandError
from rota.backends.slurm.handles import attempt_handle, serving, slurm_job
from rota.backends.slurm.nodes import fractional_refusal
from rota.backends.slurm.release import release
from rota.backends.slurm.states import attempt_name, owner
from rota.backends.slurm.submit import SubmitSpec, batch_request, parse_job_id, refused_option
from rota.backends.slurm.view import SlurmView
from rota.core import InvalidSpec, Job, Placement


class Launches(SlurmView):
    """``launch`` and ``recover``: each attempt submitted once (module docstring)."""

    def launch(self, job: Job, placement: Placement, spec: LaunchSpec,
               attempt: int | None = None) -> Handle:
        """Submit attempt ``attempt`` of ``job`` (module docstring); an attempt submitted
        before is returned as it is, never submitted again. A job that names a container image
        is refused (``InvalidSpec`` on ``image``): a Slurm job runs its command on the node."""
        if spec.image is not None:
            raise InvalidSpec("image", f"names the container image {spec.image!r}, but the slurm "
                                       "backend runs commands on the cluster's nodes, not in "
                                       "images: drop image, or run the job on a backend that "
                                       "runs containers (kubernetes)")
        if attempt is None:
            attempt = attempts.next_attempt(self.data_dir, job.id)
        found = self.recover(job, placement, attempt)
        if found is not None:
            return found
        reports = self.reports()
        if job.request.gpu.fractional and (refusal := fractional_refusal(reports.values())):
            raise InvalidSpec("gpu", refusal)
        files = AttemptFiles.of(self.data_dir, job.id, attempt)
        addresses = {n: s.address for n, s in self._slurm_nodes.items()}
        batch = spec.batch
        request = batch_request(job, placement, attempt, SubmitSpec(
            command=tuple(spec.command), workdir=spec.workdir, log_dir=str(files.logs),
            env=spec.env, checkpoint_signal=spec.checkpoint_signal, grace_s=spec.grace_s,
            partition=batch.get("partition") or self.config.partition,
            account=self.config.account(job.project), qos=batch.get("qos"),
            reservation=batch.get("reservation"), constraint=batch.get("constraint"),
            pinned=self.config.pinned, hold=True,
            instance=self.instance, port=spec.port, addresses=addresses), reports)
        files.prepare(spec.run_as)
        interact.save_session(files.private, spec)  # for commands inside it (``interact``)
        files.intend(request.name)                                                   # 1
        self.before("sbatch", files)
        base = {**inherited(os.environ), **account_env(spec.run_as)}
        try:
            out = self.commands.run(request.argv, request.script, base_env=base,
                                    run_as=spec.run_as)                               # 2
        except SlurmCommandError as exc:
            refused = refused_option(exc.stderr, request.argv, job.project,
                                     spec.run_as.user if spec.run_as else None)
            if refused is not None:
                raise refused from None
            raise BackendError("launch_failed", f"sbatch refused job {job.id}: "
                                                f"{exc.stderr or exc}") from None
        slurm_id = parse_job_id(out)
        handle = attempt_handle(job.id, attempt, slurm_id, placement, files, self.config.pinned)
        if spec.port is not None:  # where rota reaches the job's server (``endpoint``)
            handle = serving(handle, placement, addresses, spec.port)
        self.before("save", files)
        files.save(handle)                                                           # 3
        self._track(handle)
        if self._releaser is not None:                                               # 4
            self._releaser.put(slurm_id)  # with the other launches of this pass
        else:
            self.before("release", files)
            release(self.commands, [slurm_id])  # a failure is retried by poll
        self.before("return", files)
        return handle

    def before(self, step: str, files: AttemptFiles) -> None:
        """Called before each step of a launch after the first (``sbatch``, ``save``,
        ``release``, ``return``); does nothing. Tests override it to stop a launch there, as
        a killed control plane would."""

    # -- recover -----------------------------------------------------------------------------

    def recover(self, job: Job, placement: Placement, attempt: int) -> Handle | None:
        """The handle of attempt ``attempt`` if it was submitted; None when it provably
        never was (module docstring)."""
        files = AttemptFiles.of(self.data_dir, job.id, attempt)
        if not files.submitted and not self._unsure:
            return None
        saved = files.saved()
        if saved is not None:
            handle = Handle.from_dict(saved, f"{files.private}/handle.json")
            self._release_if_held(handle)
            return self._track(handle)
        name = attempt_name(job.id, attempt)
        attempts.wait_inflight(name)
        ids = sorted(self._ids_named(name))
        if not ids:
            return None
        for extra in ids[1:]:
            self._duplicate(extra, name)
        handle = attempt_handle(job.id, attempt, ids[0], placement, files, self.config.pinned)
        if not files.submitted:  # submitted by the control plane this one took over from
            make_dirs(files.private.parent, 0o711)
            make_dirs(files.private, 0o700)
            files.intend(name)
        files.save(handle)
        self._release_if_held(handle)
        return self._track(handle)

    def taking_over(self, unsure: bool) -> None:
        """While ``unsure``, an attempt without files here may have been submitted by the
        control plane this one takes over from: ``recover`` asks Slurm for its name."""
        self._unsure = unsure

    def _ids_named(self, name: str) -> set[int]:
        return {j.id for j in (*self._named([name]), *self.accounting.named(name))
                if j.name == name and owner(j.name, j.comment, self.instance)}

    def _release_if_held(self, handle: Handle) -> None:
        self._release_held([j for j in self._named([str(handle.ref.get("name"))])
                            if j.id == slurm_job(handle)])
