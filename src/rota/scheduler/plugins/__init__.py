"""The scheduler's policy plugins, one class per plugin, each registered by extension point and
name in ``registry`` (a policy picks one per point: ``rota.scheduler.policy``). Plugins are as
pure as the rest of the scheduler.

- ``registry``: the one registry: ``register``, and ``create(point, name, args)``, which
  validates a plugin's arguments and names the plugins that exist when asked for another;
- ``order``: ordering plugins, which pending job is tried next: ``fifo``, ``besteffort-fifo``,
  ``lifo``, ``priority``, ``drf``, ``fairshare``;
- ``jct``: ordering plugins aimed at job completion time: ``shortest-first``,
  ``fair-shortest-first``, ``las``;
- ``fairshare``: Kueue's fair sharing of a cohort's lent quota by queue weight: the order
  ``queue-share`` and the preemption ``fair-sharing``;
- ``admission``: may a job's queue take it now, and in which flavour: ``quota``, ``none``;
- ``score``: placement scoring of the nodes that fit a replica: ``binpack``, ``spread``,
  ``topology``, ``round-robin``;
- ``packing``: the packing placements of the GPU-sharing literature: ``random``, ``dotprod``,
  ``gpuclustering``, ``gpupacking``, ``bestfit``, ``fgd``;
- ``capacity``: the placement ``capgd``: FGD's fragmentation gradient with the task mix
  learned online (``Arrivals``, ``ArrivalMix``);
- ``fragment``: GPU fragmentation of a node with respect to a target workload (ATC '23), which
  ``packing`` and ``capacity`` score with;
- ``preempt``: preemption plugins with Kueue's rules: ``classic``, ``minimal-victims``;
- ``backfill``: EASY backfill, as Slurm's sched/backfill does it: ``easy``.
"""
