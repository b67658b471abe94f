"""rota: a GPU cluster scheduler and workload manager for AI teams.

Layers (dependencies point upwards only):

- ``rota.core``: the pure domain model (resources, devices, nodes, jobs, queues).
- ``rota.scheduler``: ``run_cycle(snapshot, policy, now) -> decisions``, pure and synchronous.
- ``rota.spec``: the YAML file formats users write, validated into core objects.
- ``rota.store``: persistence (SQLite by default, PostgreSQL), depends on core only.
- ``rota.backends``: where jobs run (``local``: processes on this machine), core only.
- ``rota.api`` / ``rota.cli``: the HTTP API and the ``rota`` command line, the edges.
"""

__version__ = "0.1.0"
