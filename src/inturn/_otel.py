"""OpenTelemetry spans and metrics for a supervisor opened with ``tracing=``: an observer.

Imported only when tracing is on (`inturn.tracing.observer_for`): it is the
one module of inturn that imports ``opentelemetry``.  It decides nothing.
The shell hands it what it already reports, and it turns that into spans
and metrics:

- a send (`sending`): a ``send {key}`` producer span around the write that
  accepts the jobs, made current while the context is read, so the jobs'
  creation context (`Append.trace`, kept by the journal) is that span's;
- an attempt (`processing`): a ``process {key}`` consumer span, current
  while the handler runs, linked to the creation context of each of its jobs
  (one for a job, every one for a batch), whichever process sent them;
- a step (`step`): a child ``step {name}`` or ``transaction {name}`` span,
  marked ``inturn.step.reused`` when the journaled result answered;
- an operator's fix (`fixing`): a ``fix {verb}`` span linked to the job;
- the lifecycle events the runtime logs (`ObservingLog`, a tee like
  `inturn.events.EventTee`): an attempt's outcome ends its span, and each
  event counts in the metrics.

Secrets: nothing here reads a payload, a step's result or an operator's
argument other than ids.  A failure is recorded as the runtime's error text
(type and message, `inturn.events.error_text`) in a span event and the span's
status: never ``record_exception``, which walks the traceback.  Keys go on
spans (``inturn.key``), never on metrics (unbounded cardinality).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio
from opentelemetry import context, metrics, trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .events import Logger, error_text

if TYPE_CHECKING:
    from ._entries import Entry

__all__ = ["Observer", "ObservingLog", "current_trace", "link_to"]

_PROPAGATOR: Final = TraceContextTextMapPropagator()
_SYSTEM: Final = {"messaging.system": "inturn"}
_KEYLESS: Final = "(keyless)"
"""A keyless job's destination in a span's name: it has no key to name."""
_FAILED: Final = frozenset(["retrying", "discarded", "halted"])
"""The outcomes of an attempt that failed (a snooze, say, is no failure)."""
_WAITS_KEPT: Final = 100_000
"""The most jobs whose acceptance time is kept for the wait histogram at once."""


def current_trace() -> str | None:
    """The current span's context as the journal keeps it: ``traceparent`` (and a space and
    ``tracestate`` if any); None outside any valid span."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    parent = carrier.get("traceparent")
    if parent is None:
        return None
    state = carrier.get("tracestate")
    return f"{parent} {state}" if state else parent


def link_to(text: str | None) -> Link | None:
    """A link to the context *text* (`current_trace`'s form); None if it names none."""
    if not text:
        return None
    found = trace.get_current_span(_context_of(text)).get_span_context()
    return Link(found) if found.is_valid else None


def _context_of(text: str) -> Context:
    parent, _, state = text.partition(" ")
    carrier = {"traceparent": parent}
    if state:
        carrier["tracestate"] = state
    return _PROPAGATOR.extract(carrier)


@attrs.define(eq=False)
class Sending:
    """A send under way: the context its jobs take (`trace`), and its span."""

    span: Span
    trace: str | None

    def accepted(self, ids: Sequence[int]) -> None:
        if len(ids) == 1:
            self.span.set_attribute("messaging.message.id", str(ids[0]))


@attrs.define(eq=False)
class Stepping:
    """A step under way: whether the journaled result answered (set by the step's taker)."""

    span: Span
    reused: bool = False


@attrs.define(eq=False, slots=True)
class _Attempt:
    """One attempt's span, shared by the jobs of a batch until each has an outcome."""

    span: Span
    started: float
    jobs: set[int]
    batch: bool
    error_type: str | None = None
    ended: bool = False


