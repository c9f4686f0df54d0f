"""Stable payload names: a journal outlives the process, and the classes, that wrote it.

Each test journals payloads in one supervisor on a `SQLiteJournal`, stops it
with the jobs unfinished, and opens a second one on the same file with a codec
built as a later version of the program would build it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs
import pytest
import trio

import inturn
from inturn.journal import Append
from inturn.testing import Recorder

GUARD = 30
"""Seconds any one test may take: a hang fails instead of blocking the run."""

SECRET = "4111-1111-1111-1111"
"""A card number in every refused payload: found in a dead letter's error, it leaked."""


@attrs.frozen
class PaymentV1:
    card: str
    amount: int


@attrs.frozen
class PaymentV2:
    """PaymentV1 with a field added, with a default."""

    card: str
    amount: int
    currency: str = "EUR"


@attrs.frozen
class PaymentWithRequiredField:
    card: str
    amount: int
    currency: str


@attrs.frozen
class PaymentWithoutAmount:
    card: str


async def journal_unfinished(path: Path, codec: inturn.Codec, sends: Sequence[object]) -> None:
    """Send *sends* to key "k" and stop the supervisor before any of them finishes."""
    started = trio.Event()

    async def hang(job: inturn.Job) -> None:
        started.set()
        await trio.sleep_forever()

    with trio.CancelScope() as scope:
        async with inturn.open_supervisor(
            hang, journal=inturn.SQLiteJournal(path), codec=codec
        ) as sup:
            for payload in sends:
                await sup.send("k", payload)
            await started.wait()
            scope.cancel()
    assert scope.cancelled_caught


async def test_a_named_payload_decodes_after_a_restart_with_an_evolved_class(
    tmp_path: Path,
) -> None:
    """Journaled under "payment", a payload reaches the next version's class, default filled."""
    path = tmp_path / "jobs.db"
    recorder = Recorder()
    with trio.fail_after(GUARD):
        await journal_unfinished(
            path,
            inturn.JSONCodec(types={"payment": PaymentV1}),
            [PaymentV1("c1", 5), {"batch": [PaymentV1("c2", 7)]}],
        )
        codec = inturn.JSONCodec(types={"payment": PaymentV2})
        async with inturn.open_supervisor(
            recorder, journal=inturn.SQLiteJournal(path), codec=codec
        ) as sup:
            await sup.wait_idle()
            assert await sup.dead_letters() == []
    assert [call.job.payload for call in recorder.calls] == [
        PaymentV2("c1", 5, "EUR"),
        {"batch": [PaymentV2("c2", 7)]},
    ]
    assert type(recorder.calls[0].job.payload) is PaymentV2


async def test_list_form_payloads_decode_under_their_module_qualname(tmp_path: Path) -> None:
    """A journal written with types=[cls] decodes with cls's module.qualname as its name."""
    path = tmp_path / "jobs.db"
    recorder = Recorder()
    with trio.fail_after(GUARD):
        await journal_unfinished(path, inturn.JSONCodec(types=[PaymentV1]), [PaymentV1("c", 1)])
        codec = inturn.JSONCodec(types={f"{__name__}.PaymentV1": PaymentV2})
        async with inturn.open_supervisor(
            recorder, journal=inturn.SQLiteJournal(path), codec=codec
        ) as sup:
            await sup.wait_idle()
    assert [call.job.payload for call in recorder.calls] == [PaymentV2("c", 1)]


async def test_a_backlog_journaled_from_main_decodes_under_that_name(tmp_path: Path) -> None:
    """The issue's backlog: "__main__.PaymentEvent" payloads decode once that is the name."""
    path = tmp_path / "jobs.db"
    journal = inturn.SQLiteJournal(path)
    await journal.open()
    await journal.write(
        [Append(job_id=1, key="k", data=b'{"$type":"__main__.PaymentEvent","card":"c","amount":3}')]
    )
    await journal.aclose()

    recorder = Recorder()
    codec = inturn.JSONCodec(types={"__main__.PaymentEvent": PaymentV2})
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(
            recorder, journal=inturn.SQLiteJournal(path), codec=codec
        ) as sup:
            await sup.wait_idle()
    assert [call.job.payload for call in recorder.calls] == [PaymentV2("c", 3)]


@pytest.mark.parametrize(
    ("cls", "refusal"),
    [
        pytest.param(
            PaymentWithRequiredField,
            "cannot rebuild a 'payment' payload (PaymentWithRequiredField):"
            " missing field 'currency'",
            id="missing-required-field",
        ),
        pytest.param(
            PaymentWithoutAmount,
            "cannot rebuild a 'payment' payload (PaymentWithoutAmount): unknown field 'amount'",
            id="unknown-field",
        ),
    ],
)
async def test_a_payload_its_new_class_refuses_is_a_dead_letter(
    tmp_path: Path, cls: type, refusal: str
) -> None:
    """A field the new class requires, or no longer has, discards the job with a DecodeError
    naming the field and the type, never a value; the supervisor runs on."""
    path = tmp_path / "jobs.db"
    recorder = Recorder()
    with trio.fail_after(GUARD):
        await journal_unfinished(
            path,
            inturn.JSONCodec(types={"payment": PaymentV1}),
            [PaymentV1(SECRET, 987654321)],
        )
        codec = inturn.JSONCodec(types={"payment": cls})
        async with inturn.open_supervisor(
            recorder, journal=inturn.SQLiteJournal(path), codec=codec
        ) as sup:
            await sup.wait_idle()
            [dead] = await sup.dead_letters()
            assert await sup.send("other", "still running") == 2
    assert dead.id == 1
    assert dead.last_error is not None
    assert "DecodeError" in dead.last_error
    assert refusal in dead.last_error
    assert SECRET not in dead.last_error
    assert "987654321" not in dead.last_error
    assert [call.job.payload for call in recorder.calls] == ["still running"]
