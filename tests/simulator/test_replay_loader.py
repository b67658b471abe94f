"""The Philly loader: rows sorted by submission, bad rows named by line and column; the gang
mapping; windows and the busiest window; per-VC quotas."""

from __future__ import annotations

import pytest

from rota.core import InvalidSpec
from rota.simulator.philly import (
    TraceError, busiest, format_time, gang, load, parse_quotas, parse_window, within,
)

HEAD = "timestamp,duration,num_gpus,gpu_time,cluster\n"
ROWS = HEAD + """2017-10-09 07:01:55,66.0,1,66.0,11cb48
2017-10-09 06:13:03,2951.0,1,2951.0,6214e9
2017-09-29 07:58:32,100.0,8,800.0,6c71a0
2017-10-09 06:13:03,10.0,16,160.0,6214e9
"""


def write(tmp_path, text):
    path = tmp_path / "philly.csv"
    path.write_text(text)
    return path


def test_jobs_are_sorted_by_submission_then_line_and_named_by_line(tmp_path):
    jobs = load(write(tmp_path, ROWS))
    assert [(j.id, format_time(j.submit), j.duration, j.num_gpus, j.vc) for j in jobs] == [
        ("j4", "2017-09-29 07:58:32", 100.0, 8, "6c71a0"),
        ("j3", "2017-10-09 06:13:03", 2951.0, 1, "6214e9"),
        ("j5", "2017-10-09 06:13:03", 10.0, 16, "6214e9"),  # same second: file order
        ("j2", "2017-10-09 07:01:55", 66.0, 1, "11cb48")]
    assert jobs[0].gpu_seconds == 800.0


@pytest.mark.parametrize("row, where", [
    ("2017-13-01 00:00:00,1,1,1,a", "line 2.timestamp"),
    ("yesterday,1,1,1,a", "line 2.timestamp"),
    ("2017-10-01 00:00:00,0,1,0,a", "line 2.duration"),
    ("2017-10-01 00:00:00,-5,1,-5,a", "line 2.duration"),
    ("2017-10-01 00:00:00,nan,1,1,a", "line 2.duration"),
    ("2017-10-01 00:00:00,10,1.5,15,a", "line 2.num_gpus"),
    ("2017-10-01 00:00:00,10,0,0,a", "line 2.num_gpus"),
    ("2017-10-01 00:00:00,10,2,21,a", "line 2.gpu_time"),
    ("2017-10-01 00:00:00,10,2,20,", "line 2.cluster"),
], ids=["month", "words", "zero-duration", "negative", "nan", "half-gpu", "no-gpu",
        "gpu-time", "no-vc"])
def test_a_bad_row_is_named_by_line_and_column(tmp_path, row, where):
    with pytest.raises(TraceError) as err:
        load(write(tmp_path, HEAD + row + "\n"))
    assert err.value.field == where
    assert "philly.csv" in str(err.value)


def test_a_missing_column_and_an_empty_file_are_refused(tmp_path):
    with pytest.raises(TraceError, match="line 1.cluster: missing column"):
        load(write(tmp_path, "timestamp,duration,num_gpus,gpu_time\n"))
    with pytest.raises(TraceError, match="no jobs"):
        load(write(tmp_path, HEAD))
    with pytest.raises(TraceError, match="cannot read"):
        load(tmp_path / "absent.csv")


@pytest.mark.parametrize("gpus, expected", [
    (1, (1, 1)), (2, (1, 2)), (4, (1, 4)), (8, (1, 8)),
    (12, (3, 4)), (16, (2, 8)), (24, (3, 8)), (32, (4, 8)), (128, (16, 8)), (10, (5, 2)),
])
def test_gangs_of_up_to_eight_gpus_are_one_replica_larger_ones_split(gpus, expected):
    assert gang(gpus) == expected


def test_a_gang_of_no_gpu_is_refused():
    with pytest.raises(InvalidSpec, match="num_gpus"):
        gang(0)


def test_windows_select_submissions_in_start_inclusive_end_exclusive(tmp_path):
    jobs = load(write(tmp_path, ROWS))
    start, end = parse_window("2017-10-09..2017-10-09 07:01:55")
    assert [j.id for j in within(jobs, start, end)] == ["j3", "j5"]
    for bad in ("2017-10-09", "2017-10-09..2017-10-01", "x..y"):
        with pytest.raises(InvalidSpec) as err:
            parse_window(bad)
        assert err.value.field == "--window"


def test_the_busiest_day_has_the_most_submitted_gpu_hours(tmp_path):
    jobs = load(write(tmp_path, ROWS))
    start, end, gpu_h = busiest(jobs, 1)
    # 2017-10-09: 66 + 2951 + 160 = 3177 GPU-s; 2017-09-29: 800 GPU-s
    assert (format_time(start), format_time(end)) == ("2017-10-09 00:00:00", "2017-10-10 00:00:00")
    assert gpu_h == pytest.approx(3177 / 3600)


def test_quotas_give_each_vc_a_queue_and_name_bad_fields():
    queues = parse_quotas({"a": {"gpus": 8, "cohort": "c", "borrowing_limit": 4},
                           "*": {"gpus": 2, "cohort": "c"}}, ["a", "b"])
    assert queues["a"].quotas["any"].nominal == {"gpu": 8000}
    assert queues["a"].quotas["any"].borrowing_limit == {"gpu": 4000}
    assert (queues["b"].name, queues["b"].cohort, queues["b"].quotas["any"].nominal) == (
        "b", "c", {"gpu": 2000})
    for data, where in [({"a": {"gpus": -1}}, "a.gpus"), ({"a": {"gpu": 1}}, "a.gpu"),
                        ({"a": {"cohort": "c"}}, "a.gpus"), ({}, "a"),
                        ({"a": {"gpus": 2, "lending_limit": 3}}, "a.lending_limit"),
                        ({"a": {"gpus": 2, "cohort": 5}}, "a.cohort")]:
        with pytest.raises(InvalidSpec) as err:
            parse_quotas(data, ["a"])
        assert err.value.field == where
