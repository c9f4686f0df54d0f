"""Unique keys' reservations against a reference model, driven by hypothesis.

Random runs of appends (with and without a window), completions, discards,
purges, revives and time passing, written to a journal with explicit ``now``s:
every write the model refuses raises `DuplicateError` naming the same holder
and end, and every write it accepts applies.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
import trio
from hypothesis import given, settings, strategies as st

import inturn
from inturn.journal import Append, Change, Complete, Discard, Journal, Purge, Revive

UNIQUES = ("u", "v")

steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("append"),
            st.sampled_from(UNIQUES),
            st.none() | st.sampled_from([5.0, 20.0]),
        ),
        st.tuples(st.sampled_from(["complete", "discard", "purge", "revive"])),
        st.tuples(st.just("wait"), st.sampled_from([1.0, 5.0, 30.0])),
    ),
    max_size=25,
)


@attrs.define
class Model:
    now: float = 1_000.0
    next_id: int = 1
    unfinished: dict[int, tuple[str, float | None]] = attrs.field(factory=dict)
    dead: dict[int, tuple[str, float | None]] = attrs.field(factory=dict)
    reserved: dict[str, tuple[int, float | None]] = attrs.field(factory=dict)
    """Unique key -> its holder and until (None while the holder is unfinished)."""

    def refusal(self, unique: str, own: int | None = None) -> tuple[int, float | None] | None:
        held = self.reserved.get(unique)
        if held is None or held[0] == own:
            return None
        until = held[1]
        return held if until is None or until > self.now else None

    def finish(self, job_id: int) -> None:
        unique, window = self.unfinished.pop(job_id)
        if window is None:
            del self.reserved[unique]
        else:
            self.reserved[unique] = (job_id, self.now + window)


async def play(journal: Journal, run: list[tuple[object, ...]]) -> None:
    model = Model()
    await journal.open()
    try:
        for step in run:
            kind = step[0]
            change: Change | None = None
            refusal: tuple[int, float | None] | None = None
            if kind == "wait":
                assert isinstance(step[1], float)
                model.now += step[1]
                continue
            if kind == "append":
                unique, window = step[1], step[2]
                assert isinstance(unique, str)
                assert window is None or isinstance(window, float)
                change = Append(
                    job_id=model.next_id, key="k", data=b"", unique=unique, unique_for=window
                )
                refusal = model.refusal(unique)
            elif kind in ("complete", "discard") and model.unfinished:
                job_id = min(model.unfinished)
                change = Complete(job_id) if kind == "complete" else Discard(job_id, "E")
            elif kind in ("purge", "revive") and model.dead:
                job_id = min(model.dead)
                change = Purge(job_id) if kind == "purge" else Revive(job_id)
                if kind == "revive":
                    refusal = model.refusal(model.dead[job_id][0], own=job_id)
            if change is None:
                continue
            if refusal is not None:
                with pytest.raises(inturn.DuplicateError) as caught:
                    await journal.write([change], now=model.now)
                assert (caught.value.job_id, caught.value.until) == refusal
                continue
            assert list(await journal.write([change], now=model.now)) == []
            match change:
                case Append(job_id=job_id, unique=unique, unique_for=window):
                    assert unique is not None
                    model.unfinished[job_id] = (unique, window)
                    model.reserved[unique] = (job_id, None)
                    model.next_id += 1
                case Complete(job_id=job_id):
                    model.finish(job_id)
                case Discard(job_id=job_id):
                    model.dead[job_id] = model.unfinished[job_id]
                    model.finish(job_id)
                case Purge(job_id=job_id):
                    del model.dead[job_id]  # its reservation stays
                case Revive(job_id=job_id):
                    unique, window = model.dead.pop(job_id)
                    model.unfinished[job_id] = (unique, window)
                    model.reserved[unique] = (job_id, None)
    finally:
        await journal.aclose()


@given(steps)
def test_a_memory_journal_reserves_as_the_model(run: list[tuple[object, ...]]) -> None:
    trio.run(play, inturn.MemoryJournal(), run)


@settings(max_examples=30)
@given(steps)
def test_an_sqlite_journal_reserves_as_the_model(
    tmp_path_factory: pytest.TempPathFactory, run: list[tuple[object, ...]]
) -> None:
    path: Path = tmp_path_factory.mktemp("reserve") / "jobs.db"
    trio.run(play, inturn.SQLiteJournal(path, durability="normal"), run)
