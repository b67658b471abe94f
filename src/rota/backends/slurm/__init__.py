"""Slurm: what rota reads from a Slurm 22.05 cluster and what it asks of it, as pure functions.

Nothing here runs a command: each parser is given the text of a command whose argv sits
beside it, and ``submit`` returns the ``sbatch`` argv and script for one attempt.

- ``text``: host lists, GRES and TRES strings;
- ``states``: Slurm's job and node states, what they mean to rota (pending, running, exited,
  lost; schedulable or not, and why), exit codes (``code:signal``), rota's job names;
- ``records``: typed records of ``sinfo --json``, ``squeue --json``, ``sacct --json`` (with
  its exit codes from the parseable format) and the partitions;
- ``nodes``: Slurm nodes as core ``Node`` objects, and the foreign allocations of jobs that
  rota did not submit;
- ``submit``: one placed attempt as an ``sbatch`` command and batch script;
- ``handles``: what the handle of an attempt holds, built at launch and read back checked;
- ``early``: the ends that batch scripts report before Slurm does, kept until Slurm agrees.
"""
