"""Trace-driven simulation on rota's scheduler core: trace readers (``alibaba``), the packing
engine and its metrics (``pack``), summaries and plots (``report``).

The simulator calls the scheduler (``rota.scheduler``) as the control plane does and has no
scheduling logic of its own; it imports ``rota.core``, ``rota.scheduler`` and itself only.

Traces:

- ``fetch``: the public traces ``rota sim`` reads, downloaded into a cache directory and
  checked against their SHA-256 where it is known;
- ``alibaba``: readers of the Alibaba GPU-sharing trace (``openb``, 2023): node and pod lists;
- ``philly``: reader of the Microsoft Philly job list (``philly.csv``), jobs and their tenants;
- ``expfile``: the checks the experiments' files share (keys, numbers, seeds, lists of names).

Packing (``rota sim pack``), the experiment of "Beware of Fragmentation" (ATC '23):

- ``pack``: one run of a pod list, a policy and a seed on rota's placement core, and its metrics;
- ``report``: summaries of packing runs over seeds, and a plot.

Replay (``rota sim replay``), a job trace on a virtual clock:

- ``replay``: the replay driving ``run_cycle`` from arrival and end events;
- ``quiet``: repeated quiet cycles the replay need not run, because they would change nothing;
- ``checkpoints``: periodic checkpoints in a replay: what an eviction loses;
- ``replay_metrics``: measures of a replay per job (JCT, queueing delay, slowdown) and per
  policy;
- ``replay_report``: a table row per policy and a plot of replays.

Co-hosting (``rota sim cohost``), Kubernetes pods and Slurm gangs on the same nodes:

- ``cohost_workload``: the experiment's parameters (its file), the cluster, the static split,
  and the mixed workload drawn from the Alibaba pods and the Philly jobs;
- ``cohost``: one run of a workload under a regime (static split, node, GPU or fraction
  grain), each side's cycles on its own base, the other side's work held at the regime's grain;
- ``cohost_report``: measures per side (allocation, queueing delay, JCT, pods placed), over
  seeds, a table row per regime and a plot.

Elastic capacity (``rota sim elastic``), node-only autoscaling against rota's planner with a
GPU pool:

- ``elastic_workload``: the experiment's parameters (its file) and its workload, a Philly
  virtual cluster's day;
- ``elastic``: one run of a regime (``node-only`` or ``pool``) on a virtual clock, the cycle's
  waits handed to the regime's scaler;
- ``elastic_autoscaler``: cluster-autoscaler's scale-up and scale-down, modelled, the baseline;
- ``elastic_report``: measures per run (pending-to-running, GPU-node-hours, cost, double
  attaches), over seeds, a table row per regime and a plot.

Mixed workload (``rota sim mix``), training, notebooks and services under rota's mechanisms:

- ``mix_config``: the experiment's parameters (its file), checked, and its configurations;
- ``mix_workload``: one seed's training gangs, notebook sessions and services with their
  requests;
- ``mix``: one run of a workload under a configuration, on ``run_cycle``;
- ``mix_report``: measures (allocation, useful utilisation, JCT, time to start, SLO, cost),
  over seeds, a table row per configuration and a plot.

Datasets (``rota sim data``), jobs that share datasets on nodes with dataset caches:

- ``data_workload``: the experiment's parameters (its file), checked, and one seed's datasets
  (Zipf popularity, log-uniform sizes) and jobs;
- ``data``: one run of a workload under a regime (oblivious, Fluid-style soft or required
  affinity, rota's time to first batch), on ``run_cycle``, with per-node caches;
- ``data_report``: measures (JCT, p99 queueing delay, time to first batch, cache hit ratio,
  bytes copied), over seeds, the marks, a table row per regime and a plot.

MIG repartitioning (``rota sim mig``), a static geometry, a twice-daily calendar and the
demand-driven planner (``rota.scheduler.migdemand``):

- ``mig_workload``: the experiment's parameters (its file) and its diurnal workload, drawn
  from the Alibaba pods' and the Philly jobs' hour-of-day arrivals;
- ``mig``: one run of a regime on a virtual clock, GPUs switched between geometries;
- ``mig_report``: measures (GPU-hours used, queueing delay and JCT per class, switches,
  downtime, work lost, cost), over seeds, a table row per regime and a plot.
"""
