"""inturn.testing.Recorder: records every attempt and checks per-key sequencing."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import trio
import trio.testing

import inturn
from inturn.journal import Change, Complete
from inturn.testing import Call, FaultyJournal, Recorder


def job(job_id: int, key: str | None = "k", attempt: int = 1) -> inturn.Job:
    return inturn.Job(id=job_id, key=key, payload=None, attempt=attempt)


def recorded(*calls: Call) -> Recorder:
    recorder = Recorder()
    recorder.calls.extend(calls)
    return recorder


async def test_records_start_end_and_result_of_each_attempt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Each attempt is a Call with its job, virtual start and end, and result or error."""
    error = ValueError("first try")

    async def handler(job: inturn.Job) -> object:
        await trio.sleep(2)
        if job.attempt == 1:
            raise error
        return f"done {job.payload}"

    recorder = Recorder(handler)
    retry = inturn.Retry(initial_delay=1.0, jitter=0.0)
    async with inturn.open_supervisor(recorder, retry=retry) as sup:
        assert await sup.ask("k", "x") == "done x"

    [failed, succeeded] = recorder.calls
    assert (1, 1, 0.0, None, error) == (
        failed.job.id,
        failed.job.attempt,
        failed.start,
        failed.result,
        failed.error,
    )
    assert (
        succeeded.job.id,
        succeeded.job.attempt,
        succeeded.start,
        succeeded.end,
        succeeded.result,
        succeeded.error,
    ) == (1, 2, 3.0, 5.0, "done x", None)


async def test_failed_attempt_records_its_end(autojump_clock: trio.testing.MockClock) -> None:
    """An attempt that raises still records when it ended, as the Call.end docstring promises."""

    async def handler(job: inturn.Job) -> None:
        await trio.sleep(2)
        raise inturn.PermanentError("no")

    recorder = Recorder(handler)
    async with inturn.open_supervisor(recorder) as sup:
        await sup.send("k", 1)

    [call] = recorder.calls
    assert isinstance(call.error, inturn.PermanentError)
    assert call.end == 2.0


async def test_cancelled_attempt_has_no_end(autojump_clock: trio.testing.MockClock) -> None:
    """An attempt cut short by cancellation keeps end=None and no error."""

    async def handler(job: inturn.Job) -> None:
        await trio.sleep(10)

    recorder = Recorder(handler)
    with trio.move_on_after(1):
        async with inturn.open_supervisor(recorder) as sup:
            await sup.send("k", 1)
            await sup.wait_idle()

    [call] = recorder.calls
    assert (call.start, call.end, call.error) == (0.0, None, None)


async def test_default_recorder_records_a_no_op() -> None:
    """A Recorder made without a handler records calls that return None."""
    recorder = Recorder()
    async with inturn.open_supervisor(recorder) as sup:
        assert await sup.ask("k", 1) is None
    [call] = recorder.calls
    assert (call.job.payload, call.result, call.error) == (1, None, None)


async def test_by_key_groups_calls_in_start_order(autojump_clock: trio.testing.MockClock) -> None:
    """by_key maps each key, and None for keyless jobs, to its calls in start order."""

    async def handler(job: inturn.Job) -> None:
        await trio.sleep(1)

    recorder = Recorder(handler)
    async with inturn.open_supervisor(recorder) as sup:
        for n in range(3):
            await sup.send("a", f"a{n}")
            await sup.send("b", f"b{n}")
            await sup.submit(f"none{n}")

    grouped = recorder.by_key()
    assert {"a", "b", None} == set(grouped)
    assert [call.job.payload for call in grouped["a"]] == ["a0", "a1", "a2"]
    assert [call.job.payload for call in grouped["b"]] == ["b0", "b1", "b2"]
    assert {"none0", "none1", "none2"} == {call.job.payload for call in grouped[None]}
    assert [call.start for call in grouped["a"]] == [0.0, 1.0, 2.0]


async def test_assert_sequential_passes_for_a_real_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A supervisor's run, with retries, satisfies assert_sequential."""

    async def handler(job: inturn.Job) -> None:
        await trio.sleep(1)
        if job.attempt == 1 and job.payload == 1:
            raise ValueError("retry")

    recorder = Recorder(handler)
    async with inturn.open_supervisor(recorder, retry=inturn.Retry(jitter=0.0)) as sup:
        for n in range(3):
            await sup.send("k", n)
            await sup.submit(n)
    recorder.assert_sequential()
    assert len(recorder.calls) == 8  # 6 jobs, two of them retried once


