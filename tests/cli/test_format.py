"""Durations in, ages out: the two pure helpers of the command line."""

from __future__ import annotations

import pytest

from inturn.cli import format_age, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("5m", 300),
        ("2h", 7200),
        ("7d", 604_800),
        ("1h30m", 5400),
        ("1d2h3m4s", 93_784),
        ("90m", 5400),
        ("0s", 0),
        ("2d12h", 216_000),
    ],
)
def test_parse_duration_reads_whole_units_in_order(text: str, seconds: float) -> None:
    """d, h, m, s, each at most once and largest first, add up."""
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(("text", "seconds"), [("90", 90), ("0", 0), ("007", 7), ("86400", 86_400)])
def test_parse_duration_reads_a_bare_whole_number_as_seconds(text: str, seconds: float) -> None:
    """``--older-than 90`` means 90 seconds: a number alone needs no unit."""
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text",
    [
        *["", "7x", "d", "1m1h", "1h1h", "-5m", "-5", "1.5h", "1.5", "1e3"],
        *[" 5m", "5m ", " 5", "5 m", "5M", "\uff15m", "\uff15", "\u0665"],
    ],
)
def test_parse_duration_rejects_anything_else(text: str) -> None:
    """No signs, fractions, exponents, spaces, repeats, other units or non-ASCII digits."""
    with pytest.raises(ValueError, match="bad duration"):
        parse_duration(text)


@pytest.mark.parametrize("text", ["9" * 400, "9" * 400 + "d", "1" + "0" * 310 + "s"])
def test_parse_duration_refuses_what_no_float_holds(text: str) -> None:
    """A duration of hundreds of digits is a ValueError, not an OverflowError or infinity."""
    with pytest.raises(ValueError, match="too long"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "age"),
    [
        (0, "0s"),
        (0.9, "0s"),
        (45, "45s"),
        (59.99, "59s"),
        (60, "1m00s"),
        (192, "3m12s"),
        (3599, "59m59s"),
        (3600, "1h00m"),
        (7500, "2h05m"),
        (86_399, "23h59m"),
        (86_400, "1d0h"),
        (86_400 + 3 * 3600 + 59 * 60, "1d3h"),
        (40 * 86_400, "40d0h"),
        (-5, "0s"),  # a clock a little behind another is not a negative age
    ],
)
def test_format_age_shows_two_units_at_most(seconds: float, age: str) -> None:
    """The two largest units, truncated; minutes and seconds after a larger unit take two digits."""
    assert format_age(seconds) == age
