"""Fair sharing's tournament sets aside a queue head that can neither start nor evict, so that
the queue's next job stands for it (Kueue's best-effort FIFO). A head the cycle's reservation
caps is such a head even where victims exist: a capped job never evicts (``Cycle.capped``)."""

from __future__ import annotations

from builders import bound, cluster, decide, job, node, queue, waiting

POLICY = "fair-sharing"  # queue-share order, fair-sharing preemption, EASY backfill


def snapshot():
    """One node of 10 GPUs. Queue c (no cohort, nominal 4) runs x (4 GPUs, not preemptible,
    ends at 1000) and has r pending (4 GPUs, highest priority): r gets the cycle's
    reservation, at 1000. In cohort co (a: 1, b: 2, d: 2 GPUs nominal), b borrows 2 (runs 4
    GPUs), so 1 GPU of the cohort's quota is left and 2 GPUs are free. Queue a's jobs: h0
    (no GPU) starts first; h1 (2 GPUs, no walltime) could evict b's 1-GPU job without the
    reservation, but the reservation caps it; h2 (1 GPU, 10 s) ends before the reservation.
    Queue d has dx (1 GPU, no walltime), ranked after h2 and before a borrowing h1."""
    co = [queue("a").cohort("co").quota(gpu=1), queue("b").cohort("co").quota(gpu=2),
          queue("d").cohort("co").quota(gpu=2)]
    return cluster().nodes(node("n1").gpus(10).cpu(64).memory(512)).queue(
        queue("c").quota(gpu=4), *co,
    ).jobs(
        job("x").queue("c").gpus(4).preemptible(False).walltime(1000)
        .running_on(("n1", [0, 1, 2, 3])),
        job("b1").queue("b").gpus(2).running_on(("n1", [4, 5])),
        job("b2").queue("b").gpus(1).running_on(("n1", [6])),
        job("b3").queue("b").gpus(1).running_on(("n1", [7])),
        job("r").queue("c").gpus(4).priority(10).submitted(1),
        job("h0").queue("a").cpu(1).priority(9).submitted(1),
        job("h1").queue("a").gpus(2).priority(5).submitted(1),
        job("h2").queue("a").gpus(1).priority(3).walltime(10).submitted(1),
        job("dx").queue("d").gpus(1).priority(2).submitted(1),
    ).build()


def test_a_head_the_reservation_caps_does_not_stand_for_its_queue():
    d = decide(snapshot(), POLICY, now=5.0)
    assert [r.job for r in d.reservations] == ["r"]
    assert not d.preemptions
    started = bound(d)
    assert "h0" in started
    # h1 is set aside at once; h2 then stands for queue a, ahead of dx (a not borrowing
    # with it, higher priority), and takes the cohort's last GPU of quota
    assert "h2" in started and "dx" not in started
    assert "h1" in waiting(d) and "dx" in waiting(d)
