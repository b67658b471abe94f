"""Migration scripts, one per schema revision, oldest first (``down_revision`` links them).

Each is named after its revision and listed here with what it adds, so that the schema's
history reads in one place (a new migration adds its line):

- ``0001_initial``: projects, users, tokens, queues, flavours, nodes, jobs, events, usage;
- ``0002_lease_drain_bind``: leases, node drain with a reason, queues bound to projects, usage
  billed-until per job;
- ``0003_failures``: ``jobs.failures``, the requeues that spend the restart budget;
- ``0004_unix_user``: ``users.unix_user``, the OS account a user's jobs run as;
- ``0005_node_problem_foreign``: ``nodes.problem`` (why nothing may start there) and
  ``nodes.foreign`` (what work outside rota holds there);
- ``0006_attempts_holds``: ``attempts``, each attempt's history, and on jobs: held,
  ``lost_streak``, ``eligible_at``, ``last_checkpoint_at``;
- ``0007_idle_policies``: operators' idle reclamation defaults, per queue and for all;
- ``0008_depends_arrays``: ``jobs.depends``, and job arrays (``array_id``, ``array_index``,
  ``array_limit``);
- ``0009_fair_use_keys_disabled``: idempotency keys, fair-use caps, ``users.disabled_at``, and
  an index on jobs by user and state;
- ``0010_accounting``: ``attempts.gpus``, idle spans, prices, budgets;
- ``0011_services``: services and their model names;
- ``0012_gpu_months``: GPU-seconds of ended attempts per project and calendar month (UTC);
- ``0013_nominated``: ``jobs.nominated``, the jobs a cycle left waiting for their victims;
- ``0014_node_features``: ``nodes.features``, what a node can do (share a GPU, deliver signals,
  run containers), as its backend reports it;
- ``0015_queue_slurm``: ``queues.slurm``, a queue's batch options (partition, QOS, what its
  jobs may choose);
- ``0016_attempt_handle``: ``attempts.handle``, each attempt's backend handle, so that an
  ended attempt's logs can be read;
- ``0017_attempt_max_rss``: ``attempts.max_rss_kib``, each ended attempt's peak resident
  memory where its backend tells it;
- ``0018_datasets``: ``datasets``, ``dataset_caches`` and ``dataset_quotas``: datasets jobs
  read, what each node's cache holds, per-project quotas on cached bytes.
"""
