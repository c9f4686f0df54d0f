"""A producer process for `test_enqueue_order`: jobs enqueued in transactions of its own.

``python -m tests.fleet.enqueue_producer DSN SCHEMA APP SEED COUNT KEYS START``

Each transaction enqueues one job to a key chosen at random, waits a little,
then counts itself on that key in the application's table ``APP.counters``
(a row lock held until commit, so the counts are the commit order of the
transactions of that key), records ``(key, n, job)`` in ``APP.commits``,
waits a little more and commits; one in ten rolls back instead.  So jobs
are enqueued in one order and committed in another.  The producers begin
together, at Unix time START, and each holds its first transaction open a
fifth of a second, while the others commit theirs: so some job enqueued
earlier commits later, however the processes were scheduled.
"""

from __future__ import annotations

import random
import sys
import time

import psycopg

import inturn


def main() -> None:
    dsn, schema, app, seed, count, keys, start = sys.argv[1:8]
    rng = random.Random(int(seed))
    with psycopg.connect(dsn) as connection:
        time.sleep(max(0.0, float(start) - time.time()))
        for n in range(int(count)):
            key = f"k{rng.randrange(int(keys))}"
            job = inturn.enqueue(connection, key, {"seed": seed, "n": n}, schema=schema)
            time.sleep(0.2 if n == 0 else rng.random() * 0.004)
            if rng.random() < 0.1:
                connection.rollback()
                continue
            (place,) = connection.execute(
                f"UPDATE {app}.counters SET n = n + 1 WHERE key = %s RETURNING n", (key,)
            ).fetchone() or (None,)
            connection.execute(
                f"INSERT INTO {app}.commits (key, n, job) VALUES (%s, %s, %s)", (key, place, job)
            )
            time.sleep(rng.random() * 0.004)
            connection.commit()


if __name__ == "__main__":
    main()
