"""The ``inturn`` command's argument types: each checks one argument as argparse reads it,
and says what is wrong with it in argparse's own way (`argparse.ArgumentTypeError`)."""

from __future__ import annotations

import argparse
import math

from ._cli_text import parse_duration
from ._core_audit import check_actor
from .journal._postgres_schema import check_schema

__all__ = ["actor", "duration", "entry_id", "job_id", "limit", "schema", "seconds"]


def job_id(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"bad job id {text!r}: a job id is a whole number >= 1")
    return int(text)


def entry_id(text: str) -> int:
    """An audit trail entry's id (``inturn audit --before``)."""
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"bad entry id {text!r}: a whole number >= 1")
    return int(text)


def schema(text: str) -> str:
    try:
        return check_schema(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def actor(text: str) -> str:
    try:
        return check_actor(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def limit(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"bad limit {text!r}: a whole number >= 1")
    return int(text)


def seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (0 < seconds < math.inf):
        raise argparse.ArgumentTypeError(f"bad wait {text!r}: a number of seconds > 0")
    return seconds


def duration(text: str) -> str:
    """*text* checked, as messages show it: a bare number of seconds gains its ``s``."""
    try:
        parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return f"{int(text)}s" if text.isdigit() else text
