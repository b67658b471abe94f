"""Quantity parsing: CPU, memory, GPU amounts and durations, as users write them.

Each valid case shows the arithmetic; each invalid case checks that the error names the field
it was given (the dotted path an edge passes in) and says why.
"""

from __future__ import annotations

import pytest

from rota.core import InvalidSpec, parse_cpu_milli, parse_duration_s, parse_gpu, parse_memory_mib

FIELD = "resources.example"


@pytest.mark.parametrize("value,milli", [
    (2, 2000),            # 2 cores x 1000
    (0.5, 500),           # half a core
    ("500m", 500),        # milli-cores as written
    ("1.5", 1500),        # a string number is cores
    ("250m", 250),
    (0, 0),
    ("0.0005", 1),        # 0.5 milli-core rounds up to 1
], ids=lambda v: repr(v))
def test_cpu_valid(value, milli):
    assert parse_cpu_milli(value, FIELD) == milli


@pytest.mark.parametrize("value,why", [
    (-1, "negative"),
    ("-1", "expected a CPU count"),
    ("4Gi", "unknown unit"),
    ("lots", "expected a CPU count"),
    (True, "expected a CPU count"),
    (None, "expected a CPU count"),
    (float("inf"), "finite"),
    (float("nan"), "finite"),
], ids=lambda v: repr(v))
def test_cpu_invalid(value, why):
    with pytest.raises(InvalidSpec, match=why) as err:
        parse_cpu_milli(value, FIELD)
    assert err.value.field == FIELD


@pytest.mark.parametrize("value,mib", [
    ("16Gi", 16384),      # 16 x 1024
    ("512Mi", 512),
    ("1Ti", 1048576),     # 1024 x 1024
    ("1024Ki", 1),        # 1024 / 1024
    ("80GB", 76294),      # 80e9 / 2^20 = 76293.95 -> rounded up
    ("1G", 954),          # 1e9 / 2^20 = 953.67 -> 954
    ("1k", 1),            # 1000 bytes -> rounded up to 1 MiB
    (1024, 1024),         # a bare number is MiB
    ("100", 100),         # a bare number in a string too
    (" 2gi ", 2048),      # units are case-insensitive, spaces are trimmed
], ids=lambda v: repr(v))
def test_memory_valid(value, mib):
    assert parse_memory_mib(value, FIELD) == mib


@pytest.mark.parametrize("value,why", [
    ("16Gx", "unknown unit"),
    ("-1Gi", "expected a memory size"),
    (-5, "negative"),
    ("lots", "expected a memory size"),
    (True, "expected a memory size"),
    (None, "expected a memory size"),
    ([16], "expected a memory size"),
    (float("inf"), "finite"),
    (float("nan"), "finite"),
], ids=lambda v: repr(v))
def test_memory_invalid(value, why):
    with pytest.raises(InvalidSpec, match=why) as err:
        parse_memory_mib(value, FIELD)
    assert err.value.field == FIELD


@pytest.mark.parametrize("value,count_share", [
    (2, (2, 1000)),        # two whole devices
    (1, (1, 1000)),
    (1.0, (1, 1000)),
    ("4", (4, 1000)),
    (0.25, (1, 250)),      # a quarter of one device: 0.25 x 1000 milli
    ("0.5", (1, 500)),
    (0.001, (1, 1)),       # the smallest share
    (0, (0, 1000)),        # no GPU
], ids=lambda v: repr(v))
def test_gpu_valid(value, count_share):
    assert parse_gpu(value, FIELD) == count_share


@pytest.mark.parametrize("value,why", [
    (1.5, "whole number of GPUs or a fraction below 1"),  # fractions only of one device
    (0.0001, "smallest share"),                           # 0.1 milli rounds to 0
    (-1, "negative"),
    ("two", "expected a number of GPUs"),
    (True, "expected a number of GPUs"),
    (None, "expected a number of GPUs"),
    (float("inf"), "finite"),
    ("nan", "finite"),
], ids=lambda v: repr(v))
def test_gpu_invalid(value, why):
    with pytest.raises(InvalidSpec, match=why) as err:
        parse_gpu(value, FIELD)
    assert err.value.field == FIELD


@pytest.mark.parametrize("value,seconds", [
    (3600, 3600.0),
    (1.5, 1.5),
    ("90s", 90.0),
    ("30m", 1800.0),       # 30 x 60
    ("4h", 14400.0),       # 4 x 3600
    ("2d", 172800.0),      # 2 x 86400
    ("1h30m", 5400.0),     # 3600 + 30 x 60
    ("1.5h", 5400.0),
], ids=lambda v: repr(v))
def test_duration_valid(value, seconds):
    assert parse_duration_s(value, FIELD) == seconds


@pytest.mark.parametrize("value,why", [
    ("4 hours", "expected a duration"),
    ("", "expected a duration"),
    ("h", "expected a duration"),
    ("-5m", "expected a duration"),
    (-5, "negative"),
    (True, "expected a duration"),
    (None, "expected a duration"),
    (float("inf"), "finite"),   # a walltime of forever is no walltime: leave it out instead
    (float("nan"), "finite"),
], ids=lambda v: repr(v))
def test_duration_invalid(value, why):
    with pytest.raises(InvalidSpec, match=why) as err:
        parse_duration_s(value, FIELD)
    assert err.value.field == FIELD
