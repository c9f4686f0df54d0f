"""The `Job` a handler gets is the frozen attrs value, however the runtime builds it.

The runtime builds each one with `inturn.jobs.new_job`, which skips attrs'
frozen ``__init__`` for speed: these tests hold it to exactly what
``Job(...)`` builds.
"""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given, strategies as st

import inturn
from inturn.jobs import new_job

atoms = st.none() | st.integers() | st.text(max_size=5)


@given(
    job_id=st.integers(min_value=1),
    key=st.none() | st.text(max_size=5),
    payload=atoms | st.lists(atoms, max_size=3) | st.dictionaries(st.text(max_size=3), atoms),
    attempt=st.integers(min_value=1, max_value=10),
    unique=st.none() | st.text(max_size=5),
    epoch=st.none() | st.integers(min_value=1),
    steps=st.none() | st.builds(object),
)
def test_new_job_builds_what_the_class_builds(
    job_id: int,
    key: str | None,
    payload: object,
    attempt: int,
    unique: str | None,
    epoch: int | None,
    steps: object,
) -> None:
    """Every field (the private step log too), its type, repr, equality and hash."""
    fast = new_job(job_id, key, payload, attempt, unique, epoch, steps)  # type: ignore[arg-type]
    slow = inturn.Job(job_id, key, payload, attempt, unique, epoch, steps)  # type: ignore[arg-type]
    assert type(fast) is inturn.Job
    for field in attrs.fields(inturn.Job):
        assert getattr(fast, field.name) is getattr(slow, field.name), field.name
    assert (fast, repr(fast), hashed(fast)) == (slow, repr(slow), hashed(slow))
    assert attrs.evolve(fast, attempt=attempt + 1) == attrs.evolve(slow, attempt=attempt + 1)


def hashed(job: inturn.Job) -> int | str:
    try:
        return hash(job)
    except TypeError as exc:  # a list or dict payload
        return str(exc)


@pytest.mark.parametrize("name", [field.name for field in attrs.fields(inturn.Job)])
def test_a_job_built_by_new_job_is_frozen(name: str) -> None:
    job = new_job(1, "k", "p", 1, None, None, None)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        setattr(job, name, 2)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        delattr(job, name)
    assert job == inturn.Job(1, "k", "p")


@pytest.mark.parametrize("batch", [None, 3])
async def test_handlers_get_frozen_jobs(batch: int | None) -> None:
    """One job or a batch: the handler cannot change what it was given."""
    seen: list[inturn.Job] = []
    refused: list[bool] = []

    def look(job: inturn.Job) -> None:
        seen.append(job)
        try:
            job.attempt = 5  # type: ignore[misc]
        except attrs.exceptions.FrozenInstanceError:
            refused.append(True)

    async def one(job: inturn.Job) -> None:
        look(job)

    async def many(jobs: list[inturn.Job]) -> None:
        for job in jobs:
            look(job)

    handler = one if batch is None else many
    async with inturn.open_supervisor(handler, batch=batch) as sup:
        await sup.send_many([("k", n) for n in range(3)])
        await sup.wait_idle()
    assert [(type(job), job.id, job.payload, job.attempt) for job in seen] == [
        (inturn.Job, n + 1, n, 1) for n in range(3)
    ]
    assert refused == [True] * 3
