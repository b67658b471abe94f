"""Queue quota with cohort borrowing and lending, as Kueue defines it.

For queue ``q``, flavour ``f`` and resource ``r`` (all amounts in the resource's unit):

- ``guaranteed = nominal - lending_limit`` when a lending limit is set, else 0: the part of the
  nominal quota that never goes to the cohort.
- The cohort's pool holds every member's lendable part, ``nominal - guaranteed``; members use
  it for everything above their guaranteed part: ``pool_used = sum(max(0, usage - guaranteed))``.
- ``available(q) = max(0, guaranteed - usage) + pool_left``, where ``pool_left =
  pool - pool_used``, further capped by the borrowing limit when one is set:
  ``pool_left <= (nominal - guaranteed) - max(0, usage - guaranteed) + borrowing_limit``.
- A queue without a cohort has ``available = nominal - usage``.

A resource a flavour's quota does not list is not limited. A queue with no quotas at all is
unlimited and charged to flavour ``any``. A queue is *borrowing* in a flavour when its usage of
some resource is above nominal; only borrowers' jobs are reclaimed by cohort preemption.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Mapping

from rota.core import ANY_FLAVOR, Flavor, Job, Queue, model_matches
from rota.core.decisions import Reason, ReasonCode

Key = tuple[str, str, str]  # (queue or cohort, flavour, resource)


class QuotaBook:
    def __init__(self, queues: Mapping[str, Queue], flavors: Mapping[str, Flavor],
                 active: Iterable[Job]) -> None:
        self.queues = queues
        self.flavors = flavors
        self.usage: dict[Key, int] = defaultdict(int)
        self.pool: dict[Key, int] = defaultdict(int)
        self.pool_used: dict[Key, int] = defaultdict(int)
        # answers of available() and refusals of check(), per (sharing group, flavour): a
        # charge changes only the answers of its queue's group (its cohort, or itself alone)
        self._answers: dict[tuple, dict[tuple, int | Reason | None]] = {}
        self._lent: dict[tuple[str, str], dict[str, tuple[int, Key]]] = {}  # see _lent_parts
        # each queue's share of its cohort's lent quota (``rota.scheduler.shares.share_of``),
        # kept until the queue is charged again: the share reads only the queue's own usage
        self.shares: dict[str, object] = {}
        for q in queues.values():
            if q.cohort is None:
                continue
            for f, quota in q.quotas.items():
                for r, nominal in quota.nominal.items():
                    self.pool[(q.cohort, f, r)] += nominal - self.guaranteed(q, f, r)
        for job in active:
            if job.queue in queues:
                self.charge(job.queue, job.flavor or ANY_FLAVOR, job.total(), 1)

    def guaranteed(self, q: Queue, f: str, r: str) -> int:
        quota = q.quotas[f]
        if r in quota.lending_limit:
            return quota.nominal[r] - quota.lending_limit[r]
        return 0

    def available(self, queue: str, f: str, r: str) -> int | None:
        """How much more of ``r`` queue may take in flavour ``f``; None means unlimited.

        Thousands of waiting jobs ask the same few questions between two charges, so answers
        are remembered until a charge in the queue's group and flavour."""
        answers = self._group_answers(queue, f)
        key = (queue, r)
        if key not in answers:
            answers[key] = self._compute_available(queue, f, r)
        return answers[key]  # type: ignore[return-value]

    def _group_answers(self, queue: str, f: str) -> dict[tuple, int | Reason | None]:
        cohort = self.queues[queue].cohort
        group = ("cohort", cohort) if cohort is not None else ("queue", queue)
        answers = self._answers.get((group, f))
        if answers is None:
            answers = self._answers[(group, f)] = {}
        return answers

    def _compute_available(self, queue: str, f: str, r: str) -> int | None:
        q = self.queues[queue]
        quota = q.quotas.get(f)
        if quota is None or r not in quota.nominal:
            return None
        nominal, used = quota.nominal[r], self.usage[(queue, f, r)]
        if q.cohort is None:
            return nominal - used
        guaranteed = self.guaranteed(q, f, r)
        local = max(0, guaranteed - used)
        key = (q.cohort, f, r)
        parent = self.pool[key] - self.pool_used[key]
        if r in quota.borrowing_limit:
            in_parent = max(0, used - guaranteed)
            parent = min(parent, nominal - guaranteed - in_parent + quota.borrowing_limit[r])
        return local + parent

    def check(self, queue: str, f: str, demand: Mapping[str, int]) -> Reason | None:
        """None if ``demand`` fits the queue's quota in ``f`` now, else the reason it does not."""
        quota = self.queues[queue].quotas.get(f)
        if quota is None:
            return None  # the flavour is not limited for this queue
        for r, amount in demand.items():
            if amount <= 0 or r not in quota.nominal:
                continue
            avail = self.available(queue, f, r)
            if avail is not None and amount > avail:
                return self._refusal(queue, f, r, amount, avail, quota.nominal[r])
        return None

    def admits(self, queue: str, f: str, demand: Mapping[str, int]) -> bool:
        """Whether ``demand`` fits the queue's quota in ``f`` now: ``check`` is None, without
        working out the reason (what-ifs ask only whether)."""
        quota = self.queues[queue].quotas.get(f)
        if quota is None:
            return True
        for r, amount in demand.items():
            if amount <= 0 or r not in quota.nominal:
                continue
            avail = self.available(queue, f, r)
            if avail is not None and amount > avail:
                return False
        return True

    def _refusal(self, queue: str, f: str, r: str, amount: int, avail: int, nominal: int) -> Reason:
        """The quota reason, one value per question, remembered like ``available``."""
        answers = self._group_answers(queue, f)
        key = (queue, r, amount)
        hit = answers.get(key)
        if hit is None:
            limit, capacity, lender = self._limit(queue, f, r, amount, nominal)
            detail = f"queue {queue}, flavour {f}" + (f", lender {lender}" if lender else "")
            hit = answers[key] = Reason(ReasonCode.QUOTA, r, amount, max(avail, 0), capacity,
                                        detail, limit)
        return hit  # type: ignore[return-value]

    def _limit(self, queue: str, f: str, r: str, amount: int, nominal: int
               ) -> tuple[str, int, str | None]:
        """Which limit holds ``amount`` back: (limit, its figure, the lender it names).

        ``nominal`` (no cohort: the queue's own quota); ``borrowing_limit`` (the queue would
        go above nominal + its borrowing limit: figure nominal + limit); ``lending_limit``
        (the cohort's lent quota is used up, and a member keeps unused quota back by its
        lending limit, enough to admit the job: figure that member's limit); else ``cohort``
        (everything lent is in use: figure the queue's nominal quota)."""
        q = self.queues[queue]
        if q.cohort is None:
            return "nominal", nominal, None
        quota = q.quotas[f]
        g, used = self.guaranteed(q, f, r), self.usage[(queue, f, r)]
        if r in quota.borrowing_limit and used + amount > nominal + quota.borrowing_limit[r]:
            return "borrowing_limit", nominal + quota.borrowing_limit[r], None
        key = (q.cohort, f, r)
        room = max(0, g - used) + self.pool[key] - self.pool_used[key]
        kept: list[tuple[int, str, int]] = []
        for m in self.queues.values():
            mq = m.quotas.get(f)
            if m.cohort != q.cohort or m.name == queue or mq is None or r not in mq.lending_limit:
                continue
            unused = max(0, self.guaranteed(m, f, r) - self.usage[(m.name, f, r)])
            if unused:
                kept.append((unused, m.name, mq.lending_limit[r]))
        if kept and room + sum(k[0] for k in kept) >= amount:
            _, lender, lent = max(kept, key=lambda k: (k[0], k[1]))
            return "lending_limit", lent, lender
        return "cohort", nominal, None

    def admissible_ever(self, queue: str, demand: Mapping[str, int], flavors: Iterable[str]) -> bool:
        """Whether ``demand`` could be admitted to the queue in one of ``flavors`` if every
        other job of the cohort were gone: its guaranteed part plus the whole pool, within
        its borrowing limit."""
        q = self.queues[queue]
        for f in flavors:
            quota = q.quotas.get(f)
            if quota is None:
                return True
            ok = True
            for r, nominal in quota.nominal.items():
                most = nominal if q.cohort is None else \
                    self.guaranteed(q, f, r) + self.pool[(q.cohort, f, r)]
                if r in quota.borrowing_limit:
                    most = min(most, nominal + quota.borrowing_limit[r])
                ok = ok and demand.get(r, 0) <= most
            if ok:
                return True
        return False

    def charge(self, queue: str, f: str, demand: Mapping[str, int], sign: int) -> None:
        """Add (``sign=1``) or remove (``-1``) ``demand`` from the queue's usage in ``f``.
        Resources of amount 0 change nothing and are passed over (a GPU job's quota vector
        lists cpu and memory at 0), as is a pool that no nominal quota feeds."""
        self._group_answers(queue, f).clear()
        self.shares.pop(queue, None)
        lent = self._lent.get((queue, f))
        if lent is None:
            lent = self._lent[(queue, f)] = self._lent_parts(queue, f)
        usage = self.usage
        for r, amount in demand.items():
            if not amount:
                continue
            key = (queue, f, r)
            before = usage[key]
            after = usage[key] = before + sign * amount
            part = lent.get(r)
            if part is not None:
                g, pool_key = part
                self.pool_used[pool_key] += max(0, after - g) - max(0, before - g)

    def _lent_parts(self, queue: str, f: str) -> dict[str, tuple[int, Key]]:
        """Per resource whose use above the guaranteed part counts against the cohort's pool:
        (guaranteed part, pool key). Fixed by the queues, so worked out once per queue and
        flavour."""
        q = self.queues[queue]
        quota = q.quotas.get(f)
        if q.cohort is None or quota is None:
            return {}
        return {r: (self.guaranteed(q, f, r), (q.cohort, f, r)) for r in quota.nominal}

    def borrowing(self, queue: str, f: str, resources: Iterable[str] | None = None) -> bool:
        """Whether the queue uses more than its nominal quota in ``f`` of some resource (of
        ``resources`` only, when given)."""
        quota = self.queues[queue].quotas.get(f)
        if quota is None:
            return False
        names = quota.nominal if resources is None else [r for r in resources if r in quota.nominal]
        return any(self.usage[(queue, f, r)] > quota.nominal[r] for r in names)

    def flavors_for(self, queue: Queue, job_models: tuple[str, ...], gpu_job: bool,
                    cluster_models: Iterable[str]) -> list[tuple[str, tuple[str, ...]]]:
        """Flavours (in the queue's order) the job may be charged to, each with the cluster's
        GPU models it then may run on."""
        matching = [m for m in cluster_models if model_matches(m, job_models)]
        names = list(queue.quotas) or [ANY_FLAVOR]
        out = []
        for name in names:
            flavor = self.flavors.get(name) or Flavor(name)
            models = tuple(m for m in matching if flavor.matches(m))
            if models or not gpu_job:
                out.append((name, models))
        return out
