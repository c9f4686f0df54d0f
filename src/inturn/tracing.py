"""``open_supervisor(..., tracing=...)``: OpenTelemetry, opted into, with no import until then.

`Tracing` names the providers inturn reports through; ``tracing=True`` is
``Tracing()``, the global ones.  Only a supervisor opened with it imports
``opentelemetry`` (the ``otel`` extra, `inturn._otel`); without it nothing
changes, and no OpenTelemetry module is loaded.

A value rather than two parameters: the tracer and meter providers go
together (an application that passes one usually passes both), it is
checked once where it is given, and options can join it later without
growing `open_supervisor`.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, final

import attrs

if TYPE_CHECKING:
    from ._otel import Observer

__all__ = ["Tracing", "ambient_trace", "observer_for"]


@final
@attrs.frozen(kw_only=True)
class Tracing:
    """Which OpenTelemetry providers a supervisor reports its spans and metrics through.

    Args:
        tracer_provider: an ``opentelemetry.trace.TracerProvider``; None: the global one
            (``opentelemetry.trace.get_tracer_provider()``), as it is when the
            supervisor opens.
        meter_provider: an ``opentelemetry.metrics.MeterProvider``; None: the global one.

    versionadded:: Unreleased
    """

    tracer_provider: Any = None
    meter_provider: Any = None


def observer_for(tracing: object) -> Observer | None:
    """The observer for `open_supervisor`'s *tracing*: None if False; else OpenTelemetry's.

    Raises:
        TypeError: *tracing* is neither a bool nor a `Tracing`.
        ImportError: tracing is on and ``opentelemetry-api`` is not installed.
    """
    if tracing is False:
        return None
    if tracing is True:
        tracing = Tracing()
    if not isinstance(tracing, Tracing):
        raise TypeError(f"tracing must be a bool or an inturn.Tracing, not {tracing!r}")
    try:
        from ._otel import Observer
    except ImportError as exc:  # pragma: no cover (the test environment has the extra)
        raise ImportError(
            f"tracing needs OpenTelemetry's API: pip install 'inturn[otel]' ({exc})"
        ) from exc
    return Observer(tracing.tracer_provider, tracing.meter_provider)


def ambient_trace() -> str | None:
    """The trace context the caller runs in, as the journal keeps it (`Append.trace`); None
    unless the program has loaded OpenTelemetry (a producer that traces has): checked
    without importing it."""
    if "opentelemetry.trace" not in sys.modules:
        return None
    from ._otel import current_trace

    return current_trace()
