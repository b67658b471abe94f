"""Readers for the Alibaba GPU-sharing trace (clusterdata ``openb``, 2023): node and pod lists.

Node list columns: ``sn, cpu_milli, memory_mib, gpu, model``.
Pod list columns: ``name, cpu_milli, memory_mib, num_gpu, gpu_milli`` and, in all but the
``multigpu*`` lists, ``gpu_spec, qos, pod_phase, creation_time, deletion_time, scheduled_time``
(optional here). The packing experiment uses none of the time columns; the co-hosting
experiment reads a pod's lifetime, ``deletion_time - creation_time`` (seconds; ``None`` when
either is empty, as for pods still pending when the trace was taken).

Invariants of what is returned: a pod's ``gpu_milli`` is in 1..1000 when it asks for GPUs and 0
when it does not; a share below 1000 is for exactly one device (what rota's ``GpuRequest``
allows); ``gpu_spec`` is a tuple of model names (empty: any model). A bad row raises
``TraceError`` naming the file, the line (1 is the header) and the column.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from rota.core import MILLI, GpuDevice, InvalidSpec, Node, NodeName

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
DEVICE_MEMORY_MIB = MILLI  # the trace has no GPU memory: 1 MiB per milli-GPU keeps them equal


class TraceError(InvalidSpec):
    """A trace file is unreadable or has a bad value; ``field`` is ``line N.column``."""

    code = "invalid_trace"

    def __init__(self, path: Path | str, line: int, column: str, reason: str) -> None:
        where = f"line {line}.{column}" if column else f"line {line}"
        super().__init__(where, reason)
        self.path, self.line, self.column = str(path), line, column

    def __str__(self) -> str:
        return f"{self.path}: {self.field}: {self.reason}"


@dataclass(frozen=True, slots=True)
class TraceNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True, slots=True)
class TracePod:
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_spec: tuple[str, ...] = ()
    created: int | None = None  # creation_time, seconds; None: not in the list
    deleted: int | None = None  # deletion_time, seconds; None: not in the list

    @property
    def lifetime(self) -> int | None:
        """Seconds from creation to deletion; None when either time is missing."""
        if self.created is None or self.deleted is None:
            return None
        return self.deleted - self.created

    @property
    def gpu_total(self) -> int:
        """Milli-GPU over all its devices."""
        return self.num_gpu * self.gpu_milli


def read_rows(path: Path, required: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    """A trace CSV's rows with their line numbers, once its header has every ``required``
    column; any trace reader's errors name the file, the line and the column."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            missing = [c for c in required if c not in header]
            if missing:
                raise TraceError(path, 1, missing[0],
                                 f"missing column; the header has: {', '.join(header) or 'nothing'}")
            return [(n, row) for n, row in enumerate(reader, start=2)]
    except OSError as exc:
        raise TraceError(path, 0, "", f"cannot read: {exc.strerror or exc}") from None
    except (csv.Error, UnicodeDecodeError) as exc:
        raise TraceError(path, 0, "", f"not a CSV file: {exc}") from None


def _int(path: Path, line: int, row: dict[str, str], column: str, lo: int, hi: int) -> int:
    text = (row.get(column) or "").strip()
    try:
        value = int(text)
    except ValueError:
        try:
            number = float(text)
        except ValueError:
            raise TraceError(path, line, column, f"expected an integer, got {text!r}") from None
        if number != int(number):
            raise TraceError(path, line, column, f"expected an integer, got {text!r}") from None
        value = int(number)
    if not lo <= value <= hi:
        raise TraceError(path, line, column, f"must be in {lo}..{hi}, got {value}")
    return value


def _time(path: Path, line: int, row: dict[str, str], column: str) -> int | None:
    """An optional time column (seconds); None when the layout has no such column or the
    row leaves it empty."""
    if not (row.get(column) or "").strip():
        return None
    return _int(path, line, row, column, 0, 10**12)


def load_nodes(path: Path | str) -> list[TraceNode]:
    """The node list; nodes without GPUs keep ``gpus == 0`` and an empty model."""
    path = Path(path)
    nodes, seen = [], set()
    for line, row in read_rows(path, NODE_COLUMNS):
        name = (row["sn"] or "").strip()
        if not name:
            raise TraceError(path, line, "sn", "must not be empty")
        if name in seen:
            raise TraceError(path, line, "sn", f"node {name!r} appears twice")
        seen.add(name)
        gpus = _int(path, line, row, "gpu", 0, 64)
        model = (row["model"] or "").strip()
        if model.lower() == "nan":
            model = ""
        if gpus and not model:
            raise TraceError(path, line, "model", f"a node with {gpus} GPUs needs a GPU model")
        nodes.append(TraceNode(name, _int(path, line, row, "cpu_milli", 0, 10**9),
                               _int(path, line, row, "memory_mib", 0, 10**12), gpus, model))
    if not nodes:
        raise TraceError(path, 1, "", "no nodes")
    return nodes


def load_pods(path: Path | str) -> list[TracePod]:
    """The pod list, in file order (both the 11- and the 5-column layouts)."""
    path = Path(path)
    pods = []
    for line, row in read_rows(path, POD_COLUMNS):
        name = (row["name"] or "").strip()
        if not name:
            raise TraceError(path, line, "name", "must not be empty")
        count = _int(path, line, row, "num_gpu", 0, 64)
        milli = _int(path, line, row, "gpu_milli", 0, MILLI)
        if count and not milli:
            raise TraceError(path, line, "gpu_milli", f"a pod with {count} GPUs needs a share in 1..1000")
        if milli and not count:
            milli = 0  # a share without devices asks for nothing
        if count > 1 and milli < MILLI:
            raise TraceError(path, line, "gpu_milli",
                             f"a share below 1000 is for one GPU, this pod asks for {count}")
        spec = (row.get("gpu_spec") or "").strip()
        models = () if spec.lower() in ("", "nan") else tuple(m for m in spec.split("|") if m)
        created = _time(path, line, row, "creation_time")
        deleted = _time(path, line, row, "deletion_time")
        if created is not None and deleted is not None and deleted < created:
            raise TraceError(path, line, "deletion_time",
                             f"{deleted} is before the creation_time {created}")
        pods.append(TracePod(name, _int(path, line, row, "cpu_milli", 0, 10**9),
                             _int(path, line, row, "memory_mib", 0, 10**12), count, milli, models,
                             created, deleted))
    if not pods:
        raise TraceError(path, 1, "", "no pods")
    return pods


def to_nodes(nodes: list[TraceNode]) -> tuple[Node, ...]:
    """rota nodes, in the list's order; a CPU-only node has no devices."""
    return tuple(
        Node(NodeName(n.name), n.cpu_milli, n.memory_mib,
             tuple(GpuDevice(i, n.model, DEVICE_MEMORY_MIB) for i in range(n.gpus)))
        for n in nodes)
