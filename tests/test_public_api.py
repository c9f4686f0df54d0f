"""``inturn.__all__`` is the contract: what it names exists, and errors form one tree."""

from __future__ import annotations

import subprocess
import sys

import pytest

import inturn

ERRORS = [
    inturn.InvalidKey,
    inturn.DuplicateError,
    inturn.JobDiscarded,
    inturn.PermanentError,
    inturn.EncodeError,
    inturn.DecodeError,
    inturn.SupervisorClosed,
    inturn.JournalError,
    inturn.JournalCorrupt,
    inturn.JournalLocked,
    inturn.LeaseLost,
    inturn.JobNotFound,
    inturn.KeyNotFound,
    inturn.JobStateError,
]

CONTRACT = {
    # the names the core-runtime issue promises
    "open_supervisor",
    "Job",
    "Stats",
    "Retry",
    "Journal",
    "MemoryJournal",
    "JSONCodec",
    "InturnError",
    "InvalidKey",
    "DuplicateError",
    "JobDiscarded",
    "PermanentError",
    "EncodeError",
    "SupervisorClosed",
}


@pytest.mark.parametrize("name", inturn.__all__)
def test_every_exported_name_exists(name: str) -> None:
    """Every name in inturn.__all__ is an attribute of the package."""
    assert getattr(inturn, name, None) is not None


def test_all_has_no_duplicates_or_private_names() -> None:
    """__all__ lists each name once and nothing that starts with "_"."""
    assert len(set(inturn.__all__)) == len(inturn.__all__)
    assert [name for name in inturn.__all__ if name.startswith("_")] == []


def test_all_holds_the_issue_contract() -> None:
    """Every name the issue's API contract uses is exported."""
    assert set(inturn.__all__) >= CONTRACT


def test_every_exported_error_is_listed_here() -> None:
    """Every exception class in __all__ is one this file checks (so a new one gets checked)."""
    exported = {
        getattr(inturn, name)
        for name in inturn.__all__
        if isinstance(getattr(inturn, name), type)
        and issubclass(getattr(inturn, name), BaseException)
    }
    assert exported == {inturn.InturnError, *ERRORS}


@pytest.mark.parametrize("error", ERRORS)
def test_every_error_subclasses_inturn_error(error: type[Exception]) -> None:
    """Every inturn error can be caught with ``except inturn.InturnError``."""
    assert issubclass(error, inturn.InturnError)
    assert issubclass(inturn.InturnError, Exception)


def test_invalid_key_is_a_value_error() -> None:
    """InvalidKey is also a ValueError, so ``except ValueError`` catches a bad key."""
    assert issubclass(inturn.InvalidKey, ValueError)


def test_not_found_errors_are_lookup_errors() -> None:
    """JobNotFound and KeyNotFound are also LookupErrors, like a missing dict key."""
    assert issubclass(inturn.JobNotFound, LookupError)
    assert issubclass(inturn.KeyNotFound, LookupError)


def test_encode_error_is_a_type_error() -> None:
    """EncodeError is also a TypeError, so ``except TypeError`` catches a bad payload."""
    assert issubclass(inturn.EncodeError, TypeError)


def test_decode_error_is_a_value_error() -> None:
    """DecodeError is also a ValueError."""
    assert issubclass(inturn.DecodeError, ValueError)


def test_import_inturn_does_not_import_testing() -> None:
    """``import inturn`` leaves inturn.testing unimported: it is opt-in."""
    code = "import sys, inturn; print('inturn.testing' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def test_testing_module_is_importable() -> None:
    """inturn.testing exists and offers Recorder."""
    import inturn.testing

    assert "Recorder" in inturn.testing.__all__


def test_importing_inturn_does_not_import_psycopg() -> None:
    """psycopg is an extra: ``import inturn`` (PostgresJournal included) works without it."""
    code = "import sys, inturn; inturn.PostgresJournal('postgresql://'); print('psycopg' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout == "False\n"
