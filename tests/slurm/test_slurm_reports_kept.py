"""The reported ends the Slurm backend keeps on disk (``rota.backends.slurm.early``): what a
restart reads back is what was taken and not yet confirmed, and a damaged file costs a warning,
not the start."""

from __future__ import annotations

import logging

from rota.backends.base import Handle, ReplicaHandle
from rota.backends.slurm.early import EarlyEnds
from rota.control.verdict import JobView, judge
from rota.core import JobState


def handle(slurm_id: int) -> Handle:
    return Handle("slurm", "7", str(slurm_id), (ReplicaHandle(0, "node1"),), 0,
                  {"slurm_job": slurm_id, "name": "rota-7-0"})


def test_what_is_taken_is_read_back_until_slurm_confirms_it(tmp_path):
    path = tmp_path / "slurm-reports.json"
    ends = EarlyEnds(path=path)
    ends.take(41, handle(41), 3, 1000.0)
    ends.take(42, handle(42), 0, 1001.0)
    ends.take(42, handle(42), 9, 1002.0)             # the first report stands
    ends.take(43, handle(43), 3, 1003.0, (3,))
    again = EarlyEnds(path=path)
    assert again.handles() == {41: handle(41), 42: handle(42), 43: handle(43)}
    assert again.get(43).replicas == (3,) and again.get(41).replicas is None
    assert (again.get(41).exit_code, again.get(41).at) == (3, 1000.0)
    assert (again.get(42).exit_code, again.get(42).at) == (0, 1001.0)
    assert again.confirm({41: "COMPLETED", 42: "RUNNING"}, [41, 42]) == [41]
    again.forget(42)
    again.forget(43)
    assert EarlyEnds(path=path).handles() == {}
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_damaged_file_is_said_in_the_log_and_read_as_none(tmp_path, caplog):
    path = tmp_path / "slurm-reports.json"
    path.write_text('[{"slurm_job": 1}')
    with caplog.at_level(logging.WARNING):
        assert EarlyEnds(path=path).handles() == {}
    assert "cannot read the reported ends kept there" in caplog.text


def test_each_replica_exits_with_its_own_code_where_the_report_has_them_all():
    from rota.backends.base import ReplicaHandle as R
    gang = Handle("slurm", "8", "50", (R(0, "node1"), R(1, "node2")), 0, {"slurm_job": 50})
    ends = EarlyEnds()
    ends.take(50, gang, 3, 1000.0, (143, 3))
    status = ends.get(50).status()
    assert status.exit_codes == (143, 3)
    assert [r.reason for r in status.replicas] == ["stopped after replica 1 failed", ""]
    verdict = judge(JobView(JobState.RUNNING, status, job_id="8"), 1000.0)  # the record
    assert (verdict.exit_code, verdict.reason) == (3, "replica 1 exited with code 3")
    ends.take(51, gang, 3, 1000.0)                  # an older bash: the status for each
    assert ends.get(51).status().exit_codes == (3, 3)