async def test_overlap_is_detected_live() -> None:
    """Two calls of one key running at once are flagged and fail assert_sequential."""
    release = trio.Event()

    async def handler(job: inturn.Job) -> None:
        await release.wait()

    recorder = Recorder(handler)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(recorder, job(1))
        nursery.start_soon(recorder, job(2, key="other"))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(recorder, job(2))
        await trio.testing.wait_all_tasks_blocked()
        release.set()

    assert [call.overlapped for call in recorder.calls] == [False, False, True]
    with pytest.raises(AssertionError, match=r"key 'k': job 2 started while another"):
        recorder.assert_sequential()


def test_assert_sequential_accepts_sequential_calls() -> None:
    """Calls one after another, in id order, with retries counting up, pass."""
    recorded(
        Call(job=job(1), start=0.0, end=1.0),
        Call(job=job(9, key="other"), start=0.5, end=2.0),
        Call(job=job(1, attempt=2), start=2.0, end=3.0),
        Call(job=job(2), start=3.0, end=4.0),
        Call(job=job(5, key=None), start=0.0, end=9.0, overlapped=True),  # keyless: unchecked
    ).assert_sequential()


def test_assert_sequential_catches_overlap() -> None:
    """A call flagged as started while its key was busy fails assert_sequential."""
    recorder = recorded(
        Call(job=job(1), start=0.0, end=2.0),
        Call(job=job(2), start=1.0, end=3.0, overlapped=True),
    )
    with pytest.raises(AssertionError, match=r"key 'k': job 2 started while another"):
        recorder.assert_sequential()


def test_assert_sequential_catches_out_of_order_jobs() -> None:
    """A job of a key starting after a later-accepted job fails assert_sequential."""
    recorder = recorded(
        Call(job=job(2), start=0.0, end=1.0),
        Call(job=job(1), start=1.0, end=2.0),
    )
    with pytest.raises(AssertionError, match=r"key 'k': job 1 ran after job 2"):
        recorder.assert_sequential()


def test_assert_sequential_catches_an_attempt_going_back() -> None:
    """A job whose attempt number goes down within its key fails assert_sequential."""
    recorder = recorded(
        Call(job=job(1, attempt=2), start=0.0, end=1.0),
        Call(job=job(1, attempt=1), start=1.0, end=2.0),
    )
    with pytest.raises(AssertionError, match=r"key 'k': job 1 went back to attempt 1"):
        recorder.assert_sequential()


def test_assert_sequential_accepts_an_attempt_run_again() -> None:
    """The same attempt recorded twice (cut short, then run again) passes assert_sequential."""
    recorded(
        Call(job=job(1, attempt=2), start=0.0),
        Call(job=job(1, attempt=2), start=1.0, end=2.0),
    ).assert_sequential()


async def test_assert_sequential_passes_across_a_crash_restart(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A job run again as the same attempt after its actor crashed passes assert_sequential."""
    failed = False

    def fail_once(changes: Sequence[Change]) -> bool:
        nonlocal failed
        if not failed and any(isinstance(change, Complete) for change in changes):
            failed = True
            return True
        return False

    recorder = Recorder()
    journal = FaultyJournal(inturn.MemoryJournal(), fail=fail_once)
    async with inturn.open_supervisor(recorder, journal=journal) as sup:
        await sup.send("k", 1)
        await sup.send("k", 2)
    assert [(c.job.id, c.job.attempt) for c in recorder.calls] == [(1, 1), (1, 1), (2, 1)]
    recorder.assert_sequential()


def test_assert_sequential_catches_a_job_resumed_after_the_next() -> None:
    """A retry of a job after the next job of its key started fails assert_sequential."""
    recorder = recorded(
        Call(job=job(1), start=0.0, end=1.0),
        Call(job=job(2), start=1.0, end=2.0),
        Call(job=job(1, attempt=2), start=2.0, end=3.0),
    )
    with pytest.raises(AssertionError, match=r"job 1 ran after job 2"):
        recorder.assert_sequential()
