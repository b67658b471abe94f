"""rota: a GPU cluster scheduler and workload manager for AI teams.

Layers (dependencies point upwards only):

- ``rota.core``: the pure domain model (resources, devices, nodes, jobs, queues).
- ``rota.scheduler``: ``run_cycle(snapshot, policy, now) -> decisions``, pure and synchronous.
- ``rota.spec``: the YAML file formats users write, validated into core objects.
- ``rota.cli``: the ``rota`` command line.
"""

__version__ = "0.1.0"
