"""CLI start-up benchmark: wall time of short ``rota`` commands, and what importing costs.

    python bench/cli.py                 # 11 runs of each command, median and fastest
    python bench/cli.py --runs 15 --json
    git archive ecb6266 src | tar -x -C /tmp/before    # an earlier rota to compare with
    python bench/cli.py --baseline /tmp/before/src
    python bench/cli.py --jobs 10000    # also rota ps over 10,000 queued jobs

A real ``rota up --port 0 --gpus 4xH100-80GB`` runs in a subprocess (temporary XDG and data
directories, as in ``bench/control.py``); each command is the installed ``rota`` script in a
fresh process with that server's credentials, timed from spawn to exit with
``time.perf_counter``, and its CPU time (user and system, from ``getrusage``: the command's
own work, without the wait for the server). The commands: ``rota --help`` (no server), ``rota ps`` (one request),
``rota ps -A --json``, ``rota logs ID`` (a finished job's output, two requests), ``rota show
ID`` (that job: two requests), ``rota queues`` and ``rota nodes`` (one request each), ``rota run`` and ``rota submit FILE``
(each queues a job that waits behind one holding the 4 GPUs, so nothing runs while it is
measured), the latter of a YAML file and of the same job as a ``.json`` file.
``import rota.cli.main`` is the import alone, timed inside a fresh interpreter; ``modules``
says whether the heavy ones (typer, rich, pydantic, FastAPI, SQLAlchemy, the scheduler, numpy,
matplotlib) were loaded by each command (``-X importtime``, in a run of its own).

``--jobs N`` then queues N more jobs (they wait behind the one holding the GPUs), then times ``rota ps`` (the newest 1,000, and the note that more exist), ``rota ps
--limit N`` (all of them, in pages of 10,000 brief views, or 1,000 full ones before them),
``rota show`` of the newest of them (a pending job: its reasons and estimate), ``rota queues``
and ``rota nodes`` with those jobs in the store, and
from this process one ``GET /v1/jobs?limit=1000``, one ``GET /v1/jobs?view=brief&limit=N``
(at most 10,000) and the same with the ``columns`` that ``rota ps``'s default table asks for,
which are the server's share.

``--baseline SRC`` also runs every command with ``PYTHONPATH=SRC`` (another checkout's
``src``), alternating run by run with this tree's, so that both see the same load on a shared
machine; the server is this tree's for both.

Each tree's bytecode is compiled first (``compileall``), as ``pip install`` does for an
installed rota: where ``PYTHONDONTWRITEBYTECODE`` is set (as on the build machine) and nothing
had compiled it, every command would compile the modules it imports from source, 10 to 15 ms
of each start, which no installed rota pays.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from control import server  # noqa: E402
from rota.cli.jobrows import DEFAULT, values_for  # noqa: E402

TABLE = values_for(DEFAULT)  # the values of brief views rota ps's default table asks for

HEAVY = ("typer", "rich", "pydantic", "fastapi", "sqlalchemy", "rota.scheduler", "rota.store",
         "numpy", "matplotlib", "uvicorn")
PROBE = ("import sys, time, json; t = time.perf_counter(); import rota.cli.main; "
         "print(json.dumps({'s': time.perf_counter() - t, 'heavy': [m for m in %r "
         "if m in sys.modules]}))" % (HEAVY,))
JOB_FILE = "name: bench\nentrypoint: 'true'\nresources: {gpu: 1, cpu: 10m, memory: 16Mi}\n"
JOB = {"name": "bench", "entrypoint": "true", "resources": {"gpu": 1, "cpu": "10m",
                                                             "memory": "16Mi"}}  # the same


def rota_script() -> list[str]:
    script = Path(sys.executable).parent / "rota"
    found = str(script) if script.exists() else shutil.which("rota")
    return [found] if found else [sys.executable, "-m", "rota.cli.main"]


def commands(logged: str, job_file: Path) -> list[tuple[str, list[str]]]:
    json_file = job_file.with_suffix(".json")
    return [("rota --help", ["--help"]), ("rota ps", ["ps"]),
            ("rota ps -A --json", ["ps", "-A", "--json"]),
            (f"rota logs {logged}", ["logs", logged]), (f"rota show {logged}", ["show", logged]),
            ("rota queues", ["queues"]), ("rota nodes", ["nodes"]),
            ("rota run --gpus 1 -- true", ["run", "--gpus", "1", "--", "true"]),
            ("rota submit JOB.yaml", ["submit", str(job_file)]),
            ("rota submit JOB.json", ["submit", str(json_file)])]


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Seconds from spawn to exit, the CPU seconds the command used (user and system: what
    is not waiting for the server), and the last line it printed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return took, cpu, (done.stdout.strip().splitlines() or [""])[-1]


def loaded(argv: list[str], env: dict[str, str]) -> list[str]:
    """The heavy modules a command imports (``-X importtime`` lists every import)."""
    command = [sys.executable, "-X", "importtime", "-c",
               "import sys; from rota.cli.main import main; sys.argv[0] = 'rota'; main()",
               *argv[len(rota_script()):]]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    names = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
             if line.startswith("import time:")}
    return [m for m in HEAVY if m in names]


def measure(envs: dict[str, dict[str, str]], runs: int,
            cases: list[tuple[str, list[str]]]) -> list[dict]:
    """Every command ``runs`` times in each environment, alternating between them."""
    cases = [("import rota.cli.main", [sys.executable, "-c", PROBE])] + \
        [(name, rota_script() + argv) for name, argv in cases]
    results = []
    for name, argv in cases:
        times: dict[str, list[float]] = {label: [] for label in envs}
        cpus: dict[str, list[float]] = {label: [] for label in envs}
        heavy: dict[str, list[str]] = {}
        for _ in range(runs):
            for label, env in envs.items():
                took, cpu, last = run_once(argv, env)
                if argv[1] == "-c":
                    probe = json.loads(last)
                    took, heavy[label] = probe["s"], probe["heavy"]
                times[label].append(took)
                cpus[label].append(cpu)
        for label, env in envs.items():
            if label not in heavy:
                heavy[label] = loaded(argv, env)
        for label, values in times.items():
            results.append({"tree": label, "command": name, "median_s": statistics.median(values),
                            "min_s": min(values), "cpu_s": statistics.median(cpus[label]),
                            "modules": heavy.get(label)})
    return results


def job_until(s, entrypoint: list[str], gpus: int, state: str) -> str:
    """A job of ``entrypoint`` on ``gpus`` GPUs, once it is in ``state`` (at most a minute)."""
    job = s.api.post("/v1/jobs", json={
        "project": "default", "queue": "default", "entrypoint": entrypoint,
        "resources": {"gpu": gpus, "cpu": "10m", "memory": "16Mi"}}).json()["id"]
    end = time.monotonic() + 60
    while s.api.get(f"/v1/jobs/{job}").json()["state"] != state:
        if time.monotonic() > end:
            raise SystemExit(f"job {job} did not become {state}")
        time.sleep(0.2)
    return job


def finished_job(s) -> str:
    """A job that printed a line and ended: what ``rota logs`` reads."""
    return job_until(s, ["echo", "hello from rota"], 0, "succeeded")


def hold_gpus(s) -> None:
    """A job that holds the 4 GPUs for an hour: every job that asks for one waits."""
    job_until(s, ["sleep", "3600"], 4, "running")


def queue_jobs(s, n: int) -> float:
    """``n`` more jobs that wait; seconds it took to queue them."""
    start = time.perf_counter()
    body = {"project": "default", "queue": "default", "entrypoint": ["true"],
            "resources": {"gpu": 1, "cpu": "10m", "memory": "16Mi"}}

    def submit(k: int) -> None:
        answer = s.api.post("/v1/jobs", json={**body, "name": f"wait-{k}"})
        answer.raise_for_status()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(submit, range(n)))
    return time.perf_counter() - start


def server_page(s, runs: int, **params: object) -> float:
    """Median seconds of one ``GET /v1/jobs`` of queued jobs (``limit=1000`` unless
    ``params`` say otherwise), from this process."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        s.api.get("/v1/jobs", params={"limit": 1000, "state": "pending", **params}
                     ).raise_for_status()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--baseline", metavar="SRC", help="another rota's src directory")
    parser.add_argument("--jobs", type=int, default=0, metavar="N",
                        help="also time rota ps over N queued jobs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    extra: dict = {"load_before": os.getloadavg()[0]}
    with server() as s, tempfile.TemporaryDirectory(prefix="rota-bench-cli-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ROTA_")}
        env.update(ROTA_URL=s.url,
                   ROTA_TOKEN=s.token,
                   ROTA_PROJECT="default", ROTA_QUEUE="default")
        envs = {"this": {**env, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}}
        if args.baseline:
            envs["baseline"] = {**env, "PYTHONPATH": str(Path(args.baseline).resolve())}
        for tree in envs.values():
            subprocess.run([sys.executable, "-m", "compileall", "-q", tree["PYTHONPATH"]],
                           check=True, stdout=subprocess.DEVNULL)
        job_file = Path(tmp) / "job.yaml"
        job_file.write_text(JOB_FILE)
        job_file.with_suffix(".json").write_text(json.dumps(JOB))
        logged = finished_job(s)
        hold_gpus(s)
        results = measure(envs, args.runs, commands(logged, job_file))
        if args.jobs:
            extra["queued_s"] = queue_jobs(s, args.jobs)
            extra["server_page_s"] = server_page(s, args.runs)
            extra["server_brief_s"] = server_page(s, args.runs, limit=min(args.jobs, 10_000),
                                                  view="brief")
            extra["server_table_s"] = server_page(s, args.runs, limit=min(args.jobs, 10_000),
                                                  view="brief", columns=",".join(TABLE))
            last = str(s.api.get("/v1/jobs", params={"limit": 1}).json()["items"][0]["id"])
            results += measure(envs, args.runs, [
                (f"rota ps ({args.jobs} queued)", ["ps"]),
                (f"rota ps --limit {args.jobs}", ["ps", "--limit", str(args.jobs)]),
                (f"rota show PENDING ({args.jobs} queued)", ["show", last]),
                (f"rota queues ({args.jobs} queued)", ["queues"]),
                (f"rota nodes ({args.jobs} queued)", ["nodes"]),
            ])[len(envs):]  # no second probe
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"results": results, "load": load, **extra}, indent=2))
        return
    print(f"{args.runs} runs each; 1-minute load average {extra['load_before']:.1f} before, "
          f"{load:.1f} after")
    if args.jobs:
        print(f"{args.jobs} jobs queued in {extra['queued_s']:.0f} s; from this process, one "
              f"GET /v1/jobs?limit=1000: {extra['server_page_s'] * 1000:.0f} ms, one "
              f"GET /v1/jobs?view=brief&limit={min(args.jobs, 10_000)}: "
              f"{extra['server_brief_s'] * 1000:.0f} ms, with the default table's columns "
              f"{extra['server_table_s'] * 1000:.0f} ms (medians)")
    print("| tree | command | median | fastest | CPU (median) | heavy modules imported |")
    print("|---|---|--:|--:|--:|---|")
    for r in results:
        heavy = "" if r["modules"] is None else ", ".join(r["modules"]) or "none"
        print(f"| {r['tree']} | `{r['command']}` | {r['median_s'] * 1000:.0f} ms "
              f"| {r['min_s'] * 1000:.0f} ms | {r['cpu_s'] * 1000:.0f} ms | {heavy} |")


if __name__ == "__main__":
    main()
