"""No payload reaches inturn's logs, its events, or the error text it builds.

A secret rides in every payload here, and every path that logs or keeps an
error is driven: retries, discards, timeouts, undecodable payloads, crashes,
a failed give-back, refused sends.  Each captured event is checked as a
console renders it and, should it carry an exception, with every local of
every frame, as rich and better-exceptions show them.  What the handler's
own exceptions say is the application's text: they never quote the payload
here, so anything found is inturn's.
"""

from __future__ import annotations

import traceback
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, Literal

import attrs
import pytest
import structlog
import trio
import trio.testing

import inturn
from inturn.journal import Append, Change, Complete, MarkAttempt
from inturn.testing import FaultyJournal

from .helpers import EventLog, dead_letters

EventDict = structlog.typing.EventDict

SECRET = "4111-1111-1111-1111"
"""A card number: found anywhere below, it leaked."""


@attrs.frozen
class Card:
    number: int = attrs.field(validator=attrs.validators.instance_of(int))


def _digits_only(instance: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if not value.isdigit():
        raise ValueError(f"card number {value!r} is not all digits")  # quotes the value


@attrs.frozen
class StrictCard:
    number: str = attrs.field(validator=_digits_only)


@attrs.frozen
class Unregistered:
    number: str


CODEC = inturn.JSONCodec(types=[Card, StrictCard])


def refused(cls: Callable[[Any], object], value: object = SECRET) -> object:
    """An instance holding *value*, which its class's validator refuses.

    It encodes, and fails to decode: as after a validator was added.
    """
    with attrs.validators.disabled():
        return cls(value)


def _chain(error: BaseException | None) -> Iterator[BaseException]:
    while error is not None:
        yield error
        error = error.__cause__ or error.__context__


def rendered(event: EventDict) -> str:
    """*event* as a console prints it, plus what a locals-showing renderer adds."""
    texts = [repr(event), structlog.dev.ConsoleRenderer(colors=False)(None, "info", dict(event))]
    exc_info = event.get("exc_info")
    if isinstance(exc_info, BaseException):
        texts += traceback.format_exception(exc_info)
        for error in _chain(exc_info):
            for frame, _ in traceback.walk_tb(error.__traceback__):
                texts += [repr(value) for value in frame.f_locals.values()]
    return "\n".join(texts)


def assert_no_secret(logs: list[EventDict], texts: Sequence[object] = ()) -> None:
    """No event passes an exception (text only), and none of *logs* or *texts* holds SECRET."""
    for log in logs:
        assert "exc_info" not in log, log["event"]
        assert SECRET not in rendered(log), log["event"]
    for text in texts:
        assert SECRET not in repr(text)


def test_rendered_shows_what_a_locals_renderer_would() -> None:
    """The check above would catch a payload held in a frame's locals."""

    def fails(data: bytes) -> None:
        raise RuntimeError("no text of its own")

    with pytest.raises(RuntimeError) as raised:
        fails(SECRET.encode())
    assert SECRET in rendered({"event": "x", "exc_info": raised.value})


def fails_first(kind: type[Change]) -> FaultyJournal:
    """A MemoryJournal whose first write of a *kind* change fails (the actor crashes once)."""
    failed = False

    def fail(changes: Sequence[Change]) -> bool:
        nonlocal failed
        if not failed and isinstance(changes[0], kind):
            failed = True
            return True
        return False

    return FaultyJournal(inturn.MemoryJournal(), fail=fail)


async def handler(job: inturn.Job) -> object:
    """Steered by the payload's "kind"; returns the payload, so a result holds it too."""
    kind = job.payload["kind"]  # type: ignore[index]
    if kind == "flaky" and job.attempt == 1:
        raise ValueError("the gateway is down")
    if kind == "refused":
        raise inturn.PermanentError("the bank refused it")
    if kind == "broken":
        raise RuntimeError("always fails")
    if kind == "slow":
        await trio.sleep(10)
    return job.payload


def broken_on_event(event: inturn.Event) -> None:
    raise RuntimeError("metrics are down")


@pytest.mark.parametrize("hook", ["none", "collect", "raise"])
async def test_no_event_or_dead_letter_of_a_failing_job_holds_the_payload(
    autojump_clock: trio.testing.MockClock, hook: Literal["none", "collect", "raise"]
) -> None:
    """Retries, discards (permanent, out of attempts, timed out) and a crash: no secret anywhere."""
    collected = EventLog()
    on_event = {"none": None, "collect": collected, "raise": broken_on_event}[hook]
    with structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(
            handler,
            journal=fails_first(Complete),
            retry=inturn.Retry(max_attempts=2, jitter=0.0),
            job_timeout=1.0,
            on_event=on_event,
        ) as sup:
            ids = {}
            for kind in ("flaky", "refused", "broken", "slow", "fine"):
                ids[kind] = await sup.send(kind, {"kind": kind, "card_number": SECRET})
            ids["ask"] = await sup.submit({"kind": "fine", "card": [SECRET]})
            with pytest.raises(inturn.JobDiscarded) as discarded:
                await sup.ask("refused", {"kind": "refused", "card_number": SECRET})
            await sup.wait_idle()
            dead = await sup.dead_letters()
            infos = [await sup.job(job_id) for job_id in ids.values()]
            keys = await sup.keys()

    names = {log["event"] for log in logs}
    assert {"job.retry_scheduled", "job.discarded", "job.completed", "actor.crashed"} <= names
    assert ("on_event.failed" in names) == (hook == "raise")
    errors = sorted(info.last_error or "" for info in dead)
    assert errors == sorted(
        [
            "inturn.errors.PermanentError: the bank refused it",
            "inturn.errors.PermanentError: the bank refused it",
            "RuntimeError: always fails",
            f"TimeoutError: job {ids['slow']} ran longer than job_timeout=1.0s",
        ]
    )
    errors_of = [(info.last_error, info.state) for info in infos if info is not None]
    assert_no_secret(
        logs,
        [errors_of, keys, collected.events, str(discarded.value), str(discarded.value.__cause__)],
    )


async def test_a_crash_is_logged_as_text_without_the_payload(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """actor.crashed carries the error and its traceback as text: the frames hold the payload."""
    with structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(handler, journal=fails_first(Complete)) as sup:
            await sup.send("k", {"kind": "fine", "card_number": SECRET})
            await sup.wait_idle()
            assert sup.stats().completed == 1

    [crash] = [log for log in logs if log["event"] == "actor.crashed"]
    assert crash["error"] == "inturn.errors.JournalError: injected failure"
    assert crash["exception"].startswith("Traceback (most recent call last):")
    assert crash["exception"].endswith("inturn.errors.JournalError: injected failure")
    assert_no_secret(logs)


async def test_a_failed_give_back_is_logged_as_text_without_the_payload(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """job.attempt_not_returned carries text only: the failing frame holds the jobs' bytes."""

    def gives_back(changes: Sequence[Change]) -> bool:
        return any(isinstance(change, MarkAttempt) and change.attempt == 0 for change in changes)

    journal = FaultyJournal(inturn.MemoryJournal(), fail=gives_back)
    started = trio.Event()

    async def hangs(job: inturn.Job) -> None:
        started.set()
        await trio.sleep_forever()

    with structlog.testing.capture_logs() as logs, trio.move_on_after(5):
        async with inturn.open_supervisor(hangs, journal=journal) as sup:
            await sup.send("k", {"card_number": SECRET})
            await started.wait()

    [event] = [log for log in logs if log["event"] == "job.attempt_not_returned"]
    assert event["error"] == "inturn.errors.JournalError: injected failure"
    assert "Traceback" in event["exception"]
    assert_no_secret(logs)


async def test_an_undecodable_payload_leaves_no_value_in_the_dead_letter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A DecodeError names the field or the place, never the value; so do its events."""
    journal = inturn.MemoryJournal()
    await journal.open()
    raw = [
        b'{"card_number":"' + SECRET.encode(),  # cut short
        b"\xff" + SECRET.encode(),  # not UTF-8
        b'{"$type":"tests.runtime.test_payloads.Gone","number":"' + SECRET.encode() + b'"}',
        b'{"$type":"tests.runtime.test_secrets.Card","numbr":"' + SECRET.encode() + b'"}',
        b'{"$type":"tests.runtime.test_secrets.Card","number":1,"cvv":"' + SECRET.encode() + b'"}',
    ]
    await journal.write([Append(job_id=i, key=f"raw{i}", data=d) for i, d in enumerate(raw, 1)])
    await journal.aclose()

    with structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(handler, journal=journal, codec=CODEC) as sup:
            await sup.send("card", refused(Card))
            await sup.send("strict", {"nested": [refused(StrictCard)]})
            await sup.wait_idle()
            assert sup.stats().discarded == len(raw) + 2
            dead = await sup.dead_letters()

    errors = {info.key: info.last_error or "" for info in dead}
    assert all(text.startswith("inturn.errors.DecodeError: ") for text in errors.values())
    assert "from the validator of field 'number'" in errors["card"]
    assert "from a validator, converter or __attrs_post_init__" in errors["strict"]
    assert "unknown field 'numbr', missing field 'number'" in errors["raw4"]
    assert "unknown field 'cvv'" in errors["raw5"]
    discards = [log for log in logs if log["event"] == "job.discarded"]
    assert sorted(log["error"] for log in discards) == sorted(errors.values())
    assert_no_secret(logs, list(errors.values()))


class QuotingCodec:
    """JSON, except that decoding fails with an error that quotes the bytes."""

    def encode(self, payload: object) -> bytes:
        return inturn.JSONCodec().encode(payload)

    def decode(self, data: bytes) -> object:
        raise KeyError(f"no schema for {data!r}")


async def test_a_custom_codecs_error_text_stays_out_of_the_dead_letter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A custom codec's error at decode is named by type; the text stays on its cause."""
    journal = inturn.MemoryJournal()
    with structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(handler, journal=journal, codec=QuotingCodec()) as sup:
            with pytest.raises(inturn.JobDiscarded) as discarded:
                await sup.ask("k", {"card_number": SECRET})

    cause = discarded.value.__cause__
    assert isinstance(cause, inturn.DecodeError)
    assert str(cause) == "cannot decode payload: the codec raised KeyError"
    assert SECRET in str(cause.__cause__)  # the codec's own text, for whoever debugs it
    [info] = await dead_letters(journal)
    assert_no_secret(logs, [info.last_error])


UNENCODABLE = [
    pytest.param({SECRET}, id="set"),
    pytest.param((SECRET,), id="tuple"),
    pytest.param({"card": (SECRET, 1)}, id="nested-tuple"),
    pytest.param({1: SECRET}, id="int-key"),
    pytest.param([Unregistered(SECRET)], id="unregistered-attrs"),
    pytest.param(SECRET + "\ud800", id="lone-surrogate"),
    pytest.param(refused(Card, SECRET.encode()), id="bytes-field"),
]


@pytest.mark.parametrize("payload", UNENCODABLE)
async def test_an_unencodable_payload_is_refused_without_its_value(payload: object) -> None:
    """EncodeError at send names the type or the rule, never the value."""
    errors: list[str] = []
    with structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(handler, codec=CODEC) as sup:
            sends: list[Callable[[], Awaitable[object]]] = [
                lambda: sup.send("k", payload),
                lambda: sup.submit(payload),
                lambda: sup.ask("k", payload),
                lambda: sup.send_many([("k", payload)]),
            ]
            for send in sends:
                with pytest.raises(inturn.EncodeError) as refusal:
                    await send()
                errors.append("".join(traceback.format_exception(refusal.value)))
    assert_no_secret(logs, errors)


class QuotingEncoder(QuotingCodec):
    """Fails to encode, with an error that quotes the payload."""

    def encode(self, payload: object) -> bytes:
        raise ValueError(f"cannot encode {payload!r}")


async def test_a_custom_codecs_encode_error_text_is_not_quoted() -> None:
    """The EncodeError for a custom codec's own error names its type; the text stays on its cause."""
    async with inturn.open_supervisor(handler, codec=QuotingEncoder()) as sup:
        with pytest.raises(inturn.EncodeError) as refusal:
            await sup.send("k", SECRET)
    assert SECRET in str(refusal.value.__cause__)
    assert SECRET not in str(refusal.value)


async def test_a_bad_send_many_item_is_refused_without_its_payload() -> None:
    """send_many refuses an item that is not a (key, payload) pair by its shape, not its repr."""
    async with inturn.open_supervisor(handler) as sup:
        with pytest.raises(TypeError) as refusal:
            await sup.send_many([("k", SECRET, "extra")])  # type: ignore[list-item]
    assert SECRET not in str(refusal.value)
