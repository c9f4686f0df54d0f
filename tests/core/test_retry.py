"""The retry policy: delays per attempt, jitter, when a job is given up, validation."""

from __future__ import annotations

import math
import random
from typing import Any

import attrs
import pytest
from hypothesis import given, strategies as st

import inturn
from inturn import Retry

BOOM = ValueError("boom")


def no_jitter() -> float:
    """A random source at the middle of [0, 1): jitter adds nothing."""
    return 0.5


def must_not_be_called() -> float:
    raise AssertionError("the random source was consulted for a discarded job")


# Retry(initial_delay=0.5, multiplier=2.0, max_delay=60.0): 0.5 * 2 ** (n - 1),
# which passes 60 at attempt 8 (64.0) and is capped there.
@pytest.mark.parametrize(
    ("attempt", "expected"),
    [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (5, 8.0), (6, 16.0), (7, 32.0), (8, 60.0), (9, 60.0)],
)
def test_delay_grows_exponentially_up_to_max_delay(attempt: int, expected: float) -> None:
    """Attempt n that fails waits min(max_delay, initial_delay * multiplier**(n-1))."""
    retry = Retry(max_attempts=10, initial_delay=0.5, multiplier=2.0, max_delay=60.0, jitter=0.0)
    assert expected == min(60.0, 0.5 * 2.0 ** (attempt - 1))
    assert retry.delay_after(attempt, BOOM, random=no_jitter) == expected


@pytest.mark.parametrize(("attempt", "expected"), [(1, 1.0), (2, 3.0), (3, 9.0), (4, 20.0)])
def test_delay_with_other_parameters(attempt: int, expected: float) -> None:
    """The formula holds for a multiplier of 3 and a cap of 20 as well."""
    retry = Retry(max_attempts=5, initial_delay=1.0, multiplier=3.0, max_delay=20.0, jitter=0.0)
    assert retry.delay_after(attempt, BOOM, random=no_jitter) == expected


def test_multiplier_one_gives_a_constant_delay() -> None:
    """With multiplier=1 every attempt waits initial_delay."""
    retry = Retry(max_attempts=100, initial_delay=2.5, multiplier=1.0, jitter=0.0)
    assert {retry.delay_after(n, BOOM, random=no_jitter) for n in range(1, 100)} == {2.5}


def test_zero_initial_delay_retries_at_once() -> None:
    """With initial_delay=0 every retry is immediate, however large the multiplier."""
    retry = Retry(max_attempts=50, initial_delay=0.0, multiplier=10.0, jitter=0.5)
    assert retry.delay_after(1, BOOM, random=lambda: 0.999) == 0.0
    assert retry.delay_after(49, BOOM, random=lambda: 0.0) == 0.0


def test_max_delay_below_initial_delay_caps_the_first_retry() -> None:
    """max_delay caps even the first delay when it is below initial_delay."""
    retry = Retry(initial_delay=10.0, max_delay=3.0, jitter=0.0)
    assert retry.delay_after(1, BOOM, random=no_jitter) == 3.0


def test_delay_is_a_float_for_int_arguments() -> None:
    """Int arguments give float delays, as trio's clock expects."""
    retry = Retry(max_attempts=5, initial_delay=1, multiplier=2, max_delay=60, jitter=0)
    delay = retry.delay_after(3, BOOM, random=no_jitter)
    assert type(delay) is float
    assert delay == 4.0


def test_jitter_lower_bound_at_random_zero() -> None:
    """random() == 0.0 shortens the delay by the full jitter fraction."""
    retry = Retry(initial_delay=10.0, jitter=0.1)
    assert retry.delay_after(1, BOOM, random=lambda: 0.0) == pytest.approx(9.0)


def test_jitter_upper_bound_just_below_one() -> None:
    """random() just below 1 lengthens the delay by just under the jitter fraction."""
    retry = Retry(initial_delay=10.0, jitter=0.1)
    delay = retry.delay_after(1, BOOM, random=lambda: 0.9999999)
    assert delay is not None
    assert 10.99999 < delay < 11.0


def test_jitter_applies_after_the_cap() -> None:
    """Jitter spreads the capped delay, so it can exceed max_delay by up to the fraction."""
    retry = Retry(max_attempts=20, initial_delay=1.0, max_delay=60.0, jitter=0.25)
    assert retry.delay_after(15, BOOM, random=lambda: 0.0) == pytest.approx(45.0)
    assert retry.delay_after(15, BOOM, random=lambda: 0.75) == pytest.approx(67.5)


