"""The crash checker against hand-built histories, and against a model executor."""

from __future__ import annotations

from collections import deque

import attrs
import pytest
from hypothesis import assume, given, strategies as st

from .checker import Report, check


def judge(log: str, acks: str = "") -> Report:
    return check(acks.splitlines(), log.strip().splitlines())


def acked(*jobs: tuple[int, str]) -> str:
    return "".join(f"{job} {key} 0\n" for job, key in jobs)


CLEAN = attrs.asdict(judge(""), recurse=False)


def counts(report: Report, **expected: int) -> None:
    """*report* has the *expected* counts, and the clean history's elsewhere."""
    actual = attrs.asdict(report, recurse=False)
    del actual["problems"]
    assert {**{name: 0 for name in CLEAN if name != "problems"}, **expected} == actual


def test_a_history_without_kills() -> None:
    """Two keys interleaved, each in order: every acked job completed."""
    report = judge(
        """
        a 1 1 start
        b 2 1 start
        a 1 1 end
        b 2 1 end
        a 3 1 start
        a 3 1 end
        """,
        acked((1, "a"), (2, "b"), (3, "a")),
    )

    counts(report, jobs=3, acked=3, completed=3)
    assert report.ok
    assert report.problems == ()


def test_a_job_cut_by_a_kill_runs_again() -> None:
    """The legal duplicate: a re-run, with a later attempt, of a job started without end."""
    report = judge(
        """
        a 1 1 start
        b 2 1 start
        b 2 1 end
        KILL 1
        a 1 2 start
        a 1 2 end
        """,
        acked((1, "a"), (2, "b")),
    )

    counts(
        report,
        kills=1,
        kills_mid_run=1,
        jobs=2,
        acked=2,
        completed=2,
        duplicates=1,
        duplicates_in_flight_at_kill=1,
        in_flight_at_kills=1,
    )
    assert report.ok


def test_a_job_whose_completion_was_not_durable_runs_again() -> None:
    """Its handler logged end, the kill beat the completion's write: legal, and counted."""
    report = judge(
        """
        a 1 1 start
        a 1 1 end
        KILL 1
        a 1 2 start
        a 1 2 end
        """,
        acked((1, "a")),
    )

    counts(
        report,
        kills=1,
        kills_mid_run=1,
        jobs=1,
        acked=1,
        completed=1,
        duplicates=1,
        duplicates_in_flight_at_kill=1,
        reruns_after_end=1,
    )
    assert report.ok


def test_a_rerun_may_come_several_kills_later() -> None:
    """A worker killed before it got to the job leaves it in flight for the next."""
    report = judge(
        """
        a 1 1 start
        KILL 1
        KILL 2
        a 1 2 start
        a 1 2 end
        """,
        acked((1, "a")),
    )

    assert report.ok
    assert (report.duplicates, report.duplicates_in_flight_at_kill) == (1, 1)
    assert (report.kills, report.kills_mid_run) == (2, 1)  # KILL 2 cut a worker that ran nothing


def test_an_acked_job_that_never_ran_is_lost() -> None:
    report = judge("a 1 1 start\na 1 1 end\n", acked((1, "a"), (2, "a")))

    counts(report, jobs=1, acked=2, completed=1, lost=1)
    assert not report.ok
    assert report.problems == ("lost: acked job 2 never ended",)


def test_an_acked_job_cut_by_a_kill_and_never_rerun_is_lost() -> None:
    report = judge("a 1 1 start\nKILL 1\n", acked((1, "a")))

    counts(report, kills=1, jobs=1, acked=1, lost=1, in_flight_at_kills=1)
    assert not report.ok


def test_a_rerun_that_did_not_end_leaves_the_job_lost() -> None:
    """An end logged before a kill does not count for the re-run that followed it."""
    report = judge(
        """
        a 1 1 start
        a 1 1 end
        KILL 1
        a 1 2 start
        KILL 2
        """,
        acked((1, "a")),
    )

    assert report.lost == 1
    assert not report.ok


def test_an_unacked_job_may_run_and_is_not_lost() -> None:
    """Journaled but never acked: the worker died before writing the ack."""
    report = judge("a 1 1 start\na 1 1 end\na 2 1 start\nKILL 1\n", acked((1, "a")))

    assert (report.unacked, report.lost) == (1, 0)
    assert report.ok


def test_a_key_running_out_of_id_order() -> None:
    report = judge("a 2 1 start\na 2 1 end\na 1 1 start\na 1 1 end\n", acked((1, "a"), (2, "a")))

    counts(report, jobs=2, acked=2, completed=2, order_violations=1)
    assert not report.ok
    assert report.problems == ("order_violations: log line 3: job 1 started after job 2",)