class Observer:
    """What a supervisor with tracing on reports to: spans and metrics, from the shell's facts."""

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        from . import __version__

        tracers = trace.get_tracer_provider() if tracer_provider is None else tracer_provider
        meters = metrics.get_meter_provider() if meter_provider is None else meter_provider
        self.tracer = tracers.get_tracer("inturn", __version__)
        meter = meters.get_meter("inturn", __version__)
        self.sent = meter.create_counter(
            "messaging.client.sent.messages", unit="{message}", description="Jobs sent."
        )
        self.consumed = meter.create_counter(
            "messaging.client.consumed.messages",
            unit="{message}",
            description="Jobs whose attempt had an outcome, by outcome (inturn.outcome).",
        )
        self.duration = meter.create_histogram(
            "messaging.process.duration",
            unit="s",
            description="How long an attempt took, from its handler's call to its outcome.",
        )
        self.waited = meter.create_histogram(
            "inturn.job.wait",
            unit="s",
            description="From a job's acceptance to its first attempt (jobs this process sent).",
        )
        self.retries = meter.create_counter(
            "inturn.job.retries", unit="{retry}", description="Attempts that will run again."
        )
        self.dead = meter.create_counter(
            "inturn.job.dead_letters", unit="{job}", description="Jobs discarded."
        )
        self.halts = meter.create_counter(
            "inturn.key.halts", unit="{key}", description="Keys halted by a discard."
        )
        self.takeovers = meter.create_counter(
            "inturn.fleet.takeovers",
            unit="{key}",
            description="Keys claimed from a fleet member whose heartbeat expired.",
        )
        self.refusals = meter.create_counter(
            "inturn.fleet.fencing_refusals",
            unit="{refusal}",
            description="Writes the journal refused as this member no longer owns the key.",
        )
        meter.create_observable_gauge(
            "inturn.job.oldest_wait",
            [self._oldest_wait],
            unit="s",
            description="Age of the oldest job waiting for its first attempt, of those sent here.",
        )
        self._attempts: dict[int, _Attempt] = {}
        self._accepted_at: dict[int, float] = {}

    # -- sends ---------------------------------------------------------------

    @contextmanager
    def sending(self, keys: Sequence[str | None], parent: str | None = None) -> Iterator[Sending]:
        """A ``send`` producer span around accepting jobs for *keys* (one per job): a child of
        the current span, or of context *parent* (the program that sent them, elsewhere)."""
        first = keys[0]
        one = all(key == first for key in keys)
        destination = (first or _KEYLESS) if one else "(many)"
        attributes: dict[str, Any] = {
            **_SYSTEM,
            "messaging.operation.name": "send",
            "messaging.operation.type": "send",
            "messaging.destination.name": destination,
        }
        if len(keys) > 1:
            attributes["messaging.batch.message_count"] = len(keys)
        if one and first is not None:
            attributes["inturn.key"] = first
        with self.tracer.start_as_current_span(
            f"send {destination}",
            context=None if parent is None else _context_of(parent),
            kind=SpanKind.PRODUCER,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            sending = Sending(span, current_trace())
            try:
                yield sending
            except Exception as exc:
                _failed(span, type(exc).__qualname__, error_text(exc))
                raise
        self.sent.add(len(keys), {**_SYSTEM, "messaging.operation.name": "send"})

    def accepted(self, ids: Sequence[int]) -> None:
        """Jobs *ids* were accepted now, to be run here: their wait is timed from now."""
        if len(self._accepted_at) + len(ids) <= _WAITS_KEPT:
            now = time.time()
            for job_id in ids:
                self._accepted_at[job_id] = now

    def _oldest_wait(self, options: object) -> Iterator[metrics.Observation]:
        if self._accepted_at:
            yield metrics.Observation(time.time() - min(self._accepted_at.values()))
        else:
            yield metrics.Observation(0.0)

    # -- attempts ------------------------------------------------------------

    @contextmanager
    def processing(self, entries: Sequence[Entry], epoch: int | None) -> Iterator[None]:
        """A ``process`` consumer span, current while the handler runs *entries*' attempt.

        Ended by the attempt's outcome (`settled`), which the runtime reports
        once journaled; by its end here if shutdown or an operator's skip cut
        the handler short and nothing else will report it.
        """
        head = entries[0]
        destination = head.key or _KEYLESS
        attributes: dict[str, Any] = {
            **_SYSTEM,
            "messaging.operation.name": "process",
            "messaging.operation.type": "process",
            "messaging.destination.name": destination,
            "messaging.message.id": str(head.id),
            "inturn.attempt": head.attempt,
        }
        if head.key is not None:
            attributes["inturn.key"] = head.key
        if epoch is not None:
            attributes["inturn.epoch"] = epoch
        if len(entries) > 1:
            attributes["messaging.batch.message_count"] = len(entries)
        links = [link for entry in entries if (link := link_to(entry.trace)) is not None]
        span = self.tracer.start_span(
            f"process {destination}", kind=SpanKind.CONSUMER, attributes=attributes, links=links
        )
        record = _Attempt(span, time.perf_counter(), {e.id for e in entries}, len(entries) > 1)
        now = time.time()
        for entry in entries:
            self._attempts[entry.id] = record
            accepted_at = self._accepted_at.pop(entry.id, None)
            if accepted_at is not None:
                self.waited.record(now - accepted_at, _SYSTEM)
        # Made current by hand: ``trace.use_span`` is a generator of its own, per attempt.
        token = context.attach(trace.set_span_in_context(span))
        try:
            yield
        except Exception as exc:
            record.error_type = type(exc).__qualname__
            raise
        except BaseException:
            skipped = any(entry.skipped for entry in entries)
            self._end(record, "skipped" if skipped else "interrupted")
            raise
        finally:
            context.detach(token)

    def settled(self, job_id: int | None, outcome: str, fields: dict[str, Any]) -> None:
        """Job *job_id*'s attempt had *outcome*: its span records it, and ends once every
        job of its attempt has one (or, for a batch, at its first failure)."""
        record = None if job_id is None else self._attempts.pop(job_id, None)
        if record is None:
            return
        record.jobs.discard(job_id)
        span = record.span
        error = fields.get("error")
        if record.batch:
            span.add_event(
                "inturn.outcome", {"messaging.message.id": str(job_id), "inturn.outcome": outcome}
            )
        if outcome in ("retrying", "snoozed"):
            at = fields.get("at")
            if isinstance(at, float):
                span.set_attribute("inturn.retry.delay", max(0.0, at - trio.current_time()))
        if isinstance(error, str) and outcome in _FAILED:
            _failed(span, record.error_type or error.partition(":")[0], error)
        if not record.batch or outcome != "completed" or not record.jobs:
            self._end(record, outcome)

    def _end(self, record: _Attempt, outcome: str) -> None:
        if record.ended:  # settled before shutdown or a skip cut its handler short
            return
        record.ended = True
        for job_id in record.jobs:
            self._attempts.pop(job_id, None)
        record.jobs.clear()
        span = record.span
        span.set_attribute("inturn.outcome", outcome)
        span.end()
        labels = {**_SYSTEM, "messaging.operation.name": "process", "inturn.outcome": outcome}
        self.duration.record(time.perf_counter() - record.started, labels)

    # -- steps and fixes -----------------------------------------------------

    @contextmanager
    def step(self, kind: str, name: str) -> Iterator[Stepping]:
        """A child span of the attempt for step *name* (*kind*: ``step`` or ``transaction``)."""
        with self.tracer.start_as_current_span(
            f"{kind} {name}",
            attributes={"inturn.step.name": name, "inturn.step.kind": kind},
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            stepping = Stepping(span)
            try:
                yield stepping
            except Exception as exc:
                _failed(span, type(exc).__qualname__, error_text(exc))
                raise
            finally:
                span.set_attribute("inturn.step.reused", stepping.reused)

    @contextmanager
    def fixing(self, verb: str, job_id: int | None, key: str | None) -> Iterator[Span]:
        """A ``fix {verb}`` span around an operator's fix, linked to its job's creation context
        if this supervisor holds the job (`fixed` adds what is learnt on the way)."""
        attributes: dict[str, Any] = {**_SYSTEM, "inturn.fix.verb": verb}
        if job_id is not None:
            attributes["messaging.message.id"] = str(job_id)
        if key is not None:
            attributes["inturn.key"] = key
        with self.tracer.start_as_current_span(
            f"fix {verb}",
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except Exception as exc:
                _failed(span, type(exc).__qualname__, error_text(exc))
                raise

    @staticmethod
    def fixed(span: Span, *, key: str | None, trace_text: str | None, outcome: str) -> None:
        """What fix *span* learnt: its job's key and creation context, and its outcome."""
        if key is not None:
            span.set_attribute("inturn.key", key)
        link = link_to(trace_text)
        if link is not None:
            span.add_link(link.context, {"inturn.link": "job"})
        span.set_attribute("inturn.fix.outcome", outcome)

    # -- the runtime's events ------------------------------------------------

    def seen(self, name: str, fields: dict[str, Any]) -> None:
        """The runtime logged event *name* with *fields*: settle its attempt, count it."""
        job_id = fields.get("job_id")
        match name:
            case "job.completed":
                self._count("completed")
                self.settled(job_id, "completed", fields)
            case "job.retry_scheduled":
                if not fields.get("recovered"):
                    self.retries.add(1, _SYSTEM)
                    self._count("retrying")
                    self.settled(job_id, "retrying", fields)
            case "job.snoozed":
                self._count("snoozed")
                self.settled(job_id, "snoozed", fields)
            case "job.discarded":
                self._no_wait(job_id)  # maybe discarded before its first attempt
                outcome = "halted" if fields.get("halt") else "discarded"
                self.dead.add(1, _SYSTEM)
                self._count(outcome)
                self.settled(job_id, outcome, fields)
            case "key.halted":
                self.halts.add(1, _SYSTEM)
            case "job.superseded":
                self._no_wait(job_id)
                self._count("superseded")
                self.settled(job_id, "superseded", fields)
            case "job.skipped":
                self._no_wait(job_id)
                self._count("skipped")
                self.settled(job_id, "skipped", fields)
            case "key.taken_over":
                self.takeovers.add(1, _SYSTEM)
            case "supervisor.lease_lost":
                self.refusals.add(1, _SYSTEM)
            case _:
                pass

    def _no_wait(self, job_id: int | None) -> None:
        """Job *job_id* will not start (or not here): its wait is not timed."""
        if job_id is not None:
            self._accepted_at.pop(job_id, None)

    def _count(self, outcome: str) -> None:
        labels = {**_SYSTEM, "messaging.operation.name": "process", "inturn.outcome": outcome}
        self.consumed.add(1, labels)


def _failed(span: Span, error_type: str, text: str) -> None:
    """Mark *span* failed with the runtime's error text: no traceback, no frame locals."""
    span.set_attribute("error.type", error_type)
    span.add_event("inturn.error", {"error.type": error_type, "inturn.error": text})
    span.set_status(Status(StatusCode.ERROR, text))


@attrs.define(eq=False)
class ObservingLog:
    """Quacks like the runtime's bound logger: logs, then hands each event to the observer."""

    log: Logger
    observer: Observer

    def is_enabled_for(self, level: int) -> bool:
        """Every event reaches the observer, whatever the logger's level."""
        return True

    def debug(self, name: str, /, **fields: Any) -> None:
        self.log.debug(name, **fields)
        self.observer.seen(name, fields)

    def info(self, name: str, /, **fields: Any) -> None:
        self.log.info(name, **fields)
        self.observer.seen(name, fields)

    def warning(self, name: str, /, **fields: Any) -> None:
        self.log.warning(name, **fields)
        self.observer.seen(name, fields)

    def error(self, name: str, /, **fields: Any) -> None:
        self.log.error(name, **fields)
        self.observer.seen(name, fields)
