"""The fleet crash test's producer: the one process that sends, straight through the journal.

``python -m tests.fleet.producer DSN SCHEMA ACKS JOBS KEYS SEED RATE``

A fleet member that never claims: it takes ids from the journal and writes
``Append``s (what ``Supervisor.send`` does for a member), JOBS of them over
KEYS keys chosen by a generator seeded with SEED, in chunks, about RATE jobs
a second.  Once the write of a chunk returned, its jobs are durable, and it
appends ``<job_id> <key>`` per job to ACKS.  Ids rise in the order it sends,
so per key they are acceptance order.
"""

from __future__ import annotations

import os
import random
import sys

import trio

import inturn
from inturn.journal import Append

CHUNK = 50


async def produce(
    dsn: str, schema: str, acks_path: str, jobs: int, keys: int, seed: int, rate: float
) -> None:
    rng = random.Random(seed)
    codec = inturn.JSONCodec()
    acks = os.open(acks_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    journal = inturn.PostgresJournal(dsn, schema=schema, fleet=True)
    await journal.open()
    try:
        sent = 0
        while sent < jobs:
            count = min(CHUNK, jobs - sent)
            chunk = [f"k{rng.randrange(keys)}" for _ in range(count)]
            ids = await journal.ids(count)
            await journal.write(
                [
                    Append(job_id=job_id, key=key, data=codec.encode(key))
                    for job_id, key in zip(ids, chunk, strict=True)
                ]
            )
            os.write(
                acks,
                "".join(
                    f"{job_id} {key}\n" for job_id, key in zip(ids, chunk, strict=True)
                ).encode(),
            )
            os.fsync(acks)
            sent += count
            await trio.sleep(count / rate)
    finally:
        await journal.aclose()


def main() -> None:
    dsn, schema, acks, jobs, keys, seed, rate = sys.argv[1:8]
    trio.run(produce, dsn, schema, acks, int(jobs), int(keys), int(seed), float(rate))


if __name__ == "__main__":
    main()
