"""Idle reclamation, decided: a pure function of a running job's policy and what was seen of it.

Vocabulary, with the semantics of Backend.AI's idle checkers:

- ``IdlePolicy``: ``gpu_util_below`` percent for ``for_s`` (the job's GPUs, averaged, stayed
  under the threshold that long), ``inactive_for_s`` (no output and no API call about the job
  that long), ``max_lifetime_s`` (running that long, whatever it does); ``warn_before_s``: how
  long before it is reclaimed an interactive job is warned. Unset checks do not apply.
- ``effective(*policies)``: an operator's defaults (global, then the queue's) combined with the
  job's own: the job may only be stricter, so the strictest value of each check wins (a higher
  utilisation threshold, a shorter period); the warning keeps the longest notice asked for.
- ``Seen``: when the job started, since when its GPU utilisation has stayed below the
  threshold (``low_since``; None: it is not below now, or nothing is known), and its last
  activity (output or an API call).

``judge(policy, seen, now, interactive)`` answers ``Reclaim`` (with the check that was met),
``Warn`` (with the check and when it will be met, for interactive jobs inside the notice) or
``None``. A ``Check`` is data (``gpu-idle``, ``inactive``, ``lifetime`` with its figures); the
control plane says it in words.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

DEFAULT_WARN_S = 300.0


@dataclass(frozen=True, slots=True)
class IdlePolicy:
    gpu_util_below: float | None = None
    for_s: float | None = None
    inactive_for_s: float | None = None
    max_lifetime_s: float | None = None
    warn_before_s: float | None = None

    @property
    def empty(self) -> bool:
        return self.for_s is None and self.inactive_for_s is None and self.max_lifetime_s is None

    @classmethod
    def of(cls, data: object) -> IdlePolicy:
        """From the stored mapping (the job's ``run.idle``, an operator's default)."""
        if not isinstance(data, dict):
            return cls()
        return cls(**{f.name: _number(data.get(f.name)) for f in fields(cls)})


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def effective(*policies: IdlePolicy) -> IdlePolicy:
    """The strictest of each check over ``policies`` (defaults first, the job's last)."""
    def lowest(name: str) -> float | None:
        values = [getattr(p, name) for p in policies if getattr(p, name) is not None]
        return min(values) if values else None

    thresholds = [p.gpu_util_below for p in policies if p.gpu_util_below is not None]
    warns = [p.warn_before_s for p in policies if p.warn_before_s is not None]
    return IdlePolicy(max(thresholds) if thresholds else None, lowest("for_s"),
                      lowest("inactive_for_s"), lowest("max_lifetime_s"),
                      max(warns) if warns else None)


@dataclass(frozen=True, slots=True)
class Seen:
    started_at: float
    low_since: float | None = None
    last_activity: float | None = None


@dataclass(frozen=True, slots=True)
class Check:
    """The check that reclaims a job: ``gpu-idle`` (below ``threshold`` percent for
    ``period_s``), ``inactive`` (no output and no API call for ``period_s``) or ``lifetime``
    (running for ``period_s``)."""

    kind: str
    period_s: float
    threshold: float | None = None


@dataclass(frozen=True, slots=True)
class Reclaim:
    check: Check


@dataclass(frozen=True, slots=True)
class Warn:
    at: float      # when it will be reclaimed, if nothing changes
    check: Check


def judge(policy: IdlePolicy, seen: Seen, now: float,
          interactive: bool) -> Reclaim | Warn | None:
    due = _due(policy, seen)
    if due is None:
        return None
    at, check = due
    if now >= at:
        return Reclaim(check)
    notice = policy.warn_before_s if policy.warn_before_s is not None else DEFAULT_WARN_S
    if interactive and now >= at - notice:
        return Warn(at, check)
    return None


def _due(policy: IdlePolicy, seen: Seen) -> tuple[float, Check] | None:
    """When the first check will be met, and which; None when no check can be met."""
    found: list[tuple[float, Check]] = []
    if policy.max_lifetime_s is not None:
        found.append((seen.started_at + policy.max_lifetime_s,
                      Check("lifetime", policy.max_lifetime_s)))
    if policy.for_s is not None and policy.gpu_util_below is not None \
            and seen.low_since is not None:
        found.append((seen.low_since + policy.for_s,
                      Check("gpu-idle", policy.for_s, policy.gpu_util_below)))
    if policy.inactive_for_s is not None:
        last = seen.last_activity if seen.last_activity is not None else seen.started_at
        found.append((max(last, seen.started_at) + policy.inactive_for_s,
                      Check("inactive", policy.inactive_for_s)))
    return min(found, key=lambda f: f[0]) if found else None