def test_full_jitter_never_goes_negative() -> None:
    """With jitter=1 the delay ranges over [0, 2*delay) and is never negative."""
    retry = Retry(initial_delay=4.0, jitter=1.0)
    assert retry.delay_after(1, BOOM, random=lambda: 0.0) == 0.0
    assert retry.delay_after(1, BOOM, random=lambda: 0.75) == pytest.approx(6.0)


def test_seeded_random_gives_reproducible_delays() -> None:
    """The same seeded random source gives the same jittered delays."""
    retry = Retry(max_attempts=10, jitter=0.5)
    first = [retry.delay_after(n, BOOM, random=random.Random(7).random) for n in range(1, 10)]
    again = [retry.delay_after(n, BOOM, random=random.Random(7).random) for n in range(1, 10)]
    assert first == again


@pytest.mark.parametrize("max_attempts", [1, 2, 5])
def test_the_last_attempt_is_discarded(max_attempts: int) -> None:
    """Failing attempt number max_attempts returns None: the job is discarded."""
    retry = Retry(max_attempts=max_attempts)
    assert retry.delay_after(max_attempts, BOOM, random=must_not_be_called) is None
    assert retry.delay_after(max_attempts + 1, BOOM, random=must_not_be_called) is None


def test_the_attempt_before_the_last_is_retried() -> None:
    """Failing attempt max_attempts - 1 still gets a delay."""
    retry = Retry(max_attempts=3, initial_delay=1.0, jitter=0.0)
    assert retry.delay_after(2, BOOM, random=no_jitter) == 2.0


def test_default_policy_matches_the_issue() -> None:
    """The defaults are the issue's: 5 attempts, 0.5 s doubling to 60 s, 10% jitter."""
    assert Retry() == Retry(
        max_attempts=5, initial_delay=0.5, multiplier=2.0, max_delay=60.0, jitter=0.1, permanent=()
    )


class Rejected(inturn.PermanentError):
    """A subclass of PermanentError, as applications define them."""


@pytest.mark.parametrize("error", [inturn.PermanentError("no"), Rejected("no")])
def test_permanent_error_is_discarded_at_once(error: BaseException) -> None:
    """A PermanentError (or subclass) is never retried, even on the first attempt."""
    retry = Retry(max_attempts=5)
    assert retry.is_permanent(error)
    assert retry.delay_after(1, error, random=must_not_be_called) is None


def test_permanent_types_are_discarded_at_once() -> None:
    """An instance of a `permanent=` type, or of its subclass, is never retried."""
    retry = Retry(max_attempts=5, permanent=(LookupError, TimeoutError))
    for error in (LookupError("x"), KeyError("x"), TimeoutError()):
        assert retry.is_permanent(error)
        assert retry.delay_after(1, error, random=must_not_be_called) is None


def test_other_errors_are_retried() -> None:
    """An error that is neither PermanentError nor a `permanent=` type is retried."""
    retry = Retry(max_attempts=5, initial_delay=1.0, jitter=0.0, permanent=(KeyError,))
    assert not retry.is_permanent(ValueError("x"))
    assert not retry.is_permanent(LookupError("x"))  # a base class is not a subclass
    assert retry.delay_after(1, ValueError("x"), random=no_jitter) == 1.0


@pytest.mark.parametrize(
    ("multiplier", "attempt"),
    [(2.0, 1_100), (2.0, 10**8), (1.5, 10**8), (2, 1_100), (2, 100_000)],
)
def test_huge_attempts_do_not_overflow(multiplier: float, attempt: int) -> None:
    """An attempt number whose exponential outgrows floats gets max_delay, not an error."""
    retry = Retry(max_attempts=10**9, multiplier=multiplier, max_delay=60.0, jitter=0.0)
    assert retry.delay_after(attempt, BOOM, random=no_jitter) == 60.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_attempts": 0},
        {"max_attempts": -1},
        {"initial_delay": -0.1},
        {"max_delay": -1.0},
        {"multiplier": 0.5},
        {"multiplier": 0},
        {"jitter": -0.01},
        {"jitter": 1.01},
        *(
            {name: value}
            for name in ("initial_delay", "multiplier", "max_delay", "jitter")
            for value in (math.nan, math.inf, -math.inf)
        ),
    ],
)
def test_out_of_range_arguments_raise_value_error(kwargs: dict[str, Any]) -> None:
    """A number outside its field's range (or not finite) raises ValueError naming the field."""
    (name,) = kwargs
    with pytest.raises(ValueError, match=name):
        Retry(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_attempts": 1.5},
        {"max_attempts": "3"},
        {"max_attempts": None},
        {"initial_delay": "0.5"},
        {"multiplier": None},
        {"max_delay": "60"},
        {"jitter": [0.1]},
    ],
)
def test_non_numbers_raise_type_error(kwargs: dict[str, Any]) -> None:
    """An argument of the wrong type raises TypeError naming the field."""
    (name,) = kwargs
    with pytest.raises(TypeError, match=name):
        Retry(**kwargs)


