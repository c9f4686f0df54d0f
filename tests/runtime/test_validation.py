"""Rejected calls change nothing; invalid supervisor options fail before anything starts."""

from __future__ import annotations

import functools
import math
from collections.abc import AsyncIterator, Awaitable, Callable

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, strategies as st

import inturn
from inturn.journal import StoredJob
from inturn.keys import MAX_KEY_BYTES, validate_key
from inturn.testing import Recorder

Call = Callable[[inturn.Supervisor], Awaitable[object]]


@attrs.frozen
class Unregistered:
    """An attrs class the default codec was not told about."""

    n: int


# (a str that breaks a key rule, the rule the message must name)
BAD_KEYS = {
    "empty": ("", "empty"),
    "nul": ("a\x00b", "NUL"),
    "lone-surrogate": ("a\ud800", "UTF-8"),
    "too-long-ascii": ("x" * (MAX_KEY_BYTES + 1), "256 bytes"),
    "too-long-utf8": ("é" * (MAX_KEY_BYTES // 2 + 1), "256 bytes"),  # 129 chars, 258 bytes
}
NON_STR_KEYS = {"int": 1, "bytes": b"k", "none": None, "list": ["k"]}
UNENCODABLE = {
    "tuple": (1, 2),
    "set": {1},
    "bytes": b"raw",
    "int-dict-key": {1: "a"},
    "nan": math.nan,
    "inf": [math.inf],
    "lone-surrogate": "a\ud800",
    "object": object(),
    "unregistered-attrs": Unregistered(1),
    "reserved-type-tag": {"$type": "x"},
}


async def block(job: inturn.Job) -> None:
    await trio.sleep_forever()


@attrs.define
class Probe:
    """A supervisor holding one running job, and what to compare after a rejected call."""

    sup: inturn.Supervisor
    journal: inturn.MemoryJournal

    def snapshot(self) -> tuple[inturn.Stats, list[StoredJob]]:
        return self.sup.stats(), self.journal.unfinished()


@pytest.fixture
async def probe(autojump_clock: trio.testing.MockClock) -> AsyncIterator[Probe]:
    journal = inturn.MemoryJournal()
    with trio.CancelScope() as scope:
        async with inturn.open_supervisor(block, journal=journal) as sup:
            assert await sup.send("held", "x", unique="u-held") == 1
            await trio.testing.wait_all_tasks_blocked()
            yield Probe(sup, journal)
            scope.cancel()


async def assert_rejected(
    probe: Probe, call: Call, error: type[Exception], match: str | None = None, *, ids: int = 0
) -> None:
    """*call* raises *error*; stats, journal and (but for *ids* used up) the next job id are as before."""
    before = probe.snapshot()
    with pytest.raises(error, match=match):
        await call(probe.sup)
    await trio.testing.wait_all_tasks_blocked()
    assert before == probe.snapshot()
    assert await probe.sup.send("next", "x") == 2 + ids


@pytest.mark.parametrize(("key", "rule"), BAD_KEYS.values(), ids=BAD_KEYS.keys())
@pytest.mark.parametrize("method", ["send", "ask", "resume"])
async def test_an_invalid_key_raises_invalid_key_and_changes_nothing(
    probe: Probe, method: str, key: str, rule: str
) -> None:
    """send, ask and resume refuse a str key that breaks a rule, naming the rule."""
    calls: dict[str, Call] = {
        "send": lambda sup: sup.send(key, "x"),
        "ask": lambda sup: sup.ask(key, "x"),
        "resume": lambda sup: sup.resume(key),
    }
    await assert_rejected(probe, calls[method], inturn.InvalidKey, match=rule)


@pytest.mark.parametrize("key", NON_STR_KEYS.values(), ids=NON_STR_KEYS.keys())
@pytest.mark.parametrize("method", ["send", "ask", "resume"])
async def test_a_non_str_key_raises_type_error_and_changes_nothing(
    probe: Probe, method: str, key: object
) -> None:
    """send, ask and resume refuse a key that is not a str with TypeError (not InvalidKey)."""
    calls: dict[str, Call] = {
        "send": lambda sup: sup.send(key, "x"),  # type: ignore[arg-type]
        "ask": lambda sup: sup.ask(key, "x"),  # type: ignore[arg-type]
        "resume": lambda sup: sup.resume(key),  # type: ignore[arg-type]
    }
    before = probe.snapshot()
    with pytest.raises(TypeError) as exc_info:
        await calls[method](probe.sup)
    assert not isinstance(exc_info.value, inturn.InvalidKey)
    assert before == probe.snapshot()
    assert await probe.sup.send("next", "x") == 2


UNIQUE_CALLS: dict[str, Callable[[object], Call]] = {
    "send": lambda unique: lambda sup: sup.send("k", "x", unique=unique),  # type: ignore[arg-type]
    "submit": lambda unique: lambda sup: sup.submit("x", unique=unique),  # type: ignore[arg-type]
    "ask": lambda unique: lambda sup: sup.ask("k", "x", unique=unique),  # type: ignore[arg-type]
}


@pytest.mark.parametrize(("unique", "rule"), BAD_KEYS.values(), ids=BAD_KEYS.keys())
@pytest.mark.parametrize("method", UNIQUE_CALLS)
async def test_an_invalid_unique_raises_invalid_key_and_changes_nothing(
    probe: Probe, method: str, unique: str, rule: str
) -> None:
    """send, submit and ask refuse a unique key that breaks a key rule, naming the rule."""
    await assert_rejected(probe, UNIQUE_CALLS[method](unique), inturn.InvalidKey, match=rule)


@pytest.mark.parametrize("unique", [1, b"u", ["u"]], ids=["int", "bytes", "list"])
@pytest.mark.parametrize("method", UNIQUE_CALLS)
async def test_a_non_str_unique_raises_type_error_and_changes_nothing(
    probe: Probe, method: str, unique: object
) -> None:
    """send, submit and ask refuse a unique key that is not a str (or None) with TypeError."""
    await assert_rejected(probe, UNIQUE_CALLS[method](unique), TypeError)


@pytest.mark.parametrize("payload", UNENCODABLE.values(), ids=UNENCODABLE.keys())
@pytest.mark.parametrize("method", ["send", "submit", "ask"])
async def test_an_unencodable_payload_raises_encode_error_and_changes_nothing(
    probe: Probe, method: str, payload: object
) -> None:
    """A payload the codec cannot round-trip is refused with EncodeError and nothing is journaled."""
    calls: dict[str, Call] = {
        "send": lambda sup: sup.send("k", payload, unique="u-new"),
        "submit": lambda sup: sup.submit(payload, unique="u-new"),
        "ask": lambda sup: sup.ask("k", payload, unique="u-new"),
    }
    await assert_rejected(probe, calls[method], inturn.EncodeError)
    # and the unique key it asked for was not taken
    assert await probe.sup.send("k", "x", unique="u-new") == 3


async def test_a_duplicate_unique_changes_nothing(probe: Probe) -> None:
    """A send refused for its unique key journals nothing; the journal refused it, so it used up an id."""
    await assert_rejected(
        probe, lambda sup: sup.send("k", "x", unique="u-held"), inturn.DuplicateError, ids=1
    )


async def test_a_custom_codecs_own_error_becomes_an_encode_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Any exception from a custom codec's encode is raised as EncodeError, caused by it."""

    @attrs.define
    class PickyCodec:
        def encode(self, payload: object) -> bytes:
            if payload == "bad":
                raise ValueError("not this one")
            return inturn.JSONCodec().encode(payload)

        def decode(self, data: bytes) -> object:
            return inturn.JSONCodec().decode(data)

    journal = inturn.MemoryJournal()
    async with inturn.open_supervisor(block, journal=journal, codec=PickyCodec()) as sup:
        with pytest.raises(inturn.EncodeError) as exc_info:
            await sup.send("k", "bad")
        assert isinstance(exc_info.value.__cause__, ValueError)
        assert journal.unfinished() == []
        assert sup.stats().queued == 0


async def test_a_key_of_exactly_256_utf8_bytes_is_accepted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The byte limit is inclusive: 256 bytes of UTF-8 (128 two-byte characters) is a valid key."""
    seen: list[str | None] = []

    async def handler(job: inturn.Job) -> None:
        seen.append(job.key)
        await trio.lowlevel.checkpoint()

    key = "é" * (MAX_KEY_BYTES // 2)
    async with inturn.open_supervisor(handler) as sup:
        await sup.send(key, "x", unique=key)
        await sup.send("x" * MAX_KEY_BYTES, "x")
        await sup.wait_idle()
    assert sorted([key, "x" * MAX_KEY_BYTES]) == sorted(k for k in seen if k is not None)


# Any str, lone surrogates and NUL included, plus long ones around the byte limit.
any_key = st.text(st.characters(exclude_categories=()), max_size=20) | st.text(
    "aé\x00", min_size=120, max_size=260
)


@given(any_key)
def test_send_accepts_exactly_the_keys_that_obey_the_rules(key: str) -> None:
    """For any str, send accepts it iff it obeys the key rules, and a refusal journals nothing."""
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        size = None
    valid = bool(key) and "\x00" not in key and size is not None and size <= MAX_KEY_BYTES
    journal = inturn.MemoryJournal()

    async def handler(job: inturn.Job) -> None:
        assert key == job.key

    async def main() -> None:
        async with inturn.open_supervisor(handler, journal=journal) as sup:
            if valid:
                assert await sup.send(key, None) == 1
                await sup.wait_idle()
                assert sup.stats().completed == 1
            else:
                with pytest.raises(inturn.InvalidKey):
                    await sup.send(key, None)
                assert journal.unfinished() == []
                assert await sup.submit(None) == 1  # the refused send took no id

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


class Key(str):
    """A str subclass, as an application might define for its ids."""

    __slots__ = ()


class EqualsAll(str):
    """A str subclass that claims to equal every str."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    __hash__ = str.__hash__


# Valid keys, invalid ones, and str subclasses of either (one that equals everything).
sent_keys = st.sampled_from(
    ["a", "b", "", "a\x00", "a\ud800", Key("a"), Key(""), EqualsAll("a"), EqualsAll("")]
)


@given(st.lists(sent_keys, max_size=8))
def test_sends_in_a_row_check_each_key_whatever_came_before(keys: list[str]) -> None:
    """Each send of a row judges its own key (send remembers the last key it validated, to
    skip a repeat): refused as `validate_key` refuses it, else journaled as a plain str."""
    journal = inturn.MemoryJournal()
    accepted: list[str] = []

    async def main() -> None:
        with trio.CancelScope() as scope:
            async with inturn.open_supervisor(block, journal=journal) as sup:
                for key in keys:
                    try:
                        expected = validate_key(key)
                    except (TypeError, inturn.InvalidKey) as exc:
                        with pytest.raises(type(exc)):
                            await sup.send(key, None)
                    else:
                        await sup.send(key, None)
                        accepted.append(expected)
                stored = [job.key for job in journal.unfinished()]
                assert stored == accepted
                assert all(type(key) is str for key in stored)
                scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


# -- open_supervisor arguments -----------------------------------------------


async def noop(job: inturn.Job) -> None:
    await trio.lowlevel.checkpoint()


class SyncCallable:
    def __call__(self, job: inturn.Job) -> None:
        pass


class AsyncCallable:
    async def __call__(self, job: inturn.Job) -> str:
        await trio.lowlevel.checkpoint()
        return f"ran {job.id}"


async def tagged(tag: str, job: inturn.Job) -> str:
    await trio.lowlevel.checkpoint()
    return f"{tag} {job.id}"


BAD_OPTIONS: dict[str, tuple[dict[str, object], type[Exception]]] = {
    "handler-not-callable": ({"handler": "nope"}, TypeError),
    "handler-a-plain-def": ({"handler": lambda job: None}, TypeError),
    "handler-a-sync-partial": ({"handler": functools.partial(print, "job")}, TypeError),
    "handler-a-builtin": ({"handler": print}, TypeError),
    "handler-a-sync-callable-object": ({"handler": SyncCallable()}, TypeError),
    "retry-not-a-retry": ({"retry": {"max_attempts": 3}}, TypeError),
    "idle-timeout-negative": ({"idle_timeout": -1.0}, ValueError),
    "idle-timeout-nan": ({"idle_timeout": math.nan}, ValueError),
    "idle-timeout-inf": ({"idle_timeout": math.inf}, ValueError),
    "idle-timeout-str": ({"idle_timeout": "1"}, TypeError),
    "idle-timeout-bool": ({"idle_timeout": True}, TypeError),
    "idle-timeout-beyond-float": ({"idle_timeout": 10**400}, ValueError),
    "job-timeout-zero": ({"job_timeout": 0}, ValueError),
    "job-timeout-negative": ({"job_timeout": -5.0}, ValueError),
    "job-timeout-inf": ({"job_timeout": math.inf}, ValueError),
    "job-timeout-str": ({"job_timeout": "5"}, TypeError),
    "on-discard-unknown": ({"on_discard": "stop"}, ValueError),
    "max-concurrency-zero": ({"max_concurrency": 0}, ValueError),
    "max-concurrency-float": ({"max_concurrency": 2.0}, TypeError),
    "max-concurrency-bool": ({"max_concurrency": True}, TypeError),
    "window-zero": ({"window": 0}, ValueError),
    "window-negative": ({"window": -1}, ValueError),
    "window-float": ({"window": 1.5}, TypeError),
    "window-bool": ({"window": True}, TypeError),
    "window-str": ({"window": "3"}, TypeError),
    "max-buffered-zero": ({"max_buffered": 0}, ValueError),
    "max-buffered-negative": ({"max_buffered": -1}, ValueError),
    "max-buffered-float": ({"max_buffered": 1.5}, TypeError),
    "max-buffered-bool": ({"max_buffered": True}, TypeError),
    "max-buffered-str": ({"max_buffered": "3"}, TypeError),
    "codec-without-decode": ({"codec": object()}, TypeError),
    "max-restarts-negative": ({"max_restarts": -1}, ValueError),
    "max-restarts-float": ({"max_restarts": 1.5}, TypeError),
    "restart-window-zero": ({"restart_window": 0}, ValueError),
    "restart-window-nan": ({"restart_window": math.nan}, ValueError),
    "random-not-callable": ({"random": 0.5}, TypeError),
    "journal-not-a-journal": ({"journal": {}}, TypeError),
}


@pytest.mark.parametrize(("options", "error"), BAD_OPTIONS.values(), ids=BAD_OPTIONS.keys())
async def test_invalid_open_supervisor_arguments_raise_before_anything_starts(
    options: dict[str, object], error: type[Exception]
) -> None:
    """A bad option raises TypeError or ValueError on entry, before the journal is opened."""
    journal = inturn.MemoryJournal()
    kwargs: dict[str, object] = {"handler": noop, "journal": journal, **options}
    handler = kwargs.pop("handler")
    with pytest.raises(error):
        async with inturn.open_supervisor(handler, **kwargs):  # type: ignore[arg-type]
            pytest.fail("the body must not run")
    # the journal was never claimed, so another supervisor can open it
    async with inturn.open_supervisor(noop, journal=journal) as sup:
        assert await sup.send("k", None) == 1


@pytest.mark.parametrize(
    "options",
    [
        {"idle_timeout": 0},
        {"idle_timeout": 2},
        {"job_timeout": 0.001},
        {"max_concurrency": 1},
        {"window": 1},
        {"max_buffered": 1},
        {"max_restarts": 0},
        {"on_discard": "halt"},
        {"random": lambda: 0.0},
    ],
    ids=lambda options: next(iter(options)),
)
async def test_boundary_open_supervisor_arguments_are_accepted(
    autojump_clock: trio.testing.MockClock, options: dict[str, object]
) -> None:
    """Values at the edge of each option's range are valid, and jobs run with them."""
    async with inturn.open_supervisor(noop, **options) as sup:  # type: ignore[arg-type]
        await sup.send("k", None)
        await sup.wait_idle()
        assert sup.stats().completed == 1


async def test_a_sync_handler_is_refused_with_a_message_that_says_what_to_write() -> None:
    """A plain ``def`` handler would fail every attempt into the dead letters: refused at open."""

    def apply(job: inturn.Job) -> None:
        pass

    with pytest.raises(TypeError, match=r"async def.*to_thread"):
        async with inturn.open_supervisor(apply):  # type: ignore[arg-type]
            pytest.fail("the body must not run")


@pytest.mark.parametrize(
    "handler",
    [noop, AsyncCallable(), functools.partial(tagged, "tag"), Recorder(noop)],
    ids=["async-def", "async-callable-object", "partial-of-async-def", "recorder"],
)
async def test_every_shape_of_async_handler_is_accepted(handler: object) -> None:
    async with inturn.open_supervisor(handler) as sup:  # type: ignore[arg-type]
        await sup.send("k", None)
        await sup.wait_idle()
        assert sup.stats().completed == 1
