"""Slurm: what rota reads from a Slurm 22.05 cluster and what it asks of it.

The parsers and builders are pure functions that run no command: each parser is given the text
of a command whose argv sits beside it, and ``submit`` returns the ``sbatch`` argv and script
for one attempt. ``commands`` is the one module that starts a process.

Pure parsers and builders:

- ``text``: host lists, GRES and TRES strings;
- ``states``: Slurm's job and node states, what they mean to rota (pending, running, exited,
  lost; schedulable or not, and why), exit codes (``code:signal``), rota's job names;
- ``records``: typed records of ``sinfo --json``, ``squeue --json``, ``sacct --json`` (with
  its exit codes from the parseable format) and the partitions;
- ``nodes``: Slurm nodes as core ``Node`` objects, and the foreign allocations of jobs that
  rota did not submit;
- ``reservations``: Slurm reservations, from ``scontrol show reservation``: which nodes rota
  leaves alone, from when and until when;
- ``submit``: one placed attempt as an ``sbatch`` command and batch script;
- ``observe``: what one attempt is doing, from what Slurm reports, as the backend's ``Status``;
- ``summary``: what ``rota up --backend slurm`` says about the cluster when it starts.

The backend and what it runs:

- ``config``: the site's Slurm options (``rota up --slurm-...``), checked, and the backend
  built from them;
- ``commands``: running Slurm's commands with a clean environment;
- ``backend``: the Slurm ``Backend``: inventory, launch, recover, poll, signal and cancel,
  put together from ``launches`` and ``polls`` on ``view``, and holding the rest (early ends,
  the watch, signals and stops);
- ``view``: the base the parts share: the nodes as last read, the queue asked by name, the
  launches tracked, ``scancel``;
- ``launches``: submitting each attempt once, crash-safe, and recovering it;
- ``polls``: the status of attempts in bulk (``squeue``, ``sacct``, the whole queue when
  needed);
- ``handles``: what the handle of an attempt holds, built at launch and read back checked;
- ``attempts``: where each attempt's files live under the data directory, and whether it was
  submitted;
- ``early``: the ends that batch scripts report before Slurm does, kept until Slurm agrees;
- ``accounting``: what ``sacct`` says of rota's attempts, where the cluster keeps accounting;
- ``release``: releasing held jobs in batches, off the control loop's thread;
- ``watch``: waking the control loop soon after one of rota's Slurm jobs changes state;
- ``logs``: the attempts' output on the filesystem the nodes share with rota;
- ``interact``: commands (``srun --jobid --overlap``) and ports inside a running attempt;
- ``holds``: placeholder jobs that hold a node's GPUs for rota's attempts on another engine,
  and give them the indices Slurm chose.
"""
