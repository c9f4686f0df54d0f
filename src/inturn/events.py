"""Lifecycle events for metrics: ``open_supervisor(on_event=...)``.

Every event inturn logs through structlog also reaches *on_event* as an
`Event` of the same name, so an application can count jobs, retries and
discards in Prometheus or OpenTelemetry without inturn depending on either.
Without *on_event* the runtime logs through its structlog logger directly
and pays nothing for this.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from typing import Any, Final, Protocol, TypeVar, final

import attrs
import structlog

__all__ = ["Event", "EventTee", "Logger", "debug_is_off"]


class Logger(Protocol):
    """What the runtime logs through: a structlog bound logger, or an `EventTee`."""

    def debug(self, event: str, /, **fields: Any) -> object: ...
    def info(self, event: str, /, **fields: Any) -> object: ...
    def warning(self, event: str, /, **fields: Any) -> object: ...
    def error(self, event: str, /, **fields: Any) -> object: ...


_NOP: Final = structlog.make_filtering_bound_logger(logging.INFO).debug
"""What a structlog filtering logger's method for a level it filters out is: a no-op."""


def debug_is_off(log: object) -> bool:
    """Whether *log*'s debug method is a no-op for as long as *log* lives.

    True only for structlog's filtering loggers that filter debug out: their
    level is their class's, made with the class, so skipping their debug
    calls changes nothing, and saves a call per event (5% of a no-op job at
    one key).  A logger that may turn debug on later (structlog's stdlib
    one, an `EventTee`) is called every time.
    """
    return getattr(type(log), "debug", None) is _NOP


@final
@attrs.frozen(kw_only=True)
class Event:
    """One lifecycle event: *name* is the structlog event's (``"job.completed"``, ...)."""

    name: str
    key: str | None = None
    job_id: int | None = None
    attempt: int | None = None
    error: str | None = None
    """The failure's text (``job.discarded``, ``job.retry_scheduled``, ``actor.crashed``)."""
    at: float | None = None
    """``job.retry_scheduled``: trio time of the next attempt."""
    member: str | None = None
    """A fleet member, ``host:pid``: the expired one a key was taken from
    (``key.taken_over``), or that was forgotten (``fleet.member_expired``)."""
    epoch: int | None = None
    """``key.claimed``, ``key.taken_over``: the fencing token of the new ownership."""
    keys: int | None = None
    """``fleet.member_expired``: how many keys the expired member owned, released."""


@attrs.define(eq=False)
class EventTee:
    """Quacks like the runtime's bound logger: logs, then hands an `Event` to *on_event*.

    An *on_event* that raises is logged and ignored: metrics must not stop jobs.
    """

    log: Logger
    on_event: Callable[[Event], object]

    def is_enabled_for(self, level: int) -> bool:
        """Every event reaches *on_event*, whatever the logger's level (`debug_is_off`)."""
        return True

    def debug(self, name: str, /, **fields: Any) -> None:
        self.log.debug(name, **fields)
        self._emit(name, fields)

    def info(self, name: str, /, **fields: Any) -> None:
        self.log.info(name, **fields)
        self._emit(name, fields)

    def warning(self, name: str, /, **fields: Any) -> None:
        self.log.warning(name, **fields)
        self._emit(name, fields)

    def error(self, name: str, /, **fields: Any) -> None:
        self.log.error(name, **fields)
        self._emit(name, fields)

    def _emit(self, name: str, fields: dict[str, Any]) -> None:
        error = fields.get("error")
        event = Event(
            name=name,
            key=_typed(fields.get("key"), str),
            job_id=_typed(fields.get("job_id"), int),
            attempt=_typed(fields.get("attempt"), int),
            error=_typed(error, str),
            at=_typed(fields.get("at"), float),
            member=_typed(fields.get("member"), str),
            epoch=_typed(fields.get("epoch"), int),
            keys=_typed(fields.get("keys"), int),
        )
        try:
            self.on_event(event)
        except Exception as exc:
            self.log.warning(
                "on_event.failed",
                event_name=name,
                error=error_text(exc),
                exception=exception_text(exc),
            )


def error_text(error: BaseException) -> str:
    """*error*'s type and message, as the last line of its traceback shows them."""
    return "".join(traceback.format_exception_only(error)).strip()


def exception_text(error: BaseException) -> str:
    """*error*'s traceback as the standard library prints it: frames, never their locals.

    The runtime logs this (as ``exception=``, the field structlog's renderers
    print as a traceback) and never ``exc_info=``: handed the exception itself,
    a renderer such as rich's or better-exceptions' (the console default when
    installed), or an error tracker, shows each frame's locals, and an
    inturn frame may hold a payload there.
    """
    return "".join(traceback.format_exception(error)).rstrip("\n")


_T = TypeVar("_T")


def _typed(value: object, kind: type[_T]) -> _T | None:
    return value if isinstance(value, kind) else None
