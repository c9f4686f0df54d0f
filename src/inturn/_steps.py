"""Durable steps: a step's result is journaled before the handler sees it.

`Job.step` runs a step through the supervisor's `StepLog`: the first time,
it calls the step's function, journals the encoded result (a `Step` record)
and returns it; on a later attempt of the same job, or after a crash, it
returns the journaled result without calling the function again.  So a step
is at-least-once until its result is journaled (a crash between the two
runs it again) and at-most-once after.

`Job.transaction` runs a step through the same log, as a transaction of the
journal's own database (`inturn.journal._transactions`): the function and
the record of its result commit together, so it is exactly-once.  Steps and
transactions share one namespace of names per job.

Per attempt the log keeps only the names called so far and, once the first
step asks, the results the journal holds for the job: nothing is read for a
job that takes no step.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs

from ._checks import check_step, check_transaction
from .core import Core
from .errors import EncodeError, JobStateError, PermanentError

if TYPE_CHECKING:
    from ._otel import Observer
    from .codec import Codec
    from .journal import Journal

__all__ = ["StepLog", "encode_result", "take_step"]


@attrs.define(eq=False)
class _Attempt:
    done: dict[str, bytes] | None = None
    """The job's journaled results, read when its first step is taken."""
    called: set[str] = attrs.field(factory=set)


@attrs.define(eq=False)
class StepLog:
    """The steps of the attempts running now, for one supervisor."""

    journal: Journal
    codec: Codec
    now: Callable[[], float]
    """Unix time by the supervisor's clock, for the journal's write."""
    max_payload: int = 16 * 1024 * 1024
    """The largest encoded result, as for payloads."""
    observer: Observer | None = attrs.field(default=None, init=False)
    """OpenTelemetry's, if the supervisor traces: a span per step (`Observer.step`)."""
    attempts: dict[int, _Attempt] = attrs.field(factory=dict, init=False)
    """The attempts running now that took a step (read-only outside: an attempt's end asks
    whether any did before it calls `ended`)."""

    async def run(
        self, job_id: int, name: str, fn: Callable[..., Any], args: tuple[Any, ...]
    ) -> Any:
        """Step *name* of job *job_id*: its journaled result, or ``fn(*args)``'s, journaled first."""
        check_step(name, fn)
        return await self._traced(
            "step", job_id, name, lambda: self._record(job_id, name, fn, args), read_first=True
        )

    async def transaction(
        self,
        job_id: int,
        attempt_number: int,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
    ) -> Any:
        """Step *name* of job *job_id*'s attempt *attempt_number*: its journaled result, or
        ``fn(connection, *args)``'s, run in the journal's transaction that records it."""
        check_transaction(name, fn)
        transaction = getattr(self.journal, "transaction", None)
        if transaction is None:
            raise TypeError(
                f"job.transaction needs a journal with a database of its own"
                f" (SQLiteJournal, PostgresJournal, MemoryJournal), not {type(self.journal).__name__}"
            )
        change = Core.transaction_taken(job_id, attempt_number, name)
        codec, limit = self.codec, self.max_payload
        ran = False

        def run(connection: object) -> bytes:
            nonlocal ran
            ran = True
            result = fn(connection, *args)
            if inspect.isawaitable(result):
                if inspect.iscoroutine(result):
                    result.close()  # never awaited: say so once, here
                raise TypeError(
                    f"transaction {name!r} returned an awaitable: its function must be plain"
                    " (def), as it runs inside the journal's transaction"
                )
            return encode_result(codec, job_id, name, result, limit)

        async def record() -> tuple[bytes, bool]:
            data = await transaction(change, run, now=self.now())
            if data is None:
                raise JobStateError(
                    job_id,
                    "finished",
                    f"it finished, or a later attempt started: transaction {name!r} rolled back",
                )
            return bytes(data), not ran  # a name recorded before: its result, not run

        # The journal answers a name recorded before itself, in the transaction: no read
        # first (a round trip per job, for a handler that takes only transactions).
        return await self._traced("transaction", job_id, name, record, read_first=False)

    async def _traced(
        self,
        kind: str,
        job_id: int,
        name: str,
        record: Callable[[], Awaitable[tuple[bytes, bool]]],
        *,
        read_first: bool,
    ) -> Any:
        """`_take`, in a span of its own if the supervisor traces."""
        if self.observer is None:
            data, _ = await self._take(job_id, name, record, read_first=read_first)
            return self.codec.decode(data)
        with self.observer.step(kind, name) as stepping:
            data, stepping.reused = await self._take(job_id, name, record, read_first=read_first)
        return self.codec.decode(data)

    async def _take(
        self,
        job_id: int,
        name: str,
        record: Callable[[], Awaitable[tuple[bytes, bool]]],
        *,
        read_first: bool,
    ) -> tuple[bytes, bool]:
        """Step *name*'s encoded result, and whether it was journaled before (reused)."""
        attempt = self.attempts.setdefault(job_id, _Attempt())
        if name in attempt.called:
            raise ValueError(
                f"step {name!r} was taken twice by job {job_id}: names are unique (a step"
                " that raised may be taken again)"
            )
        attempt.called.add(name)
        try:
            if attempt.done is None and read_first:
                attempt.done = dict(await self.journal.steps(job_id))
            data = None if attempt.done is None else attempt.done.get(name)
            reused = data is not None
            if data is None:
                data, reused = await record()
                if attempt.done is not None:
                    attempt.done[name] = data
        except BaseException:
            attempt.called.discard(name)  # not recorded: the handler may take it again
            raise
        return data, reused

    async def _record(
        self, job_id: int, name: str, fn: Callable[..., Any], args: tuple[Any, ...]
    ) -> tuple[bytes, bool]:
        data = await take_step(self.codec, job_id, name, fn, args, self.max_payload)
        if await self.journal.write([Core.step_taken(job_id, name, data)], now=self.now()):
            raise JobStateError(
                job_id, "finished", f"another writer finished it: step {name!r} not recorded"
            )
        return data, False

    def ended(self, *job_ids: int) -> None:
        """The attempts of jobs *job_ids* (one, or a batch's) ended: the next ones start
        from the journal."""
        if self.attempts:  # some handler took a step
            for job_id in job_ids:
                self.attempts.pop(job_id, None)


async def take_step(
    codec: Codec,
    job_id: int,
    name: str,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    max_payload: int = 16 * 1024 * 1024,
) -> bytes:
    """Run step *name*'s ``fn(*args)`` (sync or async) and return its result, encoded.

    Raises `PermanentError` if the codec refuses the result or it is too big.

    Permanent: a value the codec refuses never becomes one it takes, so
    retrying would only run the step again.  The message names the type,
    never the value.
    """
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return encode_result(codec, job_id, name, result, max_payload)


def encode_result(codec: Codec, job_id: int, name: str, result: object, max_payload: int) -> bytes:
    """A step's *result*, encoded; `PermanentError` if the codec refuses it or it is too big."""
    try:
        data = codec.encode(result)
    except Exception as exc:
        raise PermanentError(
            f"step {name!r} of job {job_id} returned a value of type {type(result).__name__},"
            " which the codec cannot encode"
        ) from (exc if isinstance(exc, EncodeError) else EncodeError(type(exc).__qualname__))
    if len(data) > max_payload:
        raise PermanentError(
            f"step {name!r} of job {job_id} returned {len(data)} bytes encoded,"
            f" over max_payload={max_payload}"
        )
    return data
