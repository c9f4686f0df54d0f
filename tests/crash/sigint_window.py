"""A SIGINT that lands between a write queueing its batch and parking: ``python -m tests.crash.sigint_window DB``.

The journal thread's queue is wrapped so that its first ``put`` from trio's
thread sends this process a real SIGINT: Python runs the handler at the
next bytecode, inside `JournalThread.write`, after the batch is queued and
before the task parks.  Unprotected, the interrupt ended the task there, and
the journal thread later rescheduled a task that had exited
(`trio.TrioInternalError`).  Prints what `trio.run` raised.
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading

import trio

import inturn


class Interrupting:
    """A queue whose first put from the main thread sends SIGINT to the process."""

    def __init__(self, inner: queue.SimpleQueue[object]) -> None:
        self.inner = inner
        self.fired = False

    def put(self, item: object) -> None:
        self.inner.put(item)
        if not self.fired and threading.current_thread() is threading.main_thread():
            self.fired = True
            os.kill(os.getpid(), signal.SIGINT)

    def get(self, timeout: float | None = None) -> object:
        return self.inner.get(timeout=timeout)

    def get_nowait(self) -> object:
        return self.inner.get_nowait()

    def empty(self) -> bool:
        return self.inner.empty()


async def main(path: str) -> None:
    journal = inturn.SQLiteJournal(path)
    await journal.open()
    try:
        worker = journal._worker
        assert worker is not None
        worker._requests = Interrupting(worker._requests)  # type: ignore[assignment]
        await journal.write([inturn.journal.Append(job_id=1, key="k", data=b"x")])
        await trio.sleep(1)  # the interrupt arrives here, at a checkpoint
    finally:
        await journal.aclose()


if __name__ == "__main__":
    # A shell starts a background job with SIGINT ignored: the press would be lost.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        trio.run(main, sys.argv[1])
        print("no interrupt")
    except KeyboardInterrupt:
        print("KeyboardInterrupt")
    except BaseException as exc:
        print(f"{type(exc).__name__}: {exc}")