def test_unacked_jobs_are_held_to_the_order_too() -> None:
    report = judge("a 2 1 start\na 2 1 end\na 1 1 start\na 1 1 end\n")

    assert report.order_violations == 1


def test_a_job_running_twice_without_a_kill() -> None:
    report = judge("a 1 1 start\na 1 1 end\na 1 2 start\na 1 2 end\n", acked((1, "a")))

    counts(report, jobs=1, acked=1, completed=1, order_violations=1, duplicates=1)
    assert not report.ok


def test_a_completed_job_running_again_after_a_kill() -> None:
    """Job 1 was durably complete once job 2 started: a kill does not excuse a re-run."""
    report = judge(
        """
        a 1 1 start
        a 1 1 end
        a 2 1 start
        KILL 1
        a 1 2 start
        a 1 2 end
        a 2 2 start
        a 2 2 end
        """,
        acked((1, "a"), (2, "a")),
    )

    # job 2's re-run is the legal one: it was running at the kill
    assert (
        report.duplicates,
        report.duplicates_in_flight_at_kill,
        report.order_violations,
    ) == (2, 1, 1)
    assert not report.ok


def test_a_job_cut_by_a_kill_skipped_by_the_next() -> None:
    """After a kill, the key's next job started before the cut one ran again."""
    report = judge(
        """
        a 1 1 start
        KILL 1
        a 2 1 start
        a 2 1 end
        """,
        acked((2, "a")),  # job 1 unacked, so this is not about "lost"
    )

    counts(
        report,
        kills=1,
        kills_mid_run=1,
        jobs=2,
        acked=1,
        completed=1,
        unacked=1,
        order_violations=1,
        in_flight_at_kills=1,
    )
    assert (report.problems) == (
        "order_violations: log line 3: job 2 started; job 1, cut by a kill, never re-ran",
    )


def test_two_jobs_of_one_key_overlapping() -> None:
    report = judge("a 1 1 start\na 2 1 start\na 1 1 end\n", acked((1, "a"), (2, "a")))

    assert report.overlaps == 1
    assert not report.ok


def test_two_keys_may_overlap() -> None:
    report = judge("a 1 1 start\nb 2 1 start\na 1 1 end\nb 2 1 end\n")

    assert report.overlaps == 0
    assert report.ok


def test_a_kill_ends_whatever_was_running() -> None:
    """A start after a kill is no overlap with a job the kill cut short."""
    report = judge("a 1 1 start\nKILL 1\na 1 2 start\na 1 2 end\n")

    assert (report.overlaps, report.in_flight_at_kills) == (0, 1)
    assert report.ok


def test_a_rerun_must_have_a_later_attempt() -> None:
    report = judge("a 1 3 start\nKILL 1\na 1 3 start\na 1 3 end\n", acked((1, "a")))

    assert report.attempt_violations == 1
    assert not report.ok


def test_a_first_start_may_have_a_later_attempt() -> None:
    """Killed after journaling the attempt, before logging the start: the count moved on."""
    assert judge("a 1 2 start\na 1 2 end\n", acked((1, "a"))).ok


def test_a_job_running_under_another_key() -> None:
    report = judge("b 1 1 start\nb 1 1 end\n", acked((1, "a")))

    assert report.misrouted == 1
    assert not report.ok


@pytest.mark.parametrize(
    "log",
    [
        pytest.param("a 1 1 begin\n", id="unknown event"),
        pytest.param("a 1 start\n", id="missing field"),
        pytest.param("a x 1 start\n", id="job not a number"),
        pytest.param("a 1 1 end\n", id="end without start"),
        pytest.param("a 1 1 start\na 1 2 end\n", id="end of another attempt"),
        pytest.param("KILL 2\n", id="kill out of sequence"),
        pytest.param("a 1 1 st", id="torn line"),
    ],
)
def test_malformed_lines_are_counted(log: str) -> None:
    assert judge(log).malformed == 1
    assert not judge(log).ok


def test_a_line_torn_by_a_kill_counts_as_not_written() -> None:
    """A partial line just before a KILL marker is the kill's doing, not a malformed log."""
    report = judge("a 1 1 start\na 1 1 en\nKILL 1\na 1 2 start\na 1 2 end\n", acked((1, "a")))

    assert report.torn_by_kill == 1
    assert report.malformed == 0
    assert report.duplicates == report.duplicates_in_flight_at_kill == 1
    assert report.ok


def test_a_malformed_ack_is_counted() -> None:
    assert judge("", acks="1 a\n").malformed == 1


