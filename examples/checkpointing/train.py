"""A training job that survives preemption: it checkpoints on rota's signal and resumes.

Plain Python (no GPU, no package needed): it fits y = 3x - 2 by stochastic gradient descent,
one small batch per step, each batch drawn from a generator seeded by the step number, so that
the result depends only on the number of steps, never on how often the run was interrupted.
With ``--torch`` the same model is trained with PyTorch (``torch.nn.Linear`` and SGD), on the
GPU when one is visible.

What it does with rota:

- it resumes from ``$ROTA_CHECKPOINT_DIR/state.json`` (the same directory for every attempt of
  the job) when a checkpoint is there, and says from which step;
- every ``--every`` steps, and when it gets the checkpoint signal (``checkpoint.signal`` in the
  job file; SIGUSR1 below), it writes the checkpoint atomically and tells rota
  (``POST $ROTA_URL/v1/jobs/$ROTA_JOB_ID/checkpoint`` with ``$ROTA_TOKEN``, the attempt's own
  token), so that a preemption counts only the work since then as lost;
- on SIGTERM (the stop that follows the grace period) it checkpoints and exits 143;
- at the end it prints ``result: w=... b=...`` and writes ``result.json``.

    python train.py --steps 400 --step-seconds 0.01
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import ssl
import sys
import time
import urllib.request
from pathlib import Path

STEP_SIZE = 0.05
BATCH = 8


def batch(step: int) -> list[tuple[float, float]]:
    """The samples of ``step``: the same for a given step in every run."""
    rng = random.Random(1_000_003 * 7 + step)
    return [(x, 3.0 * x - 2.0 + rng.gauss(0.0, 0.1))
            for x in (rng.uniform(-1.0, 1.0) for _ in range(BATCH))]


class Plain:
    """w and b as floats; a step of SGD on one batch."""

    def __init__(self, state: dict | None) -> None:
        self.w, self.b = (state["w"], state["b"]) if state else (0.0, 0.0)

    def step(self, samples: list[tuple[float, float]]) -> None:
        gw = sum(2 * (self.w * x + self.b - y) * x for x, y in samples) / len(samples)
        gb = sum(2 * (self.w * x + self.b - y) for x, y in samples) / len(samples)
        self.w -= STEP_SIZE * gw
        self.b -= STEP_SIZE * gb

    def state(self) -> dict:
        return {"w": self.w, "b": self.b}


class Torch:
    """The same model with PyTorch: a 1-in 1-out linear layer, mean squared error, plain SGD."""

    def __init__(self, state: dict | None) -> None:
        import torch
        self.torch = torch
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.model = torch.nn.Linear(1, 1, dtype=torch.float64).to(self.device)
        with torch.no_grad():
            self.model.weight.fill_(state["w"] if state else 0.0)
            self.model.bias.fill_(state["b"] if state else 0.0)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=STEP_SIZE)

    def step(self, samples: list[tuple[float, float]]) -> None:
        t = self.torch
        x = t.tensor([[s[0]] for s in samples], dtype=t.float64, device=self.device)
        y = t.tensor([[s[1]] for s in samples], dtype=t.float64, device=self.device)
        self.opt.zero_grad()
        t.nn.functional.mse_loss(self.model(x), y).backward()
        self.opt.step()

    def state(self) -> dict:
        return {"w": self.model.weight.item(), "b": self.model.bias.item()}


def load(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def save(path: Path, step: int, model) -> None:
    """Write the checkpoint atomically (a crash mid-write leaves the previous one)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"step": step, **model.state()}))
    os.replace(tmp, path)
    report_checkpoint()


def report_checkpoint() -> None:
    """Tell rota a checkpoint was just written; quietly skipped outside rota."""
    url, token, job = (os.environ.get(k) for k in ("ROTA_URL", "ROTA_TOKEN", "ROTA_JOB_ID"))
    if not (url and token and job):
        return
    request = urllib.request.Request(f"{url}/v1/jobs/{job}/checkpoint", method="POST",
                                     headers={"Authorization": f"Bearer {token}"})
    context = ssl.create_default_context(cafile=os.environ.get("ROTA_CA_FILE") or None)
    try:
        urllib.request.urlopen(request, timeout=5, context=context).close()
    except OSError as exc:
        print(f"note: could not report the checkpoint to rota: {exc}", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--every", type=int, default=100, help="checkpoint every N steps")
    parser.add_argument("--step-seconds", type=float, default=0.01)
    parser.add_argument("--torch", action="store_true", help="train with PyTorch")
    args = parser.parse_args()

    checkpoints = Path(os.environ.get("ROTA_CHECKPOINT_DIR", "checkpoints"))
    checkpoints.mkdir(parents=True, exist_ok=True)
    path = checkpoints / "state.json"
    state = load(path)
    model = Torch(state) if args.torch else Plain(state)
    start = state["step"] if state else 0
    print(f"attempt {os.environ.get('ROTA_ATTEMPT', '0')}: "
          + (f"resumed from step {start}" if state else "starting from step 0"), flush=True)

    wanted: list[int] = []
    for sig in (signal.SIGUSR1, signal.SIGTERM):
        signal.signal(sig, lambda s, _f: wanted.append(s))
    step = start
    while step < args.steps:
        model.step(batch(step))
        step += 1
        time.sleep(args.step_seconds)
        if wanted or step % args.every == 0:
            save(path, step, model)
            why = "on signal " + signal.Signals(wanted[0]).name if wanted else "periodic"
            print(f"checkpoint at step {step} ({why})", flush=True)
        if signal.SIGTERM in wanted:
            print(f"stopping at step {step}", flush=True)
            return 128 + signal.SIGTERM
        wanted.clear()
    result = model.state()
    Path("result.json").write_text(json.dumps({"steps": step, **result}))
    print(f"result: w={result['w']:.6f} b={result['b']:.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
