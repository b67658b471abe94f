"""The packing matrix report: every pod list x every policy, next to the reference.

    python docs/pack_matrix.py RESULTS_DIR [--plot docs/simulator-matrix.png]

``RESULTS_DIR`` holds one ``POLICY-LIST.json`` per cell, each the output of
``rota sim pack --policy POLICY --pods .../openb_pod_list_LIST.csv --seeds 42-51 --json``.
The reference is read from the trace's ``fgd-expected-results/analysis_allo_discrete.csv``
(allocation % per arrived bin; unallocated = 100 - allocation at bin 100). Prints a Markdown
table (mean ± sd over seeds, difference to the reference mean) and writes a bar plot in the
paper's style: unallocated GPU % at 100 % arrived per list, policies side by side, sd as
error bars. Cells not run yet are shown as ``-``.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT.parent / "shared/traces/alibaba-gpu-v2023/fgd-expected-results/analysis_allo_discrete.csv"
LISTS = ["default", "cpu050", "cpu100", "cpu250", "gpushare40", "gpushare80", "gpushare100",
         "gpuspec10", "gpuspec25", "gpuspec33", "multigpu20", "multigpu40", "multigpu50"]
POLICIES = {"random": "Random", "dotprod": "DotProd", "gpuclustering": "GpuClustering",
            "gpupacking": "GpuPacking", "bestfit": "BestFit", "fgd": "FGD", "capgd": "capgd"}


def reference(path: Path = REFERENCE) -> dict[tuple[str, str], list[float]]:
    """(list, policy) -> unallocated % at 100 % arrived, per seed, from the authors' results."""
    out: dict[tuple[str, str], list[float]] = defaultdict(list)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            lst = row["workload"].removeprefix("openb_pod_list_")
            pol = row["sc_policy"].split("-", 1)[1].lower()
            out[(lst, pol)].append(100 - float(row["100"]))
    return out


def ours(results: Path) -> dict[tuple[str, str], list[float]]:
    out = {}
    for lst in LISTS:
        for pol in POLICIES:
            f = results / f"{pol}-{lst}.json"
            if f.is_file():
                out[(lst, pol)] = json.loads(f.read_text())["unallocated_pct_at_100_per_seed"]
    return out


def _ms(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.2f} ± {sd:.2f}"


def table(mine: dict, ref: dict) -> str:
    head = "| list | " + " | ".join(POLICIES.values()) + " |"
    lines = [head, "|" + "---|" * (len(POLICIES) + 1)]
    for lst in LISTS:
        cells = []
        for pol in POLICIES:
            got, want = mine.get((lst, pol)), ref.get((lst, pol))
            if got is None:
                cells.append("-" if want is None else f"- (ref {statistics.fmean(want):.2f})")
            elif want is None:
                cells.append(f"**{_ms(got)}**")
            else:
                diff = statistics.fmean(got) - statistics.fmean(want)
                cells.append(f"{_ms(got)} ({diff:+.2f})")
        lines.append(f"| {lst} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(mine: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pols = [p for p in POLICIES if any((lst, p) in mine for lst in LISTS)]
    width = 0.8 / max(1, len(pols))
    fig, ax = plt.subplots(figsize=(14, 4.8))
    for k, pol in enumerate(pols):
        xs, ys, es = [], [], []
        for i, lst in enumerate(LISTS):
            v = mine.get((lst, pol))
            if v:
                xs.append(i + (k - (len(pols) - 1) / 2) * width)
                ys.append(statistics.fmean(v))
                es.append(statistics.stdev(v) if len(v) > 1 else 0.0)
        ax.bar(xs, ys, width, yerr=es, capsize=2, label=POLICIES[pol],
               hatch="//" if pol == "capgd" else None, edgecolor="black", linewidth=0.4)
    ax.set_xticks(range(len(LISTS)))
    ax.set_xticklabels(LISTS, rotation=20)
    ax.set_ylabel("unallocated GPU % at 100 % arrived")
    ax.set_title("packing on the Alibaba pod lists (tune 1.3, seeds 42-51, mean ± sd)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(ncol=len(pols), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--plot", type=Path)
    a = ap.parse_args()
    mine = ours(a.results)
    print(table(mine, reference()))
    if a.plot is not None:
        plot(mine, a.plot)


if __name__ == "__main__":
    main()
