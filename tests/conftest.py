from __future__ import annotations

import logging
import os

import structlog
from hypothesis import settings

# inturn never configures structlog; the application does.  Tests log at debug
# level into a logger that prints nothing, so capture_logs() sees every event.
structlog.configure(
    processors=[],
    wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
    logger_factory=structlog.ReturnLoggerFactory(),
    cache_logger_on_first_use=False,
)

settings.register_profile("default", deadline=None)
settings.register_profile("ci", deadline=None, max_examples=200)
# CI (which sets CI=true) runs twice as many examples per property.
settings.load_profile("ci" if os.environ.get("CI") else "default")
