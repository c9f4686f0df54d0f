"""OpenTelemetry's SDK, in memory: the spans and metrics a supervisor reports, for the tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import inturn


@attrs.define
class Telemetry:
    """A tracer and meter provider of the SDK's, and what they have exported."""

    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader

    @property
    def tracing(self) -> inturn.Tracing:
        return inturn.Tracing(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider
        )

    def spans(self, prefix: str = "") -> list[ReadableSpan]:
        """The finished spans whose names begin with *prefix*, in the order they ended."""
        return [s for s in self.exporter.get_finished_spans() if s.name.startswith(prefix)]

    def points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        """Metric *name*'s data points: their attributes, and their value (a sum's) or count."""
        found: list[tuple[dict[str, Any], Any]] = []
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        for point in metric.data.data_points:
                            value = getattr(point, "value", None)
                            if value is None:
                                value = getattr(point, "count", None)  # a histogram's
                            found.append((dict(point.attributes or {}), value))
        return found


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Telemetry(tracer_provider, meter_provider, exporter, reader)
    tracer_provider.shutdown()
    meter_provider.shutdown()
