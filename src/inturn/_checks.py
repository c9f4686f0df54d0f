"""The one check every numeric option goes through (pure)."""

from __future__ import annotations

import functools
import inspect
import math
from typing import Final

__all__ = [
    "MAX_COUNT",
    "MAX_PAYLOAD",
    "MAX_STEP_NAME",
    "MAX_UNIQUE_FOR",
    "check_count",
    "check_float",
    "check_handler",
    "check_number",
    "check_step",
]

MAX_COUNT: Final = 2**31 - 1
"""The largest count an option takes: far beyond use, and within every journal's integers."""

MAX_PAYLOAD: Final = 1024**3
"""The largest `max_payload`: 1 GiB, under SQLite's largest value (2**31 - 1 bytes)."""

MAX_UNIQUE_FOR: Final = 10 * 365 * 86400
"""The longest dedup window (``unique_for``): ten years, in seconds."""


MAX_STEP_NAME: Final = 200
"""The longest step name (`inturn.Job.step`), in characters."""


def check_number(name: str, value: object, *, types: tuple[type, ...] = (int, float)) -> None:
    """Raise unless *value* is a finite number of one of *types*, and not a bool.

    Raises:
        TypeError: *value* is a bool (an int to `isinstance`, never meant as
            one), or not of *types*.
        ValueError: *value* is NaN or infinite, or an int too large for a
            float where floats are allowed.
    """
    if isinstance(value, bool) or not isinstance(value, types):
        names = " or ".join(kind.__name__ for kind in types)
        raise TypeError(f"{name} must be {names}, not {type(value).__name__}")
    try:
        finite = math.isfinite(value)  # type: ignore[arg-type]
    except OverflowError:  # an int beyond any float: fine as a count, not as a float
        finite = float not in types
    if not finite:
        raise ValueError(f"{name} must be finite, not {value!r}")


def check_count(name: str, value: object, *, minimum: int, maximum: int | None = None) -> int:
    """*value* if it is an int (not a bool) from *minimum* to *maximum*; else TypeError or ValueError."""
    check_number(name, value, types=(int,))
    assert isinstance(value, int)
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, not {value!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, not {value!r}")
    return value


def check_step(name: object, fn: object) -> None:
    """Raise TypeError or ValueError for a bad step name or function."""
    if not isinstance(name, str):
        raise TypeError(f"a step name must be a str, not {type(name).__name__}")
    if not 0 < len(name) <= MAX_STEP_NAME:
        raise ValueError(f"a step name must be 1 to {MAX_STEP_NAME} characters, not {len(name)}")
    if not callable(fn):
        raise TypeError(f"a step's function must be callable, not {type(fn).__name__}")


def check_transaction(name: object, fn: object) -> None:
    """Raise TypeError or ValueError for a bad transaction name or function: a step's, and
    plain (``def``): it runs on the journal's thread, inside its transaction, where nothing
    could await it."""
    check_step(name, fn)
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 (the method, not whether it is callable)
    ):
        raise TypeError(
            "a transaction's function must be a plain def function, not async: it runs on"
            " the journal's thread, inside the journal's transaction"
        )


def check_handler(handler: object) -> None:
    """Raise TypeError unless *handler* is an async callable: an ``async def`` function, a
    `functools.partial` of one, or an object whose ``__call__`` is one.

    A plain ``def`` handler would fail every attempt with a `TypeError` from the
    ``await``, through every retry into the dead letters: refused at open instead.
    Not run in a worker thread on the user's behalf: a thread cannot be
    cancelled, so a skip or a ``job_timeout`` could not stop it, and a job's
    ``step`` is awaited.  A wrapper that returns a coroutine from a ``def`` is
    refused too: it is written with ``async def`` (and ``await``) instead.
    """
    if not callable(handler):
        raise TypeError(f"handler must be an async callable, not {type(handler).__name__}")
    function: object = handler
    while isinstance(function, functools.partial):
        function = function.func
    method = type(function).__call__  # an object's ``__call__``; a function's says nothing
    if not (inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(method)):
        raise TypeError(
            f"handler must be an async function (async def), not {type(handler).__name__}"
            f" {getattr(handler, '__qualname__', '')!r}; for blocking work, call it from one:"
            " `async def handler(job): return await trio.to_thread.run_sync(work, job)`"
        )


def check_float(name: str, value: object, *, minimum: float, inclusive: bool = True) -> float:
    """*value* as a float if it is a finite number (not a bool) from *minimum* up (above it
    unless *inclusive*); else TypeError or ValueError."""
    check_number(name, value)
    assert isinstance(value, int | float)
    if value < minimum or (not inclusive and value == minimum):
        relation = ">=" if inclusive else ">"
        raise ValueError(f"{name} must be a finite number {relation} {minimum}, not {value!r}")
    return float(value)
