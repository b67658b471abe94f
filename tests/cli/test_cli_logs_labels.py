"""``rota logs --all-replicas``: each line of a replica's stream labelled with its rank, as
``srun --label`` does, whatever the chunks the server sends cut it into."""

from __future__ import annotations

import io
import threading

from rota.cli.logs import Labelled


def test_a_line_cut_across_chunks_is_written_whole_with_its_rank():
    out = io.BytesIO()
    lock = threading.Lock()
    first, second = Labelled(out, 0, lock), Labelled(out, 1, lock)
    first.write(b"epoch 1\nepo")
    second.write(b"loss 0.")
    second.write(b"3\n")
    first.write(b"ch 2\n")
    first.write(b"")
    assert out.getvalue() == b"0: epoch 1\n1: loss 0.3\n0: epoch 2\n"


def test_the_last_line_that_never_ended_is_written_at_the_close():
    out = io.BytesIO()
    labelled = Labelled(out, 3, threading.Lock())
    labelled.write(b"done")
    assert out.getvalue() == b""
    labelled.close()
    labelled.close()  # once
    assert out.getvalue() == b"3: done\n"


def test_empty_lines_keep_their_label():
    out = io.BytesIO()
    labelled = Labelled(out, 2, threading.Lock())
    labelled.write(b"a\n\nb\n")
    assert out.getvalue() == b"2: a\n2: \n2: b\n"
