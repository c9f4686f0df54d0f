"""The errors' fields and messages: what callers read off a caught error."""

from __future__ import annotations

import pickle

import pytest

import inturn


def test_duplicate_error_names_the_holder() -> None:
    """DuplicateError carries the unique key and the holder's job id, and says both."""
    error = inturn.DuplicateError("u", 7)
    assert (error.unique, error.job_id) == ("u", 7)
    assert str(error) == "unique key 'u' is held by job 7"


def test_job_discarded_names_the_job() -> None:
    """JobDiscarded carries the discarded job's id and says it."""
    error = inturn.JobDiscarded(3)
    assert error.job_id == 3
    assert str(error) == "job 3 was discarded"


@pytest.mark.parametrize(
    "error",
    [
        inturn.DuplicateError("u", 7),
        inturn.JobDiscarded(3),
        inturn.JournalLocked("j", "held by a single supervisor"),
    ],
)
def test_errors_with_fields_pickle(error: inturn.InturnError) -> None:
    """Errors with fields survive pickling with their fields and message."""
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert copy.__dict__ == error.__dict__
    assert str(copy) == str(error)
