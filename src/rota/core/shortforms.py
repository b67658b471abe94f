"""Amounts, durations and placements in the short forms of ``rota ps``: the one definition that
``rota.core.wording`` and ``rota.core.jobwords`` (``rota show``, the dashboard) and the fast
path of ``rota ps`` (``rota.cli.jobrows``) all use, so that they never word a job differently.

It imports nothing, and importing ``rota.core`` loads none of the domain model until a name of
it is asked for, so ``rota ps`` reads this module without the dataclasses and enums of the rest
(about 50 ms, more than the command's whole start).

- ``duration``: ``1h30m``; ``age``: how long ago, ``-`` for no time;
- ``memory``: ``2 GiB``, ``79.6 GiB``, ``512 MiB``;
- ``gpus``: what a job asks for in GPUs, ``1``, ``0.5 (20 GiB)``, ``2x4``;
- ``placement``: where its replicas run, ``n1: GPU 0,1``;
- ``reason_column``: the reason of its last move, else the codes of its wait reasons;
- ``counted``: a number and its noun, plural where it must be: ``1 job``, ``3 jobs``;
- ``node_state``: a node's state in a word, with the reason;
- ``state_word``: its state, ``starting`` for a SCHEDULED job whose backend holds its launch
  unstarted (its reason begins with ``STARTING``, as the control loop writes it).
"""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 job``, ``3 jobs``, ``0 jobs``."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


STARTING = "starting: "  # the reason of a launched job its backend has not started yet


def state_word(state: str, reason: str | None) -> str:
    """``scheduled`` with a reason ``starting: ...`` -> ``starting``; any other state as is."""
    if state == "scheduled" and reason and reason.startswith(STARTING):
        return "starting"
    return state


def duration(seconds: float) -> str:
    """``5400`` -> ``1h30m``; ``45`` -> ``45s``; ``0`` -> ``now``."""
    s = int(round(seconds))
    if s <= 0:
        return "now"
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    parts = [f"{v}{u}" for v, u in ((d, "d"), (h, "h"), (m, "m"), (s, "s")) if v]
    return "".join(parts[:2])


def age(since: float | None, now: float) -> str:
    """How long ago ``since`` was: ``1h30m``; ``-`` for no time."""
    return "-" if since is None else duration(now - since)


def memory(mib: float | int | None) -> str:
    """``2048`` -> ``2 GiB``; ``81559`` -> ``79.6 GiB``; ``512`` -> ``512 MiB``."""
    if mib is None:
        return "?"
    if mib < 1024:
        return f"{mib:g} MiB"
    gib = mib / 1024
    return f"{gib:g} GiB" if gib == int(gib) else f"{gib:.1f} GiB"


def gpus(count: int, share: int, memory_mib: int | None, replicas: int) -> str:
    """``1``, ``0.5 (20 GiB)``, ``2x4`` (replicas x per replica); ``-`` for none. ``share`` is
    in thousandths of a GPU."""
    if count == 0:
        return "-"
    per = f"{share / 1000:g}" if share < 1000 else str(count)
    if share < 1000 and memory_mib:
        per += f" ({memory(memory_mib)})"
    return per if replicas == 1 else f"{replicas}x{per}"


def placement(replicas: list[dict] | None) -> str:
    """``n1: GPU 0,1`` per replica (the ``placement`` of a job's JSON view); a share shows as
    ``GPU 0 (0.5)``; ``-`` for none."""
    if not replicas:
        return "-"
    out = []
    for rep in replicas:
        devs = rep["devices"]
        if not devs:
            out.append(f"{rep['node']}: no GPU")
        elif len(devs) == 1 and devs[0]["milli"] < 1000:
            out.append(f"{rep['node']}: GPU {devs[0]['index']} ({devs[0]['milli'] / 1000:g})")
        else:
            out.append(f"{rep['node']}: GPU {','.join(str(d['index']) for d in devs)}")
    return "; ".join(out)


def reason_column(reason: str | None, codes: list[str] | None) -> str:
    """The reason of the job's last move, else the codes of its wait reasons (each once; the
    forecast's ``estimate`` is not a reason to wait)."""
    if reason:
        return reason
    return ", ".join(dict.fromkeys(c for c in codes or () if c and c != "estimate")) or "-"


def node_state(node: dict) -> str:
    """``ok``, ``cordoned``, ``draining``, ``drained`` (with the operator's reason) or
    ``unavailable`` (with the backend's), from the API's view of a node."""
    state = node.get("state") or ("ok" if node["schedulable"] else "cordoned")
    why = node.get("reason") or (node.get("problem") if state == "unavailable" else "")
    return f"{state} ({why})" if why else state
