"""Admission plugins: may a job's queue take it now, and in which flavour.

``quota`` applies Kueue's nominal quota, cohort borrowing and lending (``rota.scheduler.quota``);
``none`` admits everything (placement alone decides), charging flavour ``any`` for the record.
Each has ``check`` (None, or the reason it refuses) and ``admits`` (whether ``check`` is None,
for what-ifs that need no reason).
"""

from __future__ import annotations

from typing import Mapping

from rota.core.decisions import Reason
from rota.scheduler.plugins.registry import NoArgs, register
from rota.scheduler.quota import QuotaBook


@register("admission")
class QuotaAdmission:
    name = "quota"

    def __init__(self, args: NoArgs) -> None:
        pass

    def check(self, book: QuotaBook, queue: str, flavor: str, demand: Mapping[str, int]) -> Reason | None:
        return book.check(queue, flavor, demand)

    def admits(self, book: QuotaBook, queue: str, flavor: str, demand: Mapping[str, int]) -> bool:
        return book.admits(queue, flavor, demand)


@register("admission")
class NoAdmission(QuotaAdmission):
    name = "none"

    def check(self, book: QuotaBook, queue: str, flavor: str, demand: Mapping[str, int]) -> Reason | None:
        return None

    def admits(self, book: QuotaBook, queue: str, flavor: str, demand: Mapping[str, int]) -> bool:
        return True
