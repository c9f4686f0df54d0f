"""Durable steps: a step's result is journaled before the handler sees it.

`Job.step` runs a step through the supervisor's `StepLog`: the first time,
it calls the step's function, journals the encoded result (a `Step` record)
and returns it; on a later attempt of the same job, or after a crash, it
returns the journaled result without calling the function again.  So a step
is at-least-once until its result is journaled (a crash between the two
runs it again) and at-most-once after.

Per attempt the log keeps only the names called so far and, once the first
step asks, the results the journal holds for the job: nothing is read for a
job that takes no step.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from ._checks import check_step
from .core import Core
from .errors import EncodeError, JobStateError, PermanentError

if TYPE_CHECKING:
    from .codec import Codec
    from .journal import Journal

__all__ = ["StepLog", "take_step"]


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
    attempts: dict[int, _Attempt] = attrs.field(factory=dict, init=False)
    """The attempts running now that took a step (read-only outside: an attempt's end asks
    whether any did before it calls `ended`)."""

    async def run(
        self, job_id: int, name: str, fn: Callable[..., Any], args: tuple[Any, ...]
    ) -> Any:
        """Step *name* of job *job_id*: its journaled result, or ``fn(*args)``'s, journaled first."""
        check_step(name, fn)
        attempt = self.attempts.setdefault(job_id, _Attempt())
        if name in attempt.called:
            raise ValueError(
                f"step {name!r} was taken twice by job {job_id}: names are unique (a step"
                " that raised may be taken again)"
            )
        attempt.called.add(name)
        try:
            if attempt.done is None:
                attempt.done = dict(await self.journal.steps(job_id))
            data = attempt.done.get(name)
            if data is None:
                data = await self._record(job_id, name, fn, args)
                attempt.done[name] = data
        except BaseException:
            attempt.called.discard(name)  # not recorded: the handler may take it again
            raise
        return self.codec.decode(data)

    async def _record(
        self, job_id: int, name: str, fn: Callable[..., Any], args: tuple[Any, ...]
    ) -> bytes:
        data = await take_step(self.codec, job_id, name, fn, args, self.max_payload)
        if await self.journal.write([Core.step_taken(job_id, name, data)], now=self.now()):
            raise JobStateError(
                job_id, "finished", f"another writer finished it: step {name!r} not recorded"
            )
        return data

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
