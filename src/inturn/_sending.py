"""What every way of sending a job checks, in one place, before anything is written.

A job to send becomes a `NewJob`, ``(key, data, unique, unique_for,
due_at)``: its unique key validated, its window checked against it, its due
time made a Unix time on the sender's clock, its payload encoded by the codec
and held to a size.  `Supervisor.send` and `send_many` build theirs here, and
so does `Operator.send` for a service that runs elsewhere (`inturn.operator`),
so a job sent either way meets the same checks, in the same order, with the
same typed errors.

A job sent to a service elsewhere arrives encoded, in a `Command` (`SentJob`).
The service checks it again (`received_jobs`), as the row may come from
another version of inturn or from a hand: and it decodes each payload once
with its own codec, so a sender whose codec is not the service's learns it
from the answer (`DecodeError`), not later from a dead letter.  No message
here holds a payload: they name positions, sizes and types.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ._entries import NewJob
from ._schedule import due_time
from .codec import Codec
from .errors import DecodeError, EncodeError
from .jobs import Item
from .journal import SentJob
from .keys import validate_key, validate_unique, validate_unique_for

__all__ = ["new_job", "new_jobs", "received_jobs"]


def new_job(
    key: str | None,
    payload: object,
    unique: object,
    unique_for: object,
    delay: object,
    at: object,
    *,
    encode: Callable[[object], bytes],
    now: float,
) -> NewJob:
    """The job `send` sends, its *key* already validated (a producer's hot path checks it
    once for many sends); the rest checked here, in `send`'s order."""
    unique = validate_unique(unique)
    window = validate_unique_for(unique_for, unique)
    due = None if delay is None and at is None else due_time(delay, at, now)
    return (key, encode(payload), unique, window, due)


def new_jobs(
    items: Iterable[object], *, encode: Callable[[object], bytes], now: float
) -> list[NewJob]:
    """The jobs `send_many` sends, checked item by item.

    Raises:
        TypeError: an item is not a ``(key, payload)`` pair or an `Item`, or
            a key is not a `str`.
        ValueError: two items take the same unique key.

    and every error of `new_job`.
    """
    batch: list[NewJob] = []
    first: dict[str, int] = {}  # unique key -> the item that takes it
    valid: str | None = None  # the last key validated: a batch often repeats one
    for position, item in enumerate(items):
        if isinstance(item, tuple) and len(item) == 2:  # no unique key, due at once
            key, payload = item
            if type(key) is not str or key != valid:
                key = valid = validate_key(key)
            batch.append((key, encode(payload), None, None, None))
            continue
        if not isinstance(item, Item):
            raise TypeError(
                "send_many takes (key, payload) pairs or inturn.Item values,"
                f" not a {type(item).__name__}"
            )
        due = due_time(item.delay, item.at, now)
        key, unique = validate_key(item.key), validate_unique(item.unique)
        unique_for = validate_unique_for(item.unique_for, unique)
        _check_once(first, unique, position)
        batch.append((key, encode(item.payload), unique, unique_for, due))
    return batch


def received_jobs(
    jobs: Sequence[SentJob], *, codec: Codec, max_payload: int, now: float
) -> list[NewJob]:
    """The jobs a `Command` sent, checked again by the service that accepts them.

    Raises:
        ValueError: the command holds no jobs (its row was malformed), or
            two take the same unique key.
        EncodeError: a payload is over *max_payload*.
        DecodeError: *codec* cannot decode a payload (the sender's codec is
            another).

    and every error of `new_job`.
    """
    if not jobs:
        raise ValueError("the command sends no jobs: its row is malformed")
    batch: list[NewJob] = []
    first: dict[str, int] = {}
    for position, (key, data, unique, unique_for, due_at) in enumerate(jobs):
        key, unique = validate_key(key), validate_unique(unique)
        window = validate_unique_for(unique_for, unique)
        due = None if due_at is None else due_time(None, due_at, now)
        _check_once(first, unique, position)
        if len(data) > max_payload:
            raise EncodeError(
                f"payload is {len(data)} bytes encoded, over max_payload={max_payload}"
            )
        try:
            codec.decode(data)
        except DecodeError as exc:
            raise DecodeError(
                f"job {position} of the send: {exc}; is the sender's codec this service's?"
            ) from None
        except Exception as exc:  # a custom codec's own error type
            raise DecodeError(
                f"job {position} of the send: cannot decode payload: the codec raised"
                f" {type(exc).__qualname__}; is the sender's codec this service's?"
            ) from None
        batch.append((key, data, unique, window, due))
    return batch


def _check_once(first: dict[str, int], unique: str | None, position: int) -> None:
    if unique is not None and first.setdefault(unique, position) != position:
        raise ValueError(
            f"send_many: items {first[unique]} and {position} both take unique key {unique!r}"
        )
