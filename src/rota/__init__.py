"""rota: a GPU cluster scheduler and workload manager for AI teams.

Layers (dependencies point upwards only):

- ``rota.core``: the pure domain model (resources, devices, nodes, jobs, queues).
- ``rota.scheduler``: ``run_cycle(snapshot, policy, now) -> decisions``, pure and synchronous.
- ``rota.spec``: the YAML file formats users write, validated into core objects.
- ``rota.store``: persistence (SQLite by default, PostgreSQL), depends on core only.
- ``rota.backends``: where jobs run (``local``: processes on this machine; ``slurm``;
  ``kube``: Kubernetes), core only.
- ``rota.control``: the control loop, the one part with a loop and side effects: it reads the
  store, runs the scheduler and drives a backend.
- ``rota.simulator``: trace-driven simulation on the scheduler core, outside any control plane.
- ``rota.server``: composition: a running control plane (store, backend, control loop,
  accounts, API) built from a validated configuration.
- ``rota.client``: the HTTP client the command line talks to the API with.
- ``rota.api`` / ``rota.cli``: the HTTP API and the ``rota`` command line, the edges.
"""

__version__ = "0.1.0"
