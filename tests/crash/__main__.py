"""``python -m tests.crash``: the long crash test, printing its report."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence

from .driver import run


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.crash",
        description="SIGKILL a worker at random moments; check that no acked job is lost.",
    )
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--keys", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", help="keep the journal, acks and log here (must exist)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    if args.workdir is not None:
        report = run(args.kills, args.jobs, args.keys, args.seed, args.workdir)
    else:
        with tempfile.TemporaryDirectory(prefix="inturn-crash-") as scratch:
            report = run(args.kills, args.jobs, args.keys, args.seed, scratch)
    print(f"kills={args.kills} jobs={args.jobs} keys={args.keys} seed={args.seed}")
    print(report.summary())
    print(f"elapsed  {time.monotonic() - started:.1f}s")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
