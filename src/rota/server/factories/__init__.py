"""The factories of rota's own backends (``rota.server.factory.BackendFactory``), one module
each, registered by name in ``rota.server.backends``.

- ``local``: processes on this machine (``rota.backends.local``), with each job's limits and
  this machine's inventory as its options;
- ``slurm``: the cluster ``SLURM_CONF`` names (``rota.backends.slurm``); this machine only runs
  the control plane;
- ``kubernetes``: Pods rota binds on a cluster (``rota.backends.kube``); this machine's GPUs
  are never probed;
- ``several``: several of these at once (``--backend slurm,kubernetes``), made of their
  factories, over one inventory (``rota.backends.several``).
"""
