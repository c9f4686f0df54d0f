"""Payloads at runtime: what the handler sees is what the journal holds, decoded."""

from __future__ import annotations

import math
from decimal import Decimal

import attrs
import pytest
import structlog
import trio
import trio.testing

import inturn
from inturn.journal import Append
from inturn.testing import Recorder

from .helpers import dead_letters


@attrs.frozen
class LedgerEntry:
    account: str
    amount: int
    memo: str | None = None


@attrs.frozen
class Unregistered:
    value: int


CODEC = inturn.JSONCodec(types=[LedgerEntry])


async def test_handler_gets_an_equal_registered_attrs_payload() -> None:
    """A registered attrs payload, nested in JSON values, reaches the handler equal and rebuilt."""
    sent = {
        "entries": [LedgerEntry("acc", 5), LedgerEntry("acc", -3, memo="refund")],
        "total": 2,
        "tags": ["a", None, True, 1.5],
    }
    recorder = Recorder()
    async with inturn.open_supervisor(recorder, codec=CODEC) as sup:
        await sup.send("acc", sent)
        await sup.send("acc", LedgerEntry("acc", 7))
        await sup.submit(LedgerEntry("x", 1))

    [first, second, third] = sorted(recorder.calls, key=lambda call: call.job.id)
    assert sent == first.job.payload
    assert first.job.payload is not sent
    got = first.job.payload["entries"][0]
    assert type(got) is LedgerEntry
    assert LedgerEntry("acc", 7) == second.job.payload
    assert LedgerEntry("x", 1) == third.job.payload


async def test_handler_sees_the_value_at_send_not_later_mutations() -> None:
    """Mutating a payload after send returns does not change what the handler receives."""
    recorder = Recorder()
    async with inturn.open_supervisor(recorder) as sup:
        payload: dict[str, object] = {"items": [1, 2], "n": 1}
        await sup.send("k", payload)
        payload["n"] = 2
        payload["items"].append(3)  # type: ignore[attr-defined]
        del payload["items"]
    assert [call.job.payload for call in recorder.calls] == [{"items": [1, 2], "n": 1}]


