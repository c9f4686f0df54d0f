"""The rules every sequence key and unique key obeys.

Keys end up in journals (SQLite, PostgreSQL) and log lines, so they are kept
to what every store handles without surprises: non-empty, valid UTF-8, no NUL,
at most 256 bytes.  An empty key is refused rather than treated as "no key":
it would quietly put unrelated jobs into one global sequence.
"""

from __future__ import annotations

from typing import Final

from ._checks import MAX_UNIQUE_FOR, check_number
from .errors import InvalidKey

MAX_KEY_BYTES: Final = 256


def validate_key(key: object, *, what: str = "key") -> str:
    """Return *key* if it obeys the key rules.

    Raises:
        TypeError: *key* is not a `str`.
        InvalidKey: *key* is a `str` that breaks a rule; the message says which.
    """
    if type(key) is not str:
        if not isinstance(key, str):
            raise TypeError(f"{what} must be a str, not {type(key).__name__}")
        key = str.__str__(key)  # its own characters, whatever its __str__ or encode() say
    if not key:
        raise InvalidKey(f"{what} must not be empty")
    if "\x00" in key:
        raise InvalidKey(f"{what} must not contain NUL")
    if key.isascii():  # one byte a character, and no surrogate: no need to encode it
        size = len(key)
    else:
        try:
            size = len(key.encode("utf-8"))
        except UnicodeEncodeError:
            raise InvalidKey(f"{what} must be valid UTF-8 (it has a lone surrogate)") from None
    if size > MAX_KEY_BYTES:
        raise InvalidKey(f"{what} must be at most {MAX_KEY_BYTES} bytes in UTF-8, not {size}")
    return key


def validate_unique(unique: object) -> str | None:
    """Return *unique* if it is None or obeys the key rules."""
    if unique is None:
        return None
    return validate_key(unique, what="unique")


def validate_unique_for(unique_for: object, unique: str | None) -> float | None:
    """Return *unique_for* as seconds if it is None, or a dedup window for *unique*.

    Raises:
        TypeError: *unique_for* is not a number (a bool is not one).
        ValueError: it is not finite, not > 0, over `MAX_UNIQUE_FOR`, or given
            without a *unique* key to reserve.
    """
    if unique_for is None:
        return None
    check_number("unique_for", unique_for)
    assert isinstance(unique_for, int | float)
    if not 0 < unique_for <= MAX_UNIQUE_FOR:
        raise ValueError(
            f"unique_for must be a number of seconds > 0 and <= {MAX_UNIQUE_FOR}"
            f" (ten years), not {unique_for!r}"
        )
    if unique is None:
        raise ValueError("unique_for needs a unique key: it is how long that key stays reserved")
    return float(unique_for)
