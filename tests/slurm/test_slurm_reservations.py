"""Slurm reservations as rota reads them: which nodes they close to rota's jobs, from when."""

import pytest

from rota.backends.slurm.reservations import blocked_nodes, parse_reservations
from rota.backends.slurm.text import SlurmOutputError

# captured from the fixture: `SLURM_TIME_FORMAT=%s scontrol show reservation --oneliner`
MAINT = ("ReservationName=maint StartTime=1000 EndTime=4600 Duration=01:00:00 Nodes=node4 "
         "NodeCnt=1 CoreCnt=16 Features=(null) PartitionName=(null) Flags=MAINT,SPEC_NODES "
         "TRES=cpu=16 Users=root Groups=(null) Accounts=(null) Licenses=(null) State=ACTIVE "
         "BurstBuffer=(null) Watts=n/a MaxStartDelay=(null)")
LATER = ("ReservationName=r3 StartTime=9000 EndTime=12600 Duration=01:00:00 Nodes=node[3-4] "
         "NodeCnt=2 CoreCnt=32 Features=(null) PartitionName=(null) Flags=SPEC_NODES "
         "TRES=cpu=32 Users=root,alice Groups=(null) Accounts=(null) Licenses=(null) "
         "State=INACTIVE BurstBuffer=(null) Watts=n/a MaxStartDelay=(null)")


def test_the_one_line_form_is_read_with_epoch_times():
    maint, later = parse_reservations(f"{MAINT}\n{LATER}\n")
    assert (maint.name, maint.start, maint.end, maint.nodes) == ("maint", 1000, 4600, ("node4",))
    assert maint.flags == {"MAINT", "SPEC_NODES"} and maint.state == "ACTIVE"
    assert later.nodes == ("node3", "node4") and later.users == ("root", "alice")
    assert parse_reservations("No reservations in the system\n") == ()


@pytest.mark.parametrize("text, message", [
    ("ReservationName=x StartTime=2026-11-25T07:58:44 EndTime=1 Nodes=n1 State=ACTIVE",
     "SLURM_TIME_FORMAT"),
    ("ReservationName=x StartTime=1 Nodes=n1 State=ACTIVE", "has no EndTime"),
    ("ReservationName=x oops StartTime=1 EndTime=2 Nodes=n1 State=ACTIVE", "Key=Value"),
], ids=["local-time", "missing-field", "stray-word"])
def test_what_rota_cannot_read_is_an_error_naming_the_line(text, message):
    with pytest.raises(SlurmOutputError, match=f"line 1.*{message}|{message}"):
        parse_reservations(text)


@pytest.mark.parametrize("now, lead, expected", [
    # maint runs 1000-4600 on node4; r3 runs 9000-12600 on node3-4
    (500, 0, set()),                                           # nothing started yet
    (500, 600, {"node4"}),                                     # maint starts within the lead
    (2000, 3600, {"node4"}),                                   # r3 starts beyond the lead
    (6000, 3600, {"node3", "node4"}),                          # r3 starts within the lead
    (13000, 3600, set()),                                      # both ended
])
def test_a_reservation_closes_its_nodes_from_lead_seconds_before_until_its_end(now, lead,
                                                                              expected):
    found = blocked_nodes(parse_reservations(f"{MAINT}\n{LATER}"), now, lead)
    assert set(found) == expected


def test_the_reason_names_the_reservation_and_when():
    both = parse_reservations(f"{MAINT}\n{LATER}")
    now = blocked_nodes(both, 2000, 0)
    assert now == {"node4": "in Slurm maintenance reservation maint until 1970-01-01 01:16 UTC"}
    soon = blocked_nodes(both, 6000, 3600)
    assert soon["node3"] == ("Slurm reservation r3 from 1970-01-01 02:30 UTC until "
                             "1970-01-01 03:30 UTC")