@pytest.mark.parametrize(
    "name", ["max_attempts", "initial_delay", "multiplier", "max_delay", "jitter"]
)
@pytest.mark.parametrize("value", [True, False])
def test_bools_raise_type_error(name: str, value: bool) -> None:
    """A bool is not a number here: every numeric field refuses it with TypeError."""
    kwargs: dict[str, Any] = {name: value}
    with pytest.raises(TypeError, match=name):
        Retry(**kwargs)


def test_huge_max_attempts_is_accepted() -> None:
    """Any positive int is a valid max_attempts, even one no float can hold."""
    retry = Retry(max_attempts=10**400, jitter=0.0)
    assert retry.delay_after(10**6, BOOM, random=no_jitter) == 60.0


@pytest.mark.parametrize("name", ["initial_delay", "multiplier", "max_delay"])
def test_int_beyond_float_range_is_a_value_error(name: str) -> None:
    """An int delay or multiplier too large for a float raises ValueError naming the field."""
    kwargs: dict[str, Any] = {name: 10**400}
    with pytest.raises(ValueError, match=name):
        Retry(**kwargs)


@pytest.mark.parametrize(
    "permanent",
    [[ValueError], ValueError, {ValueError}, None, (ValueError, 3), ("ValueError",), (int,)],
)
def test_permanent_must_be_a_tuple_of_exception_types(permanent: object) -> None:
    """permanent= refuses anything but a tuple of exception classes, with TypeError."""
    with pytest.raises(TypeError, match="permanent must"):
        Retry(permanent=permanent)  # type: ignore[arg-type]


def test_edge_values_are_accepted() -> None:
    """The inclusive bounds of every range are valid, and ints pass for floats."""
    retry = Retry(
        max_attempts=1,
        initial_delay=0,
        multiplier=1,
        max_delay=0,
        jitter=1,
        permanent=(BaseException,),
    )
    assert retry.max_attempts == 1
    assert Retry(jitter=0.0).jitter == 0.0


def test_retry_is_frozen() -> None:
    """A Retry cannot be changed after it is built."""
    retry = Retry()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        retry.max_attempts = 9  # type: ignore[misc]
    assert retry.max_attempts == 5


def test_retry_is_a_hashable_value() -> None:
    """Two equal policies compare and hash equal (a frozen value)."""
    assert Retry(max_attempts=3) == Retry(max_attempts=3)
    assert hash(Retry(max_attempts=3)) == hash(Retry(max_attempts=3))
    assert Retry(max_attempts=3) != Retry(max_attempts=4)


def unjittered(retry: Retry, attempt: int) -> float:
    """The reference delay, straight from the issue's formula."""
    if retry.initial_delay == 0:
        return 0.0
    try:
        return min(retry.max_delay, retry.initial_delay * retry.multiplier ** (attempt - 1))
    except OverflowError:
        return retry.max_delay


policies = st.builds(
    Retry,
    max_attempts=st.integers(1, 10**6),
    initial_delay=st.floats(0, 1e6),
    multiplier=st.floats(1, 1e3),
    max_delay=st.floats(0, 1e9),
    jitter=st.floats(0, 1),
)


@given(
    retry=policies,
    attempt=st.integers(1, 10**6),
    fraction=st.floats(0, 1, exclude_max=True),
)
def test_delay_is_always_within_bounds(retry: Retry, attempt: int, fraction: float) -> None:
    """A delay is None at max_attempts, else within [0, max_delay*(1+jitter)] and the jitter band."""
    delay = retry.delay_after(attempt, BOOM, random=lambda: fraction)
    if attempt >= retry.max_attempts:
        assert delay is None
        return
    assert delay is not None
    assert 0.0 <= delay <= retry.max_delay * (1 + retry.jitter)
    base = unjittered(retry, attempt)
    assert base * (1 - retry.jitter) * (1 - 1e-9) <= delay <= base * (1 + retry.jitter) * (1 + 1e-9)
