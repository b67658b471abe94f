"""The Kubernetes side of rota: the backend that schedules Pods on a real cluster, and the pure
translations it is made of.

The translations do no I/O and import no ``kubernetes`` client: ``api`` is the only module
that imports it, on first use, and only ``api``, ``informer``, ``lock``, ``tokens``,
``launch``, ``streams``, ``holds`` and ``backend`` make requests (``streams`` opens WebSockets with the
client's configuration).

Pure translations:

- ``quantity``: parses resource quantities as the API server does;
- ``names``: the labels, annotations and resource names rota reads and writes;
- ``nodes``: turns a Node object into rota's ``Node``, with what Kubernetes says about it;
- ``hami``: reads and writes HAMi's device annotations (on Nodes and on Pods);
- ``podinfo``: the small frozen ``PodInfo`` rota keeps of each Pod (identity, effective
  request, phase);
- ``pods``: builds the Pod rota creates for one replica of a placed job, and the headless
  Service of a gang;
- ``offers``: Pods that users created for rota to schedule, as offers of jobs;
- ``status``: how a replica's Pod is doing, as rota's ``ReplicaStatus``;
- ``usage``: what Pods outside rota hold on a node, as ``Foreign`` holdings.

What talks to the API server:

- ``api``: ``connect`` (finds the cluster as ``kubectl`` does) and ``KubeApi``, the requests
  rota makes, in plain JSON;
- ``informer``: a cache of one kind of object kept current by list and watch, in a thread;
- ``lock``: HAMi's node lock, taken and released as HAMi's scheduler does;
- ``tokens``: the Secret that holds an attempt's API token, which its Pods read (never a value
  in a Pod);
- ``holds``: placeholder Pods that hold a node's GPUs for rota's attempts on another engine;
- ``launch``: starting one attempt as a gang of Pods, all bound or none, and finding it again;
- ``streams``: a command run in a Pod's container (``pods/exec``) and a connection to a
  Pod's port (``pods/portforward``), each a duplex ``Channel`` over the API server;
- ``backend``: the Kubernetes ``Backend``: inventory, offers, launch, poll, signal, cancel and logs.
"""