async def test_each_attempt_decodes_a_fresh_payload(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A handler that mutates its payload and fails gets the journaled value on the retry."""
    seen: list[object] = []

    async def handler(job: inturn.Job) -> None:
        seen.append(repr(job.payload))
        job.payload["count"] += 1  # type: ignore[index]
        if job.attempt == 1:
            raise ValueError("retry me")

    async with inturn.open_supervisor(handler, retry=inturn.Retry(jitter=0.0)) as sup:
        await sup.send("k", {"count": 0})
    assert seen == ["{'count': 0}", "{'count': 0}"]


UNENCODABLE = [
    pytest.param((1, 2), id="tuple"),
    pytest.param({1, 2}, id="set"),
    pytest.param(math.nan, id="nan"),
    pytest.param(math.inf, id="inf"),
    pytest.param(b"bytes", id="bytes"),
    pytest.param({1: "int key"}, id="int-dict-key"),
    pytest.param(Unregistered(1), id="unregistered-attrs"),
    pytest.param(Decimal("1.5"), id="decimal"),
    pytest.param(["ok", {"nested": (1,)}], id="nested-tuple"),
    pytest.param("\ud800", id="lone-surrogate"),
]


@pytest.mark.parametrize("payload", UNENCODABLE)
async def test_unencodable_payload_is_refused_at_send(payload: object) -> None:
    """A payload the codec cannot round-trip raises EncodeError at send and journals nothing."""
    journal = inturn.MemoryJournal()
    recorder = Recorder()
    async with inturn.open_supervisor(recorder, journal=journal, codec=CODEC) as sup:
        before = sup.stats()
        with pytest.raises(inturn.EncodeError):
            await sup.send("k", payload, unique="u")
        with pytest.raises(inturn.EncodeError):
            await sup.submit(payload)
        with pytest.raises(inturn.EncodeError):
            await sup.ask("k", payload)
        assert before == sup.stats()
        assert sup._runtime.core.lanes() == 0
        assert journal.unfinished() == []

        await sup.send("k", "fine", unique="u")  # the unique key was not taken
    assert [call.job.payload for call in recorder.calls] == ["fine"]


async def test_custom_codec_error_becomes_encode_error() -> None:
    """A custom codec raising its own error at encode surfaces as EncodeError with that cause."""

    class PickyCodec:
        def encode(self, payload: object) -> bytes:
            raise ValueError("not today")

        def decode(self, data: bytes) -> object:
            return None

    journal = inturn.MemoryJournal()
    async with inturn.open_supervisor(Recorder(), journal=journal, codec=PickyCodec()) as sup:
        with pytest.raises(inturn.EncodeError) as exc_info:
            await sup.send("k", 1)
    assert isinstance(exc_info.value.__cause__, ValueError)
    assert journal.unfinished() == []


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"\xff\xfe not json", id="garbage"),
        pytest.param(b'{"$type": "nowhere.Missing", "x": 1}', id="unknown-type"),
        pytest.param(
            b'{"$type": "tests.runtime.test_payloads.LedgerEntry", "nope": 1}',
            id="wrong-fields",
        ),
        pytest.param(
            b'{"$type": "tests.runtime.test_payloads.LedgerEntry", "account": "a"}',
            id="missing-field",
        ),
    ],
)
async def test_undecodable_journaled_payload_is_a_dead_letter(
    autojump_clock: trio.testing.MockClock, data: bytes
) -> None:
    """A journaled payload that fails to decode is discarded with a DecodeError; others run."""
    journal = inturn.MemoryJournal()
    await journal.open()
    await journal.write(
        [
            Append(job_id=1, key="k", data=CODEC.encode("before")),
            Append(job_id=2, key="k", data=data),
            Append(job_id=3, key="k", data=CODEC.encode("after")),
            Append(job_id=4, key="other", data=CODEC.encode(LedgerEntry("o", 1))),
        ]
    )
    await journal.aclose()

    recorder = Recorder()
    with structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(recorder, journal=journal, codec=CODEC) as sup:
            await sup.wait_idle()
            assert sup.stats().discarded == 1
            assert sup.stats().completed == 3
            assert await sup.send("k", "still running") == 5

    assert [call.job.payload for call in recorder.by_key()["k"]] == [
        "before",
        "after",
        "still running",
    ]
    [dead] = await dead_letters(journal)
    assert (2, data, 1) == (dead.id, dead.data, dead.attempts)
    assert "DecodeError" in (dead.last_error or "")
    [event] = [e for e in logs if e["event"] == "job.discarded"]
    assert {"key": "k", "job_id": 2}.items() <= event.items()
    assert [e for e in logs if e["event"] == "actor.crashed"] == []


class RefusingCodec:
    """JSON, except that decoding the payload "poison" fails (with *error*)."""

    def __init__(self, error: Exception) -> None:
        self.json = inturn.JSONCodec()
        self.error = error

    def encode(self, payload: object) -> bytes:
        return self.json.encode(payload)

    def decode(self, data: bytes) -> object:
        payload = self.json.decode(data)
        if payload == "poison":
            raise self.error
        return payload


async def test_ask_for_an_undecodable_payload_raises_job_discarded(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """ask on a job whose payload fails to decode raises JobDiscarded caused by the DecodeError."""
    codec = RefusingCodec(inturn.DecodeError("poisoned"))
    recorder = Recorder()
    async with inturn.open_supervisor(recorder, codec=codec) as sup:
        with trio.fail_after(60), pytest.raises(inturn.JobDiscarded) as exc_info:
            await sup.ask("k", "poison")  # a hang here fails, in virtual time
        assert await sup.ask("k", "fine") is None
    assert exc_info.value.job_id == 1
    assert exc_info.value.__cause__ is codec.error
    assert [call.job.id for call in recorder.calls] == [2]


async def test_foreign_decode_error_is_wrapped_in_decode_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A custom codec's own error at decode discards the job with a DecodeError caused by it."""
    codec = RefusingCodec(KeyError("lost"))
    journal = inturn.MemoryJournal()
    async with inturn.open_supervisor(Recorder(), journal=journal, codec=codec) as sup:
        with trio.fail_after(60), pytest.raises(inturn.JobDiscarded) as exc_info:
            await sup.ask("k", "poison")  # a hang here fails, in virtual time
    cause = exc_info.value.__cause__
    assert isinstance(cause, inturn.DecodeError)
    assert cause.__cause__ is codec.error
    [dead] = await dead_letters(journal)
    assert "DecodeError" in (dead.last_error or "")
