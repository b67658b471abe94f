"""The ``rota`` command line: ``main`` (the entry point), ``app`` (the Typer app and error
convention), ``fast`` (``rota ps``, ``logs``, ``queues``, ``nodes`` and ``show`` without
Typer), ``plan`` (the dry-run loop and its report), ``render`` (rich tables), ``explain``
(reasons as sentences).

Every command that needs the cluster goes through ``rota.client`` to the API; none opens the
store. The fast path (``fast``, ``fastjobs`` and what they read: ``jobrows``,
``clusterrows``, ``showrows``, ``plain``, ``making``, ``environ``, ``failures``) imports none
of typer, rich or pydantic, and none of rota's domain model but what ``rota show`` words a
job's reasons with (``rota.core.jobwords``).

Starting and running the command:

- ``main``: the entry point (``rota = rota.cli.main:main``): the fast parser when it knows every
  word of the command line, else the Typer app;
- ``app``: the Typer app (``rota plan`` and the commands each module registers on it) and the
  error convention for every command;
- ``usage``: running the Typer app: one-line usage errors and help that says what to type;
- ``fast``: ``rota ps``, ``rota logs``, ``rota run``, ``rota submit``, ``rota queues``,
  ``rota nodes`` and ``rota show`` started in a few milliseconds, with a small parser of their
  own;
- ``fastjobs``: the fast ``rota run`` and ``rota submit FILE``: the file's bytes sent as they are,
  one request;
- ``failures``: how a command that talks to a server fails, in words and exit statuses both
  paths use;
- ``remote``: what every Typer command that talks to a server shares: connecting, errors, JSON.

The scientist's commands:

- ``jobs``: ``submit`` and ``run``, the job file validated locally first with ``rota.spec``;
- ``making``: what ``submit`` and ``run`` do around the request on either path: the directory
  uploaded, a job's default name, the lines printed, ``--wait``;
- ``environ``: which of the caller's variables a job gets (``rota run --export``, ``--env``,
  ``--env-file``, a job file's ``export``), read on both paths;
- ``choose``: which project and queue a new job goes to when nothing else says;
- ``upload``: packing a working directory as a tar.gz and uploading it with a progress bar;
- ``listing``: ``ps``, ``show``, ``logs`` and ``cancel`` (alias ``delete``);
- ``selection``: which jobs ``rota cancel`` names, as ``scancel``: IDs, whole arrays, an
  array's tasks (``88[3-9]``) and filters;
- ``jobrows``: what ``rota ps`` shows (columns, arrays folded into one line), read by both paths;
- ``clusterrows``: what ``rota queues`` and ``rota nodes`` show (columns, rows, the notes under
  the nodes), read by both paths;
- ``showrows``: what ``rota show`` shows (the parts of one job's page, worded and wrapped),
  read by both paths;
- ``detail``: ``rota show``'s parts printed with rich;
- ``logs``: a job's output on the terminal (``rota logs``, ``rota run --wait``, ``rota show``);
- ``lifecycle``: ``hold``, ``release``, ``update`` and, from inside a job, ``checkpoint``;
- ``interact``: inside running jobs: ``exec``, ``shell`` (an allocation with a terminal),
  ``attach`` and ``forward`` (a port of a job tunnelled to this machine);
- ``serving``: ``rota serve FILE``, ``rota services`` and ``rota services delete NAME``.
- ``datasets``: ``rota dataset create|ls|show|rm|quota``: datasets jobs read.

The cluster, access and operators' commands:

- ``login``: ``rota login URL``: a server and a token checked, then remembered (the token read
  from stdin or asked for, never from the command line);
- ``admin``: ``whoami``, ``token``, ``queues`` and ``nodes``, and where ``login`` and ``usage``
  are registered;
- ``accounting``: ``rota usage``: GPU-hours used, exactly or as fair share sees it, and budgets;
- ``people``: ``rota project``, ``rota user``, ``rota queue apply|delete`` and
  ``rota node cordon|drain|uncordon``.

The control plane on this machine:

- ``up``: ``rota up`` in the foreground: options parsed, ``rota.server`` builds and runs it;
- ``upflags``: the options of ``rota up``, declared once: flags, defaults and help;
- ``upoptions``: those options read into what ``rota.server.ServerConfig`` takes, each refusal
  naming its option;
- ``daemon``: ``rota up --detach`` and ``rota down``.

Planning and simulation:

- ``plan``: ``rota plan``: the scheduler run on a cluster and jobs until it settles, and its report;
- ``render``: the human output of ``rota plan`` (rich tables, summary, hints);
- ``explain``: scheduling reasons as sentences (``rota.core.wording`` and ``jobwords``);
- ``sim``: ``rota sim fetch``, ``pack`` and ``replay``: simulations on real cluster traces;
- ``sim_elastic``: ``rota sim elastic``: node-only autoscaling against rota's elastic planner
  with a GPU pool;
- ``sim_mix``: ``rota sim mix``: training, notebooks and services under rota's mechanisms;
- ``sim_data``: ``rota sim data``: jobs sharing datasets, placed obliviously, with Fluid-style
  affinity and by rota's time to first batch;
- ``sim_mig``: ``rota sim mig``: a static MIG geometry, a twice-daily calendar and the
  demand-driven planner on a diurnal workload;
- ``simflags``: the options the experiments of ``rota sim`` share, and reading their files.

Output:

- ``tables``: rich tables and wrapped sentences that fit the terminal without breaking a word;
- ``plain``: the terminal's width, plain tables and wrapped sentences for the fast path,
  printed as ``tables`` would;
- ``units``: amounts and durations as people read them, a light module for listing commands.
"""
