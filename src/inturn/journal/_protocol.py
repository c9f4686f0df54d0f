"""The port between the runtime and whatever stores its jobs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ..info import AuditEntry, JobInfo, KeyFilter, KeyInfo, Overview, ScheduleInfo
from .records import Answer, Change, Command, Recovery, StoredJob, Transaction

__all__ = ["Journal", "JournalReads"]


class JournalReads(Protocol):
    """What an operator reads: the read methods of a `Journal` (see there)."""

    async def keys(
        self, *, state: KeyFilter | None = None, limit: int = 100, now: float
    ) -> list[KeyInfo]: ...

    async def keys_by_name(
        self,
        *,
        state: KeyFilter | None = None,
        prefix: str = "",
        after: str | None = None,
        limit: int = 100,
        now: float,
    ) -> list[KeyInfo]: ...

    async def overview(self, *, now: float) -> Overview: ...

    async def job(self, job_id: int) -> JobInfo | None: ...

    async def jobs(self, key: str, *, limit: int = 100, after: int = 0) -> list[JobInfo]: ...

    async def scheduled(self, *, key: str | None = None, limit: int = 100) -> list[JobInfo]: ...

    async def schedules(
        self, *, after: str = "", limit: int = 100, name: str | None = None
    ) -> list[ScheduleInfo]: ...

    async def steps(self, job_id: int) -> list[tuple[str, bytes]]: ...

    async def dead_letters(
        self,
        *,
        key: str | None = None,
        limit: int = 100,
        after: int = 0,
        finished_before: float | None = None,
    ) -> list[JobInfo]: ...

    async def audit(
        self,
        *,
        after: int = 0,
        before: int | None = None,
        limit: int = 100,
        key: str | None = None,
        job_id: int | None = None,
    ) -> list[AuditEntry]: ...


class Journal(Protocol):
    """**Protocol:** where accepted jobs live until they are terminal.

    A supervisor calls `open` once when it starts, `write` for every change,
    and `aclose` when it stops; a journal can be opened again afterwards, the
    way a file is reopened after a restart.

    * ``write`` applies a batch of changes and returns only once they are
      durable (as durable as the journal promises).  A batch that breaks a
      rule raises and applies nothing: a unique key reserved by another job
      (unfinished, or finished within its ``unique_for``) is `DuplicateError`.  Job ids are chosen by the supervisor,
      increasing in acceptance order, starting at ``Recovery.next_id``: an
      ``Append`` whose id is not above every id appended before (in the same
      batch too) is refused, and so is a change naming a job id never
      appended.
    * The journal decides every race between writers (a supervisor and an
      operator, say): each change to a job is a compare-and-set on its state
      (see `inturn.journal.records`).  One that finds its job finished, or
      (a ``MarkAttempt`` starting an attempt) its key halted, is *superseded*:
      skipped while the rest of the batch applies, and returned by ``write``.
      The first commit wins; the loser learns it from the answer.
    * ``open`` returns the unfinished jobs in id order, with the attempts
      marked for each, and the halted keys: every keyless job, and of each key
      at least its oldest job, with a `Backlog` for the rest, which ``load``
      hands out page by page.  So a journal with a long backlog reopens in
      time and memory that grow with the keys, not the jobs.
    * Completed jobs may be forgotten; discarded ones are kept as dead letters
      (with their last error and when they were discarded) until a `Purge`.
      A `Retrying` or `MarkAttempt` names an unfinished job and a `Purge` a
      dead letter; any other is superseded.
    * A job appended with a due time is *scheduled*: unfinished (it holds
      its unique key, ``Discard`` applies to it) but in no key's sequence:
      ``open``, ``load``, ``keys`` and ``jobs`` leave it out and
      ``Recovery.scheduled`` counts it, until a `Due` gives it a place.
      Within a key, jobs run in the order of their places (`StoredJob.place`),
      which ``load`` and ``jobs`` page by: a job's id, or the ``seq`` its
      `Due` gave it.

    Every method is a cancellation point: if the caller is cancelled before
    anything is stored, it raises `trio.Cancelled` and stores nothing.  A
    journal that waits for I/O yields to other tasks; one that has nothing to
    wait for (`MemoryJournal`) need not, as the runtime adds the schedule
    points fairness needs.  A failure raises `inturn.JournalError` (or a
    subclass) and leaves the journal as it was before the call.
    """

    async def open(self) -> Recovery:
        """Claim the journal for one supervisor and return what it holds."""
        ...

    async def write(
        self, changes: Sequence[Change], *, now: float | None = None
    ) -> Sequence[Change]:
        """Apply *changes* atomically, in order; return the superseded ones (usually none).

        *now* is the writer's Unix time (None: the journal's ``time.time()``).
        It dates the batch (a new job's ``accepted_at``, a dead letter's
        ``finished_at``) and judges unique keys' reservations: a job
        finishing in this batch reserves its key until ``now + unique_for``,
        and a reservation ending at or before *now* is free.  The writer's,
        not the journal's clock, so that every time a supervisor writes and
        compares comes from one clock (virtual, under trio's mock clock),
        and the check and the insert stay one atomic step in the journal.
        """
        ...

    async def transaction(
        self, change: Transaction, run: Callable[[Any], bytes], *, now: float | None = None
    ) -> bytes | None:
        """Apply *change*, a step taken as a transaction: ``run(connection)``'s result, recorded.

        In one transaction of the journal's own database: check the fence (the
        job unfinished, no attempt after ``change.attempt`` started; a fleet
        member also owns the job's key), then, unless the job recorded the
        step's name already, call *run* with a connection to that database
        (its writes the user's own) and record what it returns as the job's
        `Step`.  All of it commits, or none of it does:

        * the fence refuses: None, and *run* is not called (`LeaseLost` for
          a fleet member that no longer owns the key); a job never appended
          is `JournalError`;
        * recorded already: that result, and *run* is not called;
        * *run* raises: its writes are rolled back and its exception raised,
          nothing recorded.

        *run* is called on the journal's own thread (not trio's, for a journal
        that has one), and must not commit or roll back.  *now* is as for
        `write`.  The kit's ``TransactionConformance`` holds a journal to this.
        """
        ...

    async def load(self, key: str, after: int, limit: int) -> Sequence[StoredJob]:
        """Up to *limit* unfinished jobs of *key* with ids above *after*, in id order.

        Sees every write that returned before it was called.
        """
        ...

    # -- what an operator reads (Supervisor.keys, the ``inturn`` command) ----
    #
    # States come from what a journal stores: a dead letter is "dead"; an
    # unfinished job is "retrying" while a `Retrying` is its latest mark (the
    # next `MarkAttempt` ends it), else "running" once an attempt was marked,
    # else "queued".  These reads see every write that returned before they
    # were called; like `load` they need the journal open (`JournalError`
    # otherwise), and they raise `TypeError` or `ValueError` for a bad
    # argument (a *limit* that is not an int >= 1, an unknown *state*, ...).

    async def keys(
        self, *, state: KeyFilter | None = None, limit: int = 100, now: float
    ) -> list[KeyInfo]:
        """Keys with unfinished jobs, or halted: oldest head first (halted, empty keys last).

        One `KeyInfo` per key; keyless jobs belong to no key and are left out.
        The head is the key's oldest unfinished job; a halted key without one
        comes last (by key), with ``queued=0`` and no head.  *state* keeps only
        ``"blocked"`` keys (head retrying, or halted), ``"running"`` ones (head
        running), ``"halted"`` ones, or as `Overview` splits them ``"retrying"``,
        ``"waiting"`` or ``"paused"`` ones (`KeyFilter`).  *now* (Unix time) dates
        ``head_age``.
        """
        ...

    async def keys_by_name(
        self,
        *,
        state: KeyFilter | None = None,
        prefix: str = "",
        after: str | None = None,
        limit: int = 100,
        now: float,
    ) -> list[KeyInfo]:
        """Keys with unfinished jobs, or halted, as `keys` gives them, by key in code-point order.

        For pages of a dashboard: only keys above *after* (the last key of the
        page before; never an offset), only keys that start with *prefix* (a
        plain prefix: no character in it is a wildcard), only those *state*
        passes (`KeyFilter`).  Served by indexes: a page costs about its
        *limit*, not the number of keys.
        """
        ...

    async def overview(self, *, now: float) -> Overview:
        """The journal at a glance (`Overview`): keys by state, jobs waiting, dead letters,
        the oldest job's age and the jobs finished in each of the last 15 minutes, as of
        *now* (Unix time).  Counts come from indexes and small counters, not from a walk
        over the jobs."""
        ...

    async def job(self, job_id: int) -> JobInfo | None:
        """The unfinished job or dead letter *job_id*; None if there is none."""
        ...

    async def jobs(self, key: str, *, limit: int = 100, after: int = 0) -> list[JobInfo]:
        """*key*'s unfinished jobs in its sequence with places above *after*, in order
        (its head first); at most *limit*.  Scheduled jobs are in no sequence yet."""
        ...

    async def steps(self, job_id: int) -> list[tuple[str, bytes]]:
        """The steps unfinished job or dead letter *job_id* recorded (`Step`), in the order recorded.

        Empty for a job with none, or no such job.  Sees every write that
        returned before it was called.
        """
        ...

    async def scheduled(self, *, key: str | None = None, limit: int = 100) -> list[JobInfo]:
        """Scheduled jobs (of *key*, if given), the earliest due first (by due time, then id); at most *limit*.

        The runtime reads them to promote those due (`Due`); an operator, to
        see what is to come.
        """
        ...

    async def schedules(
        self, *, after: str = "", limit: int = 100, name: str | None = None
    ) -> list[ScheduleInfo]:
        """Recurring schedules (`ScheduleSet`) with names after *after*, by name; at most *limit*;
        with *name*, the one of that name (or none)."""
        ...

    async def due_schedules(self, *, limit: int = 100) -> list[ScheduleInfo]:
        """Running (not paused) schedules, the earliest cursor (``next_at``) first; at most *limit*.

        The runtime reads them to fire those due (`Fire`), and waits for the
        first cursor of the rest: one read per due batch, however many
        schedules the journal holds.
        """
        ...

    async def dead_letters(
        self,
        *,
        key: str | None = None,
        limit: int = 100,
        after: int = 0,
        finished_before: float | None = None,
    ) -> list[JobInfo]:
        """Dead letters in id order: of *key* if given, with ids above *after*,
        discarded before *finished_before* (Unix time) if given; at most *limit*."""
        ...

    async def audit(
        self,
        *,
        after: int = 0,
        before: int | None = None,
        limit: int = 100,
        key: str | None = None,
        job_id: int | None = None,
    ) -> list[AuditEntry]:
        """The audit trail (`Audit`s written), newest first: entries with ids above *after*
        and (if given) below *before*, of *key* and of *job_id* if given; at most *limit*.

        Pages by id, never by offset: the next page of older entries is
        ``before=`` the last id seen; what is new since a look, ``after=`` the
        first.  Holds the newest ``keep`` entries at least as the last `Audit`
        written asked (fewer if ids skipped, as a sequence's may).
        """
        ...

    # -- operator commands: a fix for the supervisor that holds the journal ----
    #
    # An operator cannot change a journal a supervisor holds behind its
    # back: the supervisor alone decides for the keys it owns.  It sends a
    # `Command` through the journal instead; the supervisor takes it, carries
    # it out with its own methods, and answers.

    async def commands(self) -> Sequence[Command]:
        """Wait until commands are waiting, take them, and return them, oldest first.

        Each is returned once; one taken and never answered (the supervisor
        died) is returned again after the next `open`.  Needs the journal open.
        """
        ...

    async def answer(self, command_id: int, answer: Answer) -> None:
        """Record what the supervisor answered command *command_id*."""
        ...

    async def submit(self, command: Command, *, timeout: float) -> Answer:  # noqa: ASYNC109 (not a deadline: the supervisor's time to take it, or it is withdrawn)
        """From an operator, while a supervisor holds the journal: send *command*, await the answer.

        Raises `JournalError` when no supervisor takes it within *timeout*
        seconds (it is withdrawn: nothing changed), or takes it and does not
        answer in time (it may still be carried out).  A wait cancelled or
        interrupted withdraws the command as well, unless it was taken.
        """
        ...

    def reader(self) -> JournalReads:
        """The operator's reads, usable while another party holds the journal."""
        ...

    async def aclose(self) -> None:
        """Release the journal; its contents stay for the next `open`."""
        ...
