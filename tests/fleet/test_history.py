"""The fleet crash test's judge, on histories written by hand: it must catch each broken promise."""

from __future__ import annotations

from .history import check

ACKS = ["1 k", "2 k", "3 j"]


def test_a_clean_history_is_ok() -> None:
    log = [
        "start w1 k 1 1",
        "start w2 j 3 1",
        "end w1 k 1 1",
        "start w1 k 2 1",
        "end w2 j 3 1",
        "end w1 k 2 1",
    ]
    report = check(log, ACKS)
    assert report.ok, report.problems
    assert (report.acked, report.runs, report.lost) == (3, 3, 0)


def test_a_job_never_ended_is_lost() -> None:
    report = check(["start w1 k 1 1", "end w1 k 1 1", "start w1 k 2 1"], ACKS)
    assert (report.ok, report.lost) == (False, 2)  # job 2 never ended, job 3 never ran


def test_a_start_before_the_job_ahead_ended_is_an_order_violation() -> None:
    report = check(
        ["start w1 k 2 1", "end w1 k 2 1", "start w1 k 1 1", "end w1 k 1 1"], ["1 k", "2 k"]
    )
    assert (report.ok, report.order_violations) == (False, 1)


def test_two_runs_of_a_key_at_once_overlap() -> None:
    log = ["start w1 k 1 1", "start w2 k 1 2", "end w2 k 1 2", "end w1 k 1 1"]
    report = check(log, ["1 k"])
    assert (report.ok, report.overlaps) == (False, 1)


def test_a_rerun_without_a_fault_is_a_violation_and_after_a_kill_it_is_not() -> None:
    log = ["start w1 k 1 1", "end w1 k 1 1", "start w1 k 1 2", "end w1 k 1 2"]
    assert check(log, ["1 k"]).ok is False
    log = ["start w1 k 1 1", "KILL w1", "start w2 k 1 2", "end w2 k 1 2"]
    report = check(log, ["1 k"])
    assert report.ok, report.problems
    assert (report.kills, report.duplicates, report.duplicates_after_fault) == (1, 1, 1)


def test_a_rerun_after_a_kill_that_followed_its_end_is_legal_until_a_job_behind_it_starts() -> None:
    log = ["start w1 k 1 1", "end w1 k 1 1", "KILL w1", "start w2 k 1 2", "end w2 k 1 2"]
    assert check(log, ["1 k", "2 k"]).duplicates_after_fault == 1  # (job 2 lost: not the point)
    log = ["start w1 k 1 1", "end w1 k 1 1", "start w1 k 2 1", "end w1 k 2 1", "KILL w1"]
    report = check([*log, "start w2 k 1 2", "end w2 k 1 2"], ["1 k", "2 k"])
    assert (report.duplicates, report.duplicates_after_fault) == (1, 0)  # job 2 proved 1 done


def test_a_stopped_run_may_overlap_its_rerun_but_its_end_does_not_count() -> None:
    stale = ["start w1 k 1 1", "STOP w1", "CONT w1", "end w1 k 1 1", "start w2 k 2 1"]
    report = check(stale, ["1 k", "2 k"])  # job 2 started though job 1 never ended well
    assert (report.overlaps, report.stale_ends, report.order_violations) == (0, 1, 1)
    log = [
        "start w1 k 1 1",
        "STOP w1",
        "start w2 k 1 2",  # its rerun: overlaps the stopped run, legally
        "CONT w1",
        "end w1 k 1 1",  # stale: its completion was refused
        "end w2 k 1 2",
        "start w2 k 2 1",
        "end w2 k 2 1",
    ]
    report = check(log, ["1 k", "2 k"])
    assert report.ok, report.problems
    assert (report.stops, report.stale_ends, report.duplicates_after_fault) == (1, 1, 1)


def test_unparsable_lines_are_malformed() -> None:
    report = check(["start w1 k", "end w1 k 9 1"], ["x y z"])
    assert (report.ok, report.malformed) == (False, 3)


def test_a_worker_that_exited_on_its_own_counts_as_stopped_throughout() -> None:
    """Its heartbeat ran out unseen: its runs may be rerun and overlapped, its ends do not count."""
    log = [
        "start w1 k 1 1",
        "start w2 k 1 2",  # w1's lease ran out under load; w2 took k
        "end w1 k 1 1",
        "end w2 k 1 2",
        "EXIT w1",
        "KILL w1",
    ]
    report = check(log, ["1 k"])
    assert report.ok, report.problems
    assert (report.exits, report.stale_ends, report.duplicates_after_fault) == (1, 1, 1)
    assert check(log[:4], ["1 k"]).ok is False  # without EXIT: an overlap, a rerun unexplained


def test_a_rerun_after_a_failed_run_is_legal_and_the_failure_is_no_end() -> None:
    log = ["start w1 k 1 1", "fail w1 k 1 1", "start w1 k 1 2", "end w1 k 1 2"]
    report = check(log, ["1 k"])
    assert report.ok, report.problems
    assert (report.duplicates, report.duplicates_after_fault) == (1, 1)
    failed_only = check(["start w1 k 1 1", "fail w1 k 1 1"], ["1 k"])
    assert (failed_only.ok, failed_only.lost) == (False, 1)
    behind = ["start w1 k 1 1", "fail w1 k 1 1", "start w1 k 2 1"]
    assert check(behind, ["1 k", "2 k"]).order_violations == 1
