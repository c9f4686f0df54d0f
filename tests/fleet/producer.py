"""The fleet crash test's producer: the one process that sends, and it runs nothing.

``python -m tests.fleet.producer DSN SCHEMA ACKS JOBS KEYS SEED RATE``

`inturn.operate` on the fleet's journal, a member that claims nothing: it
sends JOBS jobs over KEYS keys chosen by a generator seeded with SEED, with
`Operator.send_many` in chunks, about RATE jobs a second.  Once a chunk's
``send_many`` returned, its jobs are durable, and it appends ``<job_id>
<key>`` per job to ACKS.  Ids rise in the order it sends, so per key they
are acceptance order.
"""

from __future__ import annotations

import os
import random
import sys

import trio

import inturn

CHUNK = 50


async def produce(
    dsn: str, schema: str, acks_path: str, jobs: int, keys: int, seed: int, rate: float
) -> None:
    rng = random.Random(seed)
    acks = os.open(acks_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    async with inturn.operate(inturn.PostgresJournal(dsn, schema=schema, fleet=True)) as op:
        sent = 0
        while sent < jobs:
            count = min(CHUNK, jobs - sent)
            chunk = [f"k{rng.randrange(keys)}" for _ in range(count)]
            ids = await op.send_many([(key, key) for key in chunk])
            os.write(
                acks,
                "".join(
                    f"{job_id} {key}\n" for job_id, key in zip(ids, chunk, strict=True)
                ).encode(),
            )
            os.fsync(acks)
            sent += count
            await trio.sleep(count / rate)


def main() -> None:
    dsn, schema, acks, jobs, keys, seed, rate = sys.argv[1:8]
    trio.run(produce, dsn, schema, acks, int(jobs), int(keys), int(seed), float(rate))


if __name__ == "__main__":
    main()
