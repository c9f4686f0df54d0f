"""The retry policy: how long a failing job waits, and when it is given up.

Pure: the jitter's random source is an argument, so a test passes a seeded
`random.Random(...).random` (or a constant) and gets exact delays.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from ._checks import check_number
from .errors import PermanentError, RetryAfter

__all__ = ["Retry"]


def _exception_types(
    instance: object,
    attribute: attrs.Attribute[tuple[type[BaseException], ...]],
    value: object,  # checked here: callers may pass anything
) -> None:
    if not isinstance(value, tuple):
        raise TypeError(f"permanent must be a tuple of exception types, not {value!r}")
    for item in value:
        if not (isinstance(item, type) and issubclass(item, BaseException)):
            raise TypeError(f"permanent must hold exception types, not {item!r}")


def _number(*types: type) -> Callable[[object, attrs.Attribute[Any], object], None]:
    """A validator: a finite number of *types* (int or float by default), never a bool."""
    allowed = types or (int, float)

    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        check_number(attribute.name, value, types=allowed)

    return check


@attrs.frozen(kw_only=True)
class Retry:
    """How a failing job is retried before it is discarded.

    Attempt *n* (1-based) that fails is retried after
    ``min(max_delay, initial_delay * multiplier ** (n - 1))`` seconds, spread
    uniformly by +/- *jitter* (a fraction of the delay).  *max_attempts* counts
    every attempt, the first included.  A `PermanentError`, or an instance of
    a type in *permanent*, is never retried.
    """

    max_attempts: int = attrs.field(default=5, validator=[_number(int), attrs.validators.ge(1)])
    initial_delay: float = attrs.field(default=0.5, validator=[_number(), attrs.validators.ge(0)])
    multiplier: float = attrs.field(default=2.0, validator=[_number(), attrs.validators.ge(1)])
    max_delay: float = attrs.field(default=60.0, validator=[_number(), attrs.validators.ge(0)])
    jitter: float = attrs.field(
        default=0.1, validator=[_number(), attrs.validators.ge(0), attrs.validators.le(1)]
    )
    permanent: tuple[type[BaseException], ...] = attrs.field(default=(), validator=_exception_types)

    def is_permanent(self, error: BaseException) -> bool:
        """Whether *error* discards its job without a retry."""
        return isinstance(error, (PermanentError, *self.permanent))

    def delay_after(
        self, attempt: int, error: BaseException, *, random: Callable[[], float]
    ) -> float | None:
        """Seconds to wait after failed *attempt* (1-based), or None to discard.

        *random* returns a float in [0, 1), as `random.random` does.
        """
        if attempt >= self.max_attempts or self.is_permanent(error):
            return None
        if isinstance(error, RetryAfter):  # the handler knows best
            return error.seconds
        delay = float(self.initial_delay)
        if delay > 0:
            try:
                delay = min(self.max_delay, delay * float(self.multiplier) ** (attempt - 1))
            except OverflowError:  # the exponential outgrew floats: it is capped anyway
                delay = self.max_delay
        return max(0.0, delay * (1 + self.jitter * (2 * random() - 1)))
