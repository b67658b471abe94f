"""What the conformance modules share: where each translated case comes from, and the
quota-only setting most upstream scheduler tests assume.

Every case names its upstream test (repository, commit, file, test function and case name),
and asserts the *upstream* expected outcome, translated to rota's terms: a job for a workload,
pod group or pod; a queue for a ClusterQueue or a Volcano queue; a cohort for a cohort; a
flavour for a ResourceFlavor. Where rota deliberately differs, the case asserts rota's
documented behaviour, says so in its ``divergence`` note, and a second assertion shows the
queue or policy option that gives the peer's answer (docs/scheduler.md, "rota vs Kueue /
Volcano / HAMi").
"""

from __future__ import annotations

from dataclasses import dataclass

from builders import node

KUEUE = "kubernetes-sigs/kueue@ff69552e79"
VOLCANO = "volcano-sh/volcano@ed72c7c81"
HAMI = "Project-HAMi/HAMi@4707fb02"


@dataclass(frozen=True)
class Upstream:
    """One upstream test case: ``repo@commit``, file, test function, case name."""

    repo: str
    path: str
    test: str
    case: str

    def __str__(self) -> str:
        return f"{self.repo} {self.path} {self.test}/{self.case}"


def roomy(name: str = "n", cpu: float = 1000, memory_gib: int = 4096, gpus: int = 0):
    """A node larger than any quota of the case: upstream quota tests have no nodes, so
    placement must never be what decides."""
    builder = node(name).cpu(cpu).memory(memory_gib)
    if gpus:
        builder = builder.gpus(gpus)
    return builder
