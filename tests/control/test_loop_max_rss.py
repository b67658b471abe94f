"""The peak memory of an attempt on the local backend: its supervisor records the largest
resident memory of the command's processes when it ends, and the attempt keeps it
(``rota ps -o maxrss``)."""

from __future__ import annotations

from controlkit import drive, python, state_is, submit
from rota.core import JobState as S

HOG = ("b = bytearray(64 * 1024 * 1024)\n"
       "for i in range(0, len(b), 4096): b[i] = 1\n")  # 64 MiB, every page touched


def test_an_ended_attempt_keeps_its_peak_memory(store, loop):
    job = submit(store, python(HOG), gpus=0)
    drive(loop, state_is(store, job, S.SUCCEEDED), "the job to end")
    [attempt] = store.attempts(job)
    assert attempt.max_rss_kib is not None and attempt.max_rss_kib >= 64 * 1024