def test_problems_are_capped() -> None:
    report = judge("", acked(*((job, "a") for job in range(1, 100))))

    assert report.lost == 99
    assert len(report.problems) == 20


def test_kills_mid_run_need_work_before_and_after() -> None:
    """A kill counts as mid-run when the worker it cut had started jobs, and jobs started later."""
    report = judge(
        """
        KILL 1
        a 1 1 start
        KILL 2
        a 1 2 start
        a 1 2 end
        KILL 3
        """,
        acked((1, "a")),
    )

    assert (report.kills, report.kills_mid_run) == (3, 1)


def test_the_summary_names_every_count_and_the_verdict() -> None:
    text = judge("a 1 1 start\n", acked((1, "a"))).summary()

    assert "lost                          1" in text
    assert "problem: lost: acked job 1 never ended" in text
    assert text.endswith("FAILED")


# -- a model executor ----------------------------------------------------------


@attrs.define
class Model:
    """What a correct runtime does: per-key FIFO, each attempt journaled before it runs,
    each completion journaled after its handler returned."""

    pending: dict[str, deque[int]]  # the journal: unfinished jobs per key, in order
    attempts: dict[int, int] = attrs.Factory(dict)  # the journal: attempts per job
    stage: dict[str, str] = attrs.Factory(dict)  # key -> "marked" | "running" | "returned"
    kills: int = 0
    log: list[str] = attrs.Factory(list)

    def step(self, key: str, action: int) -> None:
        """Move *key* on, if it has work: start its head, return, or journal the completion."""
        queue = self.pending[key]
        if not queue:
            return
        job, stage = queue[0], self.stage.get(key)
        if stage is None:
            self.attempts[job] = self.attempts.get(job, 0) + 1
            self.stage[key] = "marked"
            if action:  # else a kill may land between journaling the attempt and its start line
                self.step(key, action)
        elif stage == "marked":
            self.log.append(f"{key} {job} {self.attempts[job]} start")
            self.stage[key] = "running"
        elif stage == "running":
            self.log.append(f"{key} {job} {self.attempts[job]} end")
            self.stage[key] = "returned"
        else:
            queue.popleft()
            del self.stage[key]

    def kill(self) -> None:
        self.kills += 1
        self.log.append(f"KILL {self.kills}")
        self.stage.clear()


histories = st.lists(st.sampled_from("abc"), min_size=1, max_size=12).flatmap(
    lambda keys: st.tuples(
        st.just(keys),
        st.lists(
            st.one_of(
                st.tuples(st.sampled_from("abc"), st.integers(0, 3)),
                st.just(("KILL", 0)),
            ),
            max_size=80,
        ),
    )
)


def run_model(keys: list[str], steps: list[tuple[str, int]]) -> tuple[list[str], list[str]]:
    """Run the model through *steps*, then drain it; return its acks and its log."""
    pending: dict[str, deque[int]] = {key: deque() for key in "abc"}
    for job, key in enumerate(keys, 1):
        pending[key].append(job)
    model = Model(pending)
    for key, action in steps:
        if key == "KILL":
            model.kill()
        else:
            model.step(key, action)
    while any(pending.values()):
        for key in "abc":
            model.step(key, 1)
    return [f"{job} {key} 0" for job, key in enumerate(keys, 1)], model.log


@given(histories)
def test_a_correct_runtime_passes(history: tuple[list[str], list[tuple[str, int]]]) -> None:
    """Whatever the kills, a correct executor's history passes, with exact accounting:
    every duplicate re-runs a job that was running, or whose completion was not yet durable."""
    keys, steps = history
    acks, log = run_model(keys, steps)

    report = check(acks, log)

    assert report.ok, report.summary()
    assert len(keys) == report.completed == report.jobs
    assert report.duplicates - report.reruns_after_end == report.in_flight_at_kills


@given(histories, st.data())
def test_swapping_two_jobs_of_a_key_is_an_order_violation(
    history: tuple[list[str], list[tuple[str, int]]], data: st.DataObject
) -> None:
    keys, steps = history
    acks, log = run_model(keys, steps)
    key = data.draw(st.sampled_from(keys))
    jobs = [job for job, other in enumerate(keys, 1) if other == key]
    assume(len(jobs) >= 2)
    first, second = sorted(data.draw(st.sets(st.sampled_from(jobs), min_size=2, max_size=2)))

    def swap(line: str) -> str:
        fields = line.split()
        if fields[0] != "KILL":
            fields[1] = {str(first): str(second), str(second): str(first)}.get(fields[1], fields[1])
        return " ".join(fields)

    report = check(acks, [swap(line) for line in log])

    assert report.order_violations > 0
    assert not report.ok
