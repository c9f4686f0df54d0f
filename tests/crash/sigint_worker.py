"""Ctrl-C at random moments, many times: ``python -m tests.crash.sigint_worker DIR RUNS``.

Each run opens a supervisor on a SQLite journal in DIR, keeps sending jobs to
many keys from four tasks (so tasks park on the journal and actors park and
retire all the time),
and a timer thread sends this process a real SIGINT after a random 1-40 ms.
The run must end in `KeyboardInterrupt` and nothing else; the worker prints
one line per run that ended otherwise, then ``done N`` (runs made).
"""

from __future__ import annotations

import logging
import os
import random
import signal
import sys
import threading
import traceback

import structlog
import trio

import inturn


async def busy(path: str, timer: threading.Timer) -> None:
    # Started here, not before trio.run: under load, starting a thread can take
    # longer than the delay, and the signal would land before the run began.
    timer.start()

    async def handler(job: inturn.Job) -> None:
        await trio.lowlevel.checkpoint()

    journal = inturn.SQLiteJournal(path, durability="normal")
    async with (
        inturn.open_supervisor(handler, journal=journal, idle_timeout=0.001) as sup,
        trio.open_nursery() as nursery,
    ):
        for producer in range(4):  # several senders park on the journal at once
            nursery.start_soon(send, sup, producer)


async def send(sup: inturn.Supervisor, producer: int) -> None:
    n = 0
    while True:
        n += 1
        await sup.send(f"k{producer}-{n % 20}", n)


def report(run: int, error: BaseException) -> None:
    leaves = [error]
    while any(isinstance(leaf, BaseExceptionGroup) for leaf in leaves):
        leaves = [x for leaf in leaves for x in getattr(leaf, "exceptions", [leaf])]
    for leaf in leaves:
        last = traceback.format_exception_only(leaf)[-1].strip()
        print(f"run {run}: {type(leaf).__name__}: {last}", flush=True)


def interrupt(ended: threading.Event) -> None:
    """Press Ctrl-C; again if the run has not ended a second later.

    CPython drops an exception raised inside a weakref callback or a
    ``__del__`` ("Exception ignored in ..."), and trio's SIGINT handler raises
    KeyboardInterrupt wherever the main thread is: so, rarely, under load, a
    signal lands there and is lost, as a person's Ctrl-C would be, and they
    press it again.  What the test checks is how a run ends, not that no
    press is ever lost.
    """
    os.kill(os.getpid(), signal.SIGINT)
    while not ended.wait(1.0):
        os.kill(os.getpid(), signal.SIGINT)


def unraisable(info: sys.UnraisableHookArgs) -> None:
    """A lost press (see `interrupt`) is pressed again: say nothing of it; anything else, as usual."""
    if not isinstance(info.exc_value, KeyboardInterrupt):
        sys.__unraisablehook__(info)


def main() -> None:
    # A shell starts a background job with SIGINT ignored, and Python and trio
    # then leave it so: every press would be lost, and each run would go on forever.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.unraisablehook = unraisable
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    folder, runs = sys.argv[1], int(sys.argv[2])
    rng = random.Random(int.from_bytes(os.urandom(8)))
    for run in range(runs):
        path = os.path.join(folder, f"{run}.db")
        ended = threading.Event()
        timer = threading.Timer(rng.uniform(0.002, 0.08), interrupt, (ended,))
        try:
            trio.run(busy, path, timer)
        except KeyboardInterrupt:
            pass
        except BaseExceptionGroup as group:  # KeyboardInterrupt through a nursery
            _, rest = group.split(KeyboardInterrupt)
            if rest is not None:
                report(run, rest)
        except BaseException as exc:  # what the test looks for
            report(run, exc)
        finally:
            ended.set()
            if timer.ident is not None:
                timer.join()
    print(f"done {runs}", flush=True)


if __name__ == "__main__":
    main()
