from __future__ import annotations

import trio

import inturn
from inturn.testing import Recorder


async def test_jobs_of_one_key_run_in_order(autojump_clock: trio.testing.MockClock) -> None:
    """Several jobs sent for one key are handled one at a time, in order."""

    async def handler(job: inturn.Job) -> object:
        await trio.sleep(1)
        return job.payload

    recorder = Recorder(handler)
    async with inturn.open_supervisor(recorder) as sup:
        ids = [await sup.send("k", n) for n in range(5)]
        await sup.wait_idle()

    recorder.assert_sequential()
    assert [call.job.id for call in recorder.calls] == ids
    assert [call.job.payload for call in recorder.calls] == list(range(5))
    assert [call.start for call in recorder.calls] == [0.0, 1.0, 2.0, 3.0, 4.0]
